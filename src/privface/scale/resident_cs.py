"""The cryptomask Cloud Server with its gallery resident in Ray shards (issue 38 §1, §3; seed 001 §3.1, Alg. 2).

``privface serve --protocol cryptomask --role cs --ray ADDRESS --shards K``: the gallery's blocks are split into K
contiguous ranges, one per Ray actor (``scale.resident.ResidentShards``: one placement group of K one-CPU bundles,
SPREAD, actors restarted by Ray after node loss, each reloading its blocks from the store). Each shard loads its
blocks once and switches them to the verifier's key (§4.5) — the CS's load cost, split over the shards — and keeps
them; it never sees sk or sk_v.

Alg. 2's CS part is per gallery ciphertext and per pack of ``group`` ciphertexts (the Galois packing), so a shard's
range must end on a pack boundary: the ranges are whole blocks with every boundary a multiple of
``group / gcd(group, cts_per_block)`` blocks. Then the packs of the gallery are the shards' packs in order, and
an identification is: the query rows checked and prepared once here (``prepare``, Alg. 2 line 2, the checks of
``he.CloudServer.prepare``), sent to every shard at once (one Ray object), each shard computes lines 5–11 over its
whole range — its packs (c_1, masked c_0) and the CS's shares d_0 of its entries — and the parts are concatenated
in block order (``Fanned``), from which ``distances_of`` hands the serving role (``CloudServerRole``) each
``DistanceChunk``'s slice: the same chunks, packs and entries one process sends. The masks are fresh per shard as
they are fresh per chunk in one process, so d_0 and d_1 differ from run to run; d_0 + d_1 mod t (what Alg. 3
compares) are the very inner products one process gives (tested).

Node loss: the fan-out happens inside ``prepare``, before the role answers a byte, and is retried once when a
shard was lost (``ResidentShards.fan_out``); if the retry fails too, UnavailableError — HTTP 503 with Retry-After
before the identification's stream starts, never a partial or mixed answer. Alg. 3 runs in this process (the CS's
side holds only d_0), so a lost node cannot touch an identification past its distances.

Online changes: ``grown`` has every shard whose range changed stage its blocks beside those it holds (the rewritten
last block reloaded, new blocks extending the last range until the shards are two pack units apart, then spread
again) and the role serves the grown view; identifications in flight ask the shards for the ranges of their own
view (``bindings.cryptomask``'s ``gallery/add``; an add stored while a shard restarts is staged by the next
identification). ``gallery/remove`` is refused on shards (remove with the CLI and restart the CS).
"""
from __future__ import annotations

import hashlib
import math
import os
import time
from dataclasses import dataclass

import numpy as np

from ..errors import PrivfaceError, ProtocolError
from ..protocols.cryptomask import he
from .cryptomask_gallery import CMGallery
from .layout import GalleryError
from .resident import PLACE_TIMEOUT, RETRY_AFTER, RETRY_TIMEOUT, SHARD_TIMEOUT, ResidentShards, block_ranges
from .resident import default_shards as _default_shards


