"""Identification against a persisted gallery, in one process or with the blocks sharded over Ray actors.

Ray sharding (issue 7 §5): the gallery's blocks are split into contiguous ranges, one per actor; each actor
opens the gallery store, loads its blocks once and answers IP_DB(y, its blocks). The driver concatenates the
partial IP_DB messages in block order — the very message a single process builds, since IP_DB is
deterministic — and its key server (the only holder of sk) decrypts and decides. Actors never see sk.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PrivfaceError
from .gallery import Gallery, GalleryError, gallery_ids, key_server, tau_of, unit


def _ray():
    try:
        import ray
    except ImportError:
        raise PrivfaceError("--ray needs Ray: pip install 'privface[ray]'") from None
    return ray


def init_ray(address: str = "auto", num_cpus: int | None = None):
    """Connect to Ray unless already connected: ``auto`` = a local Ray (or $RAY_ADDRESS), else a cluster address.

    A local Ray starts its workers at niceness 0 (Ray's default 15 starves the shards on a busy machine: 10×
    slower IP_DB measured here); start a cluster with ``RAY_worker_niceness=0`` for the same effect.
    """
    ray = _ray()
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "log_to_driver": False}
        if address == "auto":  # Ray runs workers at nice 15; here they do the work, so at the driver's priority
            ray.init(num_cpus=num_cpus, _system_config={"worker_niceness": 0}, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    return ray


class _Shard:
    """A Ray actor's state: the public scheme and its blocks, loaded once."""

    def __init__(self, url: str, name: str, indices: list[int]) -> None:
        self.blocks, self.error = [], None
        try:
            self.gallery = Gallery(url, name)
            self.blocks, _ = self.gallery.load_blocks(indices)
        except GalleryError as e:  # kept for ``ready``: an actor failing in __init__ only dies, with a traceback
            self.error = str(e)

    def ready(self) -> tuple[int, str | None]:
        return len(self.blocks), self.error

    def ip_db(self, query):
        return self.gallery.public.ip_db(query, self.blocks)


def start_shards(ray, cls, gallery, workers: int | None, **kwargs) -> list:
    """One ``cls(url, name, block range, **kwargs)`` actor per contiguous range of the gallery's blocks (``workers``
    ranges, default one per CPU), each loaded; a shard's load error (``ready()`` → (size, error)) is the
    GalleryError one process raises, after every actor is stopped."""
    if workers is None:
        workers = max(1, int(ray.available_resources().get("CPU", 1)))
    bounds = np.linspace(0, gallery.nblocks, max(1, min(workers, gallery.nblocks)) + 1).round().astype(int)
    actor = ray.remote(num_cpus=1)(cls)
    shards = [actor.remote(gallery.url, gallery.name, list(range(lo, hi)), **kwargs)
              for lo, hi in zip(bounds, bounds[1:])]
    errors = [e for _, e in ray.get([s.ready.remote() for s in shards]) if e is not None]
    if errors:
        for s in shards:
            ray.kill(s)
        raise GalleryError(errors[0])
    return shards


class RayLocalServer:
    """S_local with its blocks sharded over ``workers`` Ray actors (same interface as ``hers.LocalServer``)."""

    def __init__(self, gallery: Gallery, *, address: str = "auto", workers: int | None = None) -> None:
        ray = init_ray(address)
        self.gallery, self.scheme = gallery, gallery.public
        self.ids = gallery_ids(gallery)
        self._ray = ray
        self.shards = start_shards(ray, _Shard, gallery, workers)

    def identify_request(self, query):
        return _concat(self._ray.get([s.ip_db.remote(query) for s in self.shards]))

    def resolve(self, decision):
        from ..protocols.hers import LocalServer

        return LocalServer.resolve(self, decision)

    def close(self) -> None:
        for s in self.shards:
            self._ray.kill(s)
        self.shards = []


def _concat(parts: list):
    """The shards' IP_DB messages joined in block order (CKKS residue arrays, or Paillier (ct⁺, ct⁻) pairs)."""
    from ..protocols.hers.scheme import CKKSScores

    if not isinstance(parts[0], CKKSScores):
        from .paillier_blocks import concat_scores

        return concat_scores(parts)
    return CKKSScores(np.concatenate([p.arrays for p in parts]), [c for p in parts for c in p.counts])


def identify(query, gallery_url: str, *, key_store_url: str | None = None, ray: str | None = None,
             workers: int | None = None, name: str = "default") -> dict:
    """One identification of a template against a persisted gallery: ``{"id": str | None, timings…}``.

    ``name`` picks one of several galleries in the store. ``ray``: None → in process; ``"auto"`` or a cluster
    address → blocks sharded over Ray actors.
    A cryptomask gallery answers ``{"match": bool, "id": None, …}`` (seed 001's 1 bit; ``cryptomask_identify``).
    """
    from . import cryptomask_gallery

    if cryptomask_gallery.stored_scheme(gallery_url, name) == "cryptomask":  # seed 001: a 1-bit answer, no id
        from .cryptomask_identify import identify as cm_identify

        return cm_identify(query, gallery_url, key_store_url=key_store_url, ray=ray, workers=workers, name=name)
    t = time.perf_counter()
    gallery = Gallery(gallery_url, name)
    key = key_server(gallery, key_store_url)
    local = gallery.local_server() if ray is None else RayLocalServer(gallery, address=ray, workers=workers)
    load_s = time.perf_counter() - t
    shards = 1 if ray is None else len(local.shards)
    try:
        t = time.perf_counter()
        msg = local.identify_request(unit(np.asarray(query).reshape(1, -1)))
        ip_s = time.perf_counter() - t
        t = time.perf_counter()
        decision = key.decide(msg)
        decide_s = time.perf_counter() - t
        who = local.resolve(decision)
    finally:
        if ray is not None:
            local.close()
    return {"id": who, "scheme": gallery.settings.scheme, "n": gallery.n, "blocks": gallery.nblocks,
            "shards": shards, **tau_of(gallery_url, name, key_store_url),
            "load_s": round(load_s, 4), "ip_db_s": round(ip_s, 4), "key_server_s": round(decide_s, 4)}
