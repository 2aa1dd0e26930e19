"""Resident gallery shards on a Ray cluster behind the serving local server (issue 38 §1, §3; seed 003 §3.2).

S_local's gallery blocks are split into K contiguous ranges, one per Ray actor. The K actors sit in one placement
group of K one-CPU bundles with the SPREAD strategy: Ray reserves all K slots at once (the server starts with
every shard or fails with a clear error, never half-placed), puts them on distinct nodes where it can, and — the
reason for a placement group rather than per-node custom resources, which would pin a shard to a named node —
re-places the bundles of a lost node on the nodes that remain. Each actor loads its blocks once from the gallery
store (PostgreSQL for a cluster: every node reads the same store; a SQLite file only when all nodes share one
machine) and keeps them in memory; it never sees sk.

An identification sends the query to every shard; each answers IP_DB(y, its blocks) with its block range, the
driver checks that the ranges and block counts tile the gallery's layout and concatenates the partial messages in
block order: the very message one process builds (IP_DB is deterministic per block). Node loss: the actors are
started with ``max_restarts=-1``; when a node dies Ray restarts its shards elsewhere and their constructor
reloads the same blocks from the store. An identification whose shard died under it is retried once, at once
(waiting at most ``retry_timeout`` s; a shard Ray knows to be restarting refuses it at once); if that fails too it
raises ``UnavailableError`` (HTTP 503 with Retry-After) — it never answers from a partial or mismatched message.

Online changes (issue 38 §2, with ``scale.lifecycle``): a change writes new block generations and a new meta to
the store, as for one process. A served gallery is a *version* (the SHA-256 of its meta); each shard keeps the
blocks of its current version and of the one before, sharing the blocks whose generation did not change.
``update`` stages the new version on every shard (each loads only its blocks whose generation changed, or that are
new to its range: ``grown_ranges`` keeps the shards within a block of each other as the gallery grows) and only then
switches the server's view. An identification binds one view (``bind``: version, ranges, counts) and asks every
shard for that version, so it sees the gallery before or after a change, never a mix; a shard that lacks the
version (restarted after node loss, or staged before it was asked) loads it from the store itself, or refuses when
the store has moved on — then the identification is retried once and at worst answered with a 503.
"""
from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np

from ..errors import PrivfaceError, UnavailableError
from ..protocols.hers import LocalServer
from .actors import init_ray
from .gallery import Gallery, GalleryError, gallery_ids

SHARD_TIMEOUT = 600.0
"""Seconds one identification waits for its shards (a shard's IP_DB time grows with its blocks)."""
RETRY_TIMEOUT = 90.0
"""Seconds the one retry waits for its shards."""
PLACE_TIMEOUT = 120.0
"""Seconds to wait for the cluster to reserve the K one-CPU bundles at start."""
RETRY_AFTER = 10
"""Retry-After (s) of the 503 when the retry failed too."""


class ShardNotLoaded(PrivfaceError):
    """A shard could not load its blocks (store unreachable, gallery changed or damaged)."""


class StaleVersion(PrivfaceError):
    """The store no longer holds the gallery version a shard was asked for (a later change replaced it)."""


def meta_version(gallery: Gallery) -> str:
    """The gallery version a view serves: the SHA-256 of its meta (block generations, size, settings)."""
    return hashlib.sha256(json.dumps(gallery.meta, sort_keys=True).encode()).hexdigest()


