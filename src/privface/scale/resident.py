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
"""
from __future__ import annotations

import hashlib
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


class _Shard:
    """One Ray actor: blocks lo … hi − 1 of the gallery, loaded once (again after a restart) and kept."""

    def __init__(self, url: str, name: str, lo: int, hi: int, pk_sha256: bytes, counts: list[int]) -> None:
        os.environ["PRIVFACE_THREADS"] = "1"  # a shard holds one CPU (its bundle): more cores → more shards
        self.args, self.blocks, self.error = (url, name, lo, hi, pk_sha256, counts), [], None
        self.lo, self.hi, self.resident_bytes, self.load_s = lo, hi, 0, 0.0
        self._load()

    def _load(self) -> None:
        url, name, lo, hi, pk_sha256, counts = self.args
        t = time.perf_counter()
        try:
            self.gallery = gallery = Gallery(url, name)
            if hashlib.sha256(gallery.pk_bytes).digest() != pk_sha256:
                raise GalleryError("the gallery in the store is not the one the server started with (public key)")
            blocks, _ = gallery.load_blocks(range(lo, hi))
            if [b.count for b in blocks] != counts:
                raise GalleryError("the gallery in the store is not the one the server started with (block sizes)")
            adapter, pub = gallery.settings.adapter, gallery.public_context
            self.resident_bytes = sum(int(adapter.block_to_array(b, pub).nbytes) for b in blocks)
            self.blocks, self.error = blocks, None
        except PrivfaceError as e:  # kept for ``info`` / ``ip_db``: an actor failing in __init__ only dies
            self.blocks, self.error = [], str(e)
        self.load_s = time.perf_counter() - t

    def info(self) -> dict:
        import ray

        return {"lo": self.lo, "hi": self.hi, "error": self.error, "load_s": round(self.load_s, 4),
                "resident_bytes": self.resident_bytes, "node": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid()}

    def ip_db(self, query):
        """(lo, hi, IP_DB(y, blocks lo … hi − 1), seconds, CPU seconds); a shard that failed to load tries once
        more first."""
        if self.error is not None:
            self._load()
            if self.error is not None:
                raise ShardNotLoaded(self.error)
        t, c = time.perf_counter(), time.process_time()
        msg = self.gallery.public.ip_db(query, self.blocks)
        return self.lo, self.hi, msg, time.perf_counter() - t, time.process_time() - c


class ResidentLocalServer:
    """S_local with its blocks resident in ``shards`` Ray actors (same interface as ``hers.LocalServer``):
    ``identify_request`` (query → the IP_DB message of the whole gallery) and ``resolve``."""

    def __init__(self, gallery: Gallery, *, address: str = "auto", shards: int | None = None,
                 timeout: float = SHARD_TIMEOUT, retry_timeout: float = RETRY_TIMEOUT,
                 place_timeout: float = PLACE_TIMEOUT) -> None:
        ray = init_ray(address)
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self._ray, self._remove_pg = ray, remove_placement_group
        self.gallery, self.scheme, self.ids = gallery, gallery.public, gallery_ids(gallery)
        self.timeout, self.retry_timeout = timeout, retry_timeout
        self.counts = [min(gallery.capacity, gallery.n - lo) for lo in range(0, gallery.n, gallery.capacity)]
        if shards is None:
            shards = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if shards < 1:
            raise GalleryError("--shards must be at least 1")
        k = min(shards, gallery.nblocks)
        bounds = np.linspace(0, gallery.nblocks, k + 1).round().astype(int)
        self.ranges = [(int(lo), int(hi)) for lo, hi in zip(bounds, bounds[1:])]
        self.pg = placement_group([{"CPU": 1}] * k, strategy="SPREAD")
        try:
            ray.get(self.pg.ready(), timeout=place_timeout)
        except ray.exceptions.GetTimeoutError:
            self._remove_pg(self.pg)
            raise GalleryError(f"the Ray cluster has no room for {k} shards of one CPU each (within "
                               f"{place_timeout:g} s): add nodes or give fewer --shards") from None
        actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(_Shard)
        pk = hashlib.sha256(gallery.pk_bytes).digest()
        self.shards = [actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            self.pg, placement_group_bundle_index=i)).remote(gallery.url, gallery.name, lo, hi, pk, self.counts[lo:hi])
            for i, (lo, hi) in enumerate(self.ranges)]
        self.loaded = ray.get([s.info.remote() for s in self.shards])
        errors = [i["error"] for i in self.loaded if i["error"] is not None]
        if errors:
            self.close()
            raise GalleryError(errors[0])

    def info(self) -> list[dict]:
        """Each shard's block range, load time, resident bytes, node and pid (as it is now: after a restart, the
        new actor's)."""
        return self._ray.get([s.info.remote() for s in self.shards], timeout=self.timeout)

    def identify_request(self, query):
        """The IP_DB message of every block; retried once when a shard was lost; UnavailableError after that."""
        ray = self._ray
        for timeout in (self.timeout, self.retry_timeout):
            try:
                parts = ray.get([s.ip_db.remote(query) for s in self.shards], timeout=timeout)
            except ray.exceptions.RayError:  # a shard died, is restarting, timed out or could not load its blocks
                continue
            self.shard_s, self.shard_cpu_s = [p[3] for p in parts], [p[4] for p in parts]
            return self._combine(parts)
        raise UnavailableError("a shard of the gallery is restarting (a cluster node was lost): nothing was "
                               "answered, retry shortly", RETRY_AFTER)

    def _combine(self, parts):
        """The shards' messages in block order, each checked to be its own range with the layout's counts."""
        for (lo, hi), (plo, phi, msg, *_) in zip(self.ranges, parts):
            if (plo, phi) != (lo, hi) or list(msg.counts) != self.counts[lo:hi]:
                raise UnavailableError("a shard answered for other blocks than its own: nothing was answered, "
                                       "retry shortly", RETRY_AFTER)
        return self.gallery.settings.adapter.concat_scores([p[2] for p in parts])

    def resolve(self, decision):
        return LocalServer.resolve(self, decision)

    def close(self) -> None:
        for s in self.shards:
            self._ray.kill(s)
        self.shards = []
        self._remove_pg(self.pg)