class _CSShard:
    """One Ray actor: blocks lo … hi − 1 of the cryptomask gallery as a ``he.CloudServer`` (switched to sk_v),
    loaded once (again after a restart)."""

    def __init__(self, url: str, name: str, lo: int, hi: int, pk_sha256: bytes, counts: list[int]) -> None:
        os.environ["PRIVFACE_THREADS"] = os.environ["RAYON_NUM_THREADS"] = "1"  # one CPU (its bundle) per shard
        self.args, self.cs, self.error = (url, name, lo, hi, pk_sha256, counts), None, None
        self.lo, self.hi, self.resident_bytes, self.load_s = lo, hi, 0, 0.0
        self.views: dict[tuple, object] = {}  # (lo, hi, counts) → its he.CloudServer: the current and the one before
        self._load()

    def stage(self, lo: int, hi: int, counts: list[int]) -> bool:
        """Hold blocks lo … hi − 1 with these entry counts (the gallery grown by an add: ``ResidentCloudServer.grown``)
        beside the range held now, which identifications in flight may still ask for; the store's blocks are loaded
        anew (the last block was rewritten). False, with the error kept, if the store does not hold them so."""
        url, name, _, _, pk_sha256, _ = self.args
        key = (lo, hi, tuple(counts))
        if key not in self.views:
            old = self.args
            self.args = (url, name, lo, hi, pk_sha256, list(counts))
            self._load()
            if self.cs is None:
                self.args = old
                self._load()
                return False
        self.cs = self.views[key]
        return True

    def _load(self) -> None:
        url, name, lo, hi, pk_sha256, counts = self.args
        t = time.perf_counter()
        try:
            gallery = CMGallery(url, name)
            if hashlib.sha256(gallery.pk_bytes).digest() != pk_sha256:
                raise GalleryError("the gallery in the store is not the one the CS started with (public key)")
            if [gallery.block_count(b) for b in range(lo, hi)] != counts:
                raise GalleryError("the gallery in the store is not the one the CS started with (block sizes)")
            self.cs, self.error = gallery.cloud_server(range(lo, hi)), None
            self.views.pop((lo, hi, tuple(counts)), None)
            self.views[(lo, hi, tuple(counts))] = self.cs
            while len(self.views) > 2:  # the current range and the one before (identifications in flight)
                self.views.pop(next(iter(self.views)))
            self.lo, self.hi = lo, hi
        except PrivfaceError as e:  # kept for ``info`` / ``distances``: an actor failing in __init__ only dies
            self.cs, self.error = None, str(e)
            return
        self.resident_bytes, self.load_s = self.cs.storage_bytes, time.perf_counter() - t

    def info(self) -> dict:
        import ray

        return {"lo": self.lo, "hi": self.hi, "error": self.error, "load_s": round(self.load_s, 4),
                "resident_bytes": self.resident_bytes, "node": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid(), "version": None}

    def distances(self, rows: np.ndarray, mask: bool = True, view: tuple | None = None):
        """(lo, hi, c_1, masked c_0, d_0, seconds, CPU seconds): Alg. 2 lines 5–11 over the ciphertexts of ``view``
        ((lo, hi, counts): the range the identification's layout gives this shard; None: the one held now) with the
        prepared query rows. A shard that failed to load, or was restarted with the range it started with, loads the
        asked one first."""
        if view is not None and tuple(view[:2]) + (tuple(view[2]),) not in self.views:
            self.stage(view[0], view[1], list(view[2]))
        if self.cs is None:
            self._load()
            if self.cs is None:
                raise GalleryError(self.error or "the shard holds no blocks")
        cs = self.cs if view is None else self.views.get((view[0], view[1], tuple(view[2])))
        if cs is None:
            raise GalleryError(self.error or "the shard does not hold the blocks asked for")
        lo, hi = (self.lo, self.hi) if view is None else view[:2]
        t, c = time.perf_counter(), time.process_time()
        msg, d0 = cs.distances_of(rows, 0, cs.ciphertexts, mask=mask)
        return lo, hi, msg.c1, msg.c0, d0, time.perf_counter() - t, time.process_time() - c


def grown_ranges(ranges: list[tuple[int, int]], nblocks: int, align: int) -> list[tuple[int, int]]:
    """The block ranges after the gallery grew to ``nblocks`` (as ``resident.grown_ranges``, the boundaries on pack
    boundaries: multiples of ``align`` blocks): kept spread, never piled on the last shard."""
    grown = [*ranges[:-1], (ranges[-1][0], nblocks)]
    sizes = [hi - lo for lo, hi in grown]
    if sizes[-1] - min(sizes) < 2 * align:
        return grown
    even = block_ranges(nblocks, len(ranges), align)
    return even if len(even) == len(ranges) else grown


@dataclass
class Fanned:
    """One identification's Alg. 2 answer, gathered from every shard: the packs (c_1, masked c_0) of the whole
    gallery in order and the CS's shares d_0 of every entry (what ``he.CloudServer`` computes chunk by chunk)."""

    c1: np.ndarray
    c0: np.ndarray
    d0: np.ndarray