class _Shard:
    """One Ray actor: blocks lo … hi − 1 of the gallery, loaded once (again after a restart) and kept, per version
    (the current and the one before)."""

    def __init__(self, url: str, name: str, lo: int, hi: int, pk_sha256: bytes, counts: list[int]) -> None:
        os.environ["PRIVFACE_THREADS"] = "1"  # a shard holds one CPU (its bundle): more cores → more shards
        self.args, self.error = (url, name, lo, hi, pk_sha256, counts), None
        self.views: dict[str, tuple[int, int, list, list[int]]] = {}  # version → (lo, hi, blocks, generations)
        self.version, self.lo, self.hi, self.resident_bytes, self.load_s = None, lo, hi, 0, 0.0
        self._load()

    def _load(self) -> None:
        _, _, lo, hi, _, counts = self.args
        try:
            self.stage(None, lo, hi, counts)
        except PrivfaceError as e:  # kept for ``info`` / ``ip_db``: an actor failing in __init__ only dies
            self.error = str(e)

    def stage(self, version: str | None, lo: int, hi: int, counts: list[int]) -> str:
        """Hold blocks lo … hi − 1 of ``version`` (None: the store's current one), loading only the blocks whose
        generation the current view lacks; StaleVersion if the store holds another version now."""
        url, name, _, _, pk_sha256, _ = self.args
        t = time.perf_counter()
        gallery = Gallery(url, name)
        if hashlib.sha256(gallery.pk_bytes).digest() != pk_sha256:
            raise GalleryError("the gallery in the store is not the one the server started with (public key)")
        v = meta_version(gallery)
        if version is not None and v != version:
            raise StaleVersion("the gallery changed again in the store: the server reads it anew")
        if v in self.views and self.views[v][:2] == (lo, hi):
            return v
        if [min(gallery.capacity, gallery.n - b * gallery.capacity) for b in range(lo, hi)] != counts:
            raise GalleryError("the gallery in the store is not the one the server started with (block sizes)")
        have = {}
        if self.version in self.views:
            clo, _, cblocks, cgens = self.views[self.version]
            have = {clo + i: (blk, g) for i, (blk, g) in enumerate(zip(cblocks, cgens))}
        need = [b for b in range(lo, hi) if b not in have or have[b][1] != gallery.gens[b]
                or have[b][0].count != counts[b - lo]]
        loaded = dict(zip(need, gallery.load_blocks(need)[0]))
        blocks = [loaded[b] if b in loaded else have[b][0] for b in range(lo, hi)]
        self.views = {k: view for k, view in self.views.items() if k == self.version}  # the one before stays
        self.views[v] = (lo, hi, blocks, list(gallery.gens[lo:hi]))
        self.gallery, self.version, self.lo, self.hi, self.error = gallery, v, lo, hi, None
        adapter, pub = gallery.settings.adapter, gallery.public_context
        self.resident_bytes = sum(int(adapter.block_to_array(b, pub).nbytes) for b in blocks)
        self.load_s = time.perf_counter() - t
        return v

    def info(self) -> dict:
        import ray

        return {"lo": self.lo, "hi": self.hi, "error": self.error, "load_s": round(self.load_s, 4),
                "resident_bytes": self.resident_bytes, "node": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid(), "version": self.version}

    def ip_db(self, query, version: str | None = None, lo: int | None = None, hi: int | None = None,
              counts: list[int] | None = None):
        """(lo, hi, IP_DB(y, blocks lo … hi − 1 of ``version``), seconds, CPU seconds). A version this shard
        lacks (a restart, a change not staged here yet) is loaded first from the store; a shard that failed to
        load tries once more first."""
        if version is None:
            if self.error is not None:
                self._load()
                if self.error is not None:
                    raise ShardNotLoaded(self.error)
            version = self.version
        elif version not in self.views or self.views[version][:2] != (lo, hi):
            self.stage(version, lo, hi, counts)
        vlo, vhi, blocks, _ = self.views[version]
        t, c = time.perf_counter(), time.process_time()
        msg = self.gallery.public.ip_db(query, blocks)
        return vlo, vhi, msg, time.perf_counter() - t, time.process_time() - c


class ShardView:
    """One version of the sharded gallery as an S_local (``identify_request``, ``resolve``, ``ids``): what one
    identification binds, so that it sees the gallery before or after a change, never a mix."""

    def __init__(self, server: ResidentLocalServer, version: str, ranges: list[tuple[int, int]], counts: list[int],
                 ids: list) -> None:
        self.server, self.version, self.ranges, self.counts, self.ids = server, version, ranges, counts, ids
        self.scheme = server.scheme

    def identify_request(self, query):
        return self.server.identify_request(query, self)

    def resolve(self, decision):
        return LocalServer.resolve(self, decision)


