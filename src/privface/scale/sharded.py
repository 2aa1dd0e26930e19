"""Identification against a persisted gallery, in one process or with the blocks sharded over Ray actors.

Ray sharding (issue 7 §5): the gallery's blocks are split into contiguous ranges, one per actor; each actor
opens the gallery store, loads its blocks once and answers IP_DB(y, its blocks). The driver concatenates the
partial IP_DB messages in block order — the very message a single process builds, since IP_DB is
deterministic — and its key server (the only holder of sk) decrypts and decides. Actors never see sk.
"""
from __future__ import annotations

import time

import numpy as np

from ..protocols.hers import LocalServer
from .actors import init_ray, start_shards
from .gallery import Gallery, GalleryError, gallery_ids, key_server, tau_of, unit
from .layout import stored_scheme
from .schemes import GALLERY_SCHEMES


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


class RayLocalServer:
    """S_local with its blocks sharded over ``workers`` Ray actors (same interface as ``hers.LocalServer``)."""

    def __init__(self, gallery: Gallery, *, address: str = "auto", workers: int | None = None) -> None:
        ray = init_ray(address)
        self.gallery, self.scheme = gallery, gallery.public
        self.ids = gallery_ids(gallery)
        self._ray = ray
        self.shards = start_shards(ray, _Shard, gallery, workers)

    def identify_request(self, query):
        return self.gallery.settings.adapter.concat_scores(self._ray.get([s.ip_db.remote(query) for s in self.shards]))

    def resolve(self, decision):
        return LocalServer.resolve(self, decision)

    def close(self) -> None:
        for s in self.shards:
            self._ray.kill(s)
        self.shards = []


def identify(query, gallery_url: str, *, key_store_url: str | None = None, ray: str | None = None,
             workers: int | None = None, name: str = "default", variant: str = "w") -> dict:
    """One identification of a template against a persisted gallery: ``{"id": str | None, timings…}``.

    ``name`` picks one of several galleries in the store. ``ray``: None → in process; ``"auto"`` or a cluster
    address → blocks sharded over Ray actors.
    A cryptomask gallery answers ``{"match": bool, "id": None, …}`` (seed 001's 1 bit; ``cryptomask_identify``), or
    with ``variant="wo"`` (CryptoMask-WO) the best entry's id when it matches.
    """
    scheme = GALLERY_SCHEMES.get(stored_scheme(gallery_url, name))
    if scheme is not None and scheme.own_layout:  # seed 001: a 1-bit answer, no id (cryptomask_identify)
        return scheme.identify(query, gallery_url, key_store_url=key_store_url, ray=ray, workers=workers, name=name,
                               variant=variant)
    if variant != "w":
        raise GalleryError("variant wo is CryptoMask-WO: it goes with a cryptomask gallery")
    t = time.perf_counter()
    gallery = Gallery(gallery_url, name)
    key = key_server(gallery, key_store_url)
    local = gallery.local_server() if ray is None else RayLocalServer(gallery, address=ray, workers=workers)
    if None in local.ids:  # withdrawn slots (scale.lifecycle) answer nobody: S_key leaves them out
        key.empty = np.array([i is None for i in local.ids], dtype=bool)
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
            "shards": shards, **tau_of(gallery_url, name, key_store_url, sum(i is not None for i in local.ids)),
            "load_s": round(load_s, 4), "ip_db_s": round(ip_s, 4), "key_server_s": round(decide_s, 4)}