class ResidentCloudServer(ResidentShards):
    """The CS's ``he.CloudServer`` interface for ``CloudServerRole`` (``n``, ``dim``, ``count``, ``ciphertexts``,
    ``group``, ``prepare``, ``distances_of``) with the gallery's blocks in ``shards`` Ray actors."""

    def __init__(self, gallery: CMGallery, *, address: str = "auto", shards: int | None = None,
                 timeout: float = SHARD_TIMEOUT, retry_timeout: float = RETRY_TIMEOUT,
                 place_timeout: float = PLACE_TIMEOUT) -> None:
        front = he.CloudServer(gallery.public, gallery.dim)  # the CS's query checks; it holds no blocks
        front.set_switching_key(gallery.ksw, gallery.galois)
        front.count = gallery.n  # its checks need an enrolled gallery: the shards hold its blocks
        self.front, self.gallery = front, gallery
        self.n, self.t, self.dim, self.delta = front.n, front.t, gallery.dim, front.delta
        self.group, self.count = front.group, gallery.n
        self.ciphertexts = -(-gallery.n // self.delta)
        per_block = gallery.meta["cts_per_block"]
        align = self.align = self.group // math.gcd(self.group, per_block)  # blocks per pack boundary
        ranges = block_ranges(gallery.nblocks, _default_shards(address, shards), align)
        counts = [gallery.block_count(b) for b in range(gallery.nblocks)]
        pk = hashlib.sha256(gallery.pk_bytes).digest()
        self.ranges, self.counts = ranges, counts
        self._start_shards(address, _CSShard, ranges,
                           lambda i, lo, hi: (gallery.url, gallery.name, lo, hi, pk, counts[lo:hi]),
                           timeout=timeout, retry_timeout=retry_timeout, place_timeout=place_timeout)
        self.shard_s: list[float] = []
        self.shard_cpu_s: list[float] = []

    def grown(self, gallery: CMGallery) -> ResidentCloudServer:
        """The CS of ``gallery`` — the store's gallery grown by an add (issue 38 §2) — on the same shards: the new
        blocks extend the last range until it holds two blocks more than the least loaded one, then the boundaries
        are drawn evenly again on pack boundaries (``grown_ranges``); each shard whose range or counts changed
        stages its blocks beside the ones it holds (identifications in flight, on this object, keep asking for
        theirs). GalleryError, nothing switched, if a shard cannot load them."""
        import copy

        if gallery.nblocks < self.ranges[-1][1] or hashlib.sha256(gallery.pk_bytes).digest() != \
                hashlib.sha256(self.gallery.pk_bytes).digest():
            raise GalleryError("the gallery in the store is not the one served, grown")
        counts = [gallery.block_count(b) for b in range(gallery.nblocks)]
        ranges = grown_ranges(self.ranges, gallery.nblocks, self.align)
        try:
            staged = self._ray.get([s.stage.remote(lo, hi, counts[lo:hi]) for s, (lo, hi) in zip(self.shards, ranges)],
                                   timeout=self.timeout)
        except self._ray.exceptions.RayError:
            staged = [False]
        if not all(staged):
            raise GalleryError("a shard could not load the grown gallery")
        new = copy.copy(self)
        new.front = he.CloudServer(gallery.public, gallery.dim)
        new.front.set_switching_key(gallery.ksw, gallery.galois)
        new.front.count = new.count = gallery.n
        new.gallery, new.ranges, new.counts = gallery, ranges, counts
        new.ciphertexts = -(-gallery.n // self.delta)
        return new

    @property
    def storage_bytes(self) -> int:
        return sum(i["resident_bytes"] for i in self.loaded)

    def prepare(self, query: he.Query) -> Fanned:
        """Alg. 2: the query checked and its rows prepared (as ``he.CloudServer.prepare``), then lines 5–11 on every
        shard at once; UnavailableError (503) when a shard is lost and the one retry fails too."""
        rows = self.front.prepare(query)
        return self._fan(rows, mask=True)

    def _fan(self, rows: np.ndarray, mask: bool) -> Fanned:
        ref = self._ray.put(rows)
        views = [(lo, hi, self.counts[lo:hi]) for lo, hi in self.ranges]
        parts = self.fan_out(lambda i, s: s.distances.remote(ref, mask, views[i]))
        self.shard_s, self.shard_cpu_s = [p[5] for p in parts], [p[6] for p in parts]
        return self._combine(parts)

    def _combine(self, parts) -> Fanned:
        """The shards' packs and shares in block order, each checked to be its own range, whole packs but the
        last, and its entries' count."""
        from ..errors import UnavailableError

        cap = self.gallery.capacity
        for (lo, hi), (plo, phi, c1, c0, d0, *_) in zip(self.ranges, parts):
            n = sum(self.counts[lo:hi])
            cts = -(-n // self.delta)
            if ((plo, phi) != (lo, hi) or len(d0) != n or c1.shape != c0.shape
                    or len(c1) != he.packs(cts, self.group) or (hi < len(self.counts) and n != (hi - lo) * cap)):
                raise UnavailableError("a shard answered for other blocks than its own: nothing was answered, "
                                       "retry shortly", RETRY_AFTER)
        return Fanned(np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts]),
                      np.concatenate([p[4] for p in parts]))

    def distances_of(self, fanned: Fanned, lo: int, hi: int, *, mask: bool = True) -> tuple[he.Distances, np.ndarray]:
        """The slice of ciphertexts lo … hi − 1 of the gathered answer: their packs and the shares of their entries
        (as ``he.CloudServer.distances_of`` computes them in one process)."""
        g = self.group
        if not 0 <= lo < hi <= self.ciphertexts or lo % g or (hi % g and hi != self.ciphertexts):
            raise ProtocolError(f"ciphertexts {lo}…{hi}: not a range of whole packs of {g} in the gallery's "
                                f"{self.ciphertexts}")
        if not mask:
            raise ProtocolError("the resident CS answers Alg. 2 with its masks (CryptoMask-W)")
        a, b = lo // g, -(-hi // g)
        return he.Distances(fanned.c1[a:b], fanned.c0[a:b]), fanned.d0[lo * self.delta:min(self.count,
                                                                                           hi * self.delta)]