class ResidentShards:
    """K resident shards of a gallery on a Ray cluster, whatever the scheme (``ResidentLocalServer`` for ident,
    ``scale.resident_cs.ResidentCloudServer`` for the cryptomask CS): one actor of ``actor`` per block range, in one
    placement group of K one-CPU bundles (SPREAD), each restarted by Ray after node loss (``max_restarts=-1``,
    its constructor reloads its blocks); ``fan_out`` asks every shard and retries once, else UnavailableError."""

    def _start_shards(self, address: str, actor, ranges: list[tuple[int, int]], args, *, timeout: float,
                      retry_timeout: float, place_timeout: float) -> None:
        """Place the K = len(ranges) shards and start ``actor(*args(i, lo, hi))`` on bundle i; GalleryError (every
        actor stopped) when the cluster has no room or a shard cannot load its blocks."""
        ray = init_ray(address)
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._ray, self._remove_pg = ray, remove_placement_group
        self.timeout, self.retry_timeout = timeout, retry_timeout
        k = len(ranges)
        self.pg = placement_group([{"CPU": 1}] * k, strategy="SPREAD")
        try:
            ray.get(self.pg.ready(), timeout=place_timeout)
        except ray.exceptions.GetTimeoutError:
            self._remove_pg(self.pg)
            raise GalleryError(f"the Ray cluster has no room for {k} shards of one CPU each (within "
                               f"{place_timeout:g} s): add nodes or give fewer --shards") from None
        remote = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(actor)
        self.shards = [remote.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            self.pg, placement_group_bundle_index=i)).remote(*args(i, lo, hi)) for i, (lo, hi) in enumerate(ranges)]
        self.loaded = ray.get([s.info.remote() for s in self.shards])
        errors = [i["error"] for i in self.loaded if i["error"] is not None]
        if errors:
            self.close()
            raise GalleryError(errors[0])

    def fan_out(self, call) -> list:
        """``call(i, shard)`` (a Ray task of shard i) on every shard, their results in shard order; retried once
        when a shard was lost (died, restarting, timed out, could not load); UnavailableError after that."""
        ray = self._ray
        for timeout in (self.timeout, self.retry_timeout):
            try:
                return ray.get([call(i, s) for i, s in enumerate(self.shards)], timeout=timeout)
            except ray.exceptions.RayError:
                continue
        raise UnavailableError("a shard of the gallery is restarting (a cluster node was lost) or the gallery "
                               "changed under it: nothing was answered, retry shortly", RETRY_AFTER)

    def info(self) -> list[dict]:
        """Each shard's block range, load time, resident bytes, node, pid and version (as it is now: after a
        restart, the new actor's)."""
        return self._ray.get([s.info.remote() for s in self.shards], timeout=self.timeout)

    def close(self) -> None:
        for s in self.shards:
            self._ray.kill(s)
        self.shards = []
        self._remove_pg(self.pg)


def block_ranges(nblocks: int, shards: int, align: int = 1) -> list[tuple[int, int]]:
    """``shards`` contiguous block ranges (fewer when the gallery has fewer blocks), as even as they can be with
    every boundary a multiple of ``align`` blocks."""
    units = -(-nblocks // align)
    k = min(shards, units)
    bounds = [min(nblocks, int(b) * align) for b in np.linspace(0, units, k + 1).round().astype(int)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


class ResidentLocalServer(ResidentShards):
    """S_local with its blocks resident in ``shards`` Ray actors (same interface as ``hers.LocalServer``):
    ``identify_request`` (query → the IP_DB message of the whole gallery) and ``resolve``; ``bind`` (the current
    version's ``ShardView``) and ``update`` (serve a changed gallery)."""

    def __init__(self, gallery: Gallery, *, address: str = "auto", shards: int | None = None,
                 timeout: float = SHARD_TIMEOUT, retry_timeout: float = RETRY_TIMEOUT,
                 place_timeout: float = PLACE_TIMEOUT) -> None:
        self.gallery, self.scheme = gallery, gallery.public
        counts = [min(gallery.capacity, gallery.n - lo) for lo in range(0, gallery.n, gallery.capacity)]
        shards = default_shards(address, shards)
        ranges = block_ranges(gallery.nblocks, shards)
        pk = hashlib.sha256(gallery.pk_bytes).digest()
        self._start_shards(address, _Shard, ranges,
                           lambda i, lo, hi: (gallery.url, gallery.name, lo, hi, pk, counts[lo:hi]),
                           timeout=timeout, retry_timeout=retry_timeout, place_timeout=place_timeout)
        self.view = ShardView(self, meta_version(gallery), ranges, counts, gallery_ids(gallery))

    # the current view's ranges, counts and ids (the interface of earlier callers and of ``hers.LocalServer``)
    ranges = property(lambda self: self.view.ranges)
    counts = property(lambda self: self.view.counts)
    ids = property(lambda self: self.view.ids)

    def bind(self) -> ShardView:
        return self.view

    def update(self, gallery: Gallery, ids: list) -> ShardView:
        """Serve ``gallery`` (the store's changed gallery): every shard stages its blocks of the new version (new
        blocks as ``grown_ranges`` places them), then the view switches; identifications in flight finish on theirs.
        GalleryError (nothing switched) when a shard cannot stage it."""
        ray = self._ray
        counts = [min(gallery.capacity, gallery.n - lo) for lo in range(0, gallery.n, gallery.capacity)]
        if gallery.nblocks < self.view.ranges[-1][1]:
            raise GalleryError("the gallery in the store has fewer blocks than the one served")
        ranges = grown_ranges(self.view.ranges, gallery.nblocks)
        version = meta_version(gallery)
        try:
            ray.get([s.stage.remote(version, lo, hi, counts[lo:hi]) for s, (lo, hi) in zip(self.shards, ranges)],
                    timeout=self.timeout)
        except ray.exceptions.RayError as e:
            raise GalleryError(f"a shard could not load the changed gallery: {_cause(e)}") from None
        self.gallery = gallery
        self.view = ShardView(self, version, ranges, counts, ids)
        return self.view

    def identify_request(self, query, view: ShardView | None = None):
        """The IP_DB message of every block of ``view`` (default: the current one); retried once when a shard was
        lost; UnavailableError after that."""
        view = view or self.view
        parts = self.fan_out(lambda i, s: s.ip_db.remote(query, view.version, *view.ranges[i],
                                                         view.counts[slice(*view.ranges[i])]))
        self.shard_s, self.shard_cpu_s = [p[3] for p in parts], [p[4] for p in parts]
        return self._combine(parts, view)

    def _combine(self, parts, view: ShardView):
        """The shards' messages in block order, each checked to be its own range with the layout's counts."""
        for (lo, hi), (plo, phi, msg, *_) in zip(view.ranges, parts):
            if (plo, phi) != (lo, hi) or list(msg.counts) != view.counts[lo:hi]:
                raise UnavailableError("a shard answered for other blocks than its own: nothing was answered, "
                                       "retry shortly", RETRY_AFTER)
        return self.gallery.settings.adapter.concat_scores([p[2] for p in parts])

    def resolve(self, decision):
        return LocalServer.resolve(self, decision)


def grown_ranges(ranges: list[tuple[int, int]], nblocks: int) -> list[tuple[int, int]]:
    """The block ranges after the gallery grew to ``nblocks`` blocks: the new blocks extend the last range (no
    shard reloads anything but the new blocks) until the last shard holds two blocks more than the least loaded
    one; then the boundaries are drawn evenly again (``block_ranges``), each shard loading only the blocks new to
    it — so a growing gallery stays spread evenly, never piled on the last shard."""
    grown = [*ranges[:-1], (ranges[-1][0], nblocks)]
    sizes = [hi - lo for lo, hi in grown]
    return grown if sizes[-1] - min(sizes) < 2 else block_ranges(nblocks, len(ranges))


def default_shards(address: str, shards: int | None) -> int:
    """``--shards`` as given (≥ 1), or one per CPU of the cluster at ``address``."""
    if shards is None:
        shards = max(1, int(init_ray(address).cluster_resources().get("CPU", 1)))
    if shards < 1:
        raise GalleryError("--shards must be at least 1")
    return shards


def _cause(e: Exception) -> str:
    """A Ray task error's own message (the shard's exception), not Ray's traceback."""
    cause = getattr(e, "cause", None)
    return str(cause) if cause is not None else type(e).__name__
