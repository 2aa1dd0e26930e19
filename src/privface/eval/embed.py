"""Embedding many images: cache lookup, a worker-process pool for the misses, a progress bar."""
from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PrivfaceError
from ..faces.registry import make_backend
from .cache import EmbeddingCache, file_key

_worker_backend = None


@dataclass
class Embedded:
    """Embeddings of a list of images: row i of `vectors` is NaN where `found[i]` is False."""

    vectors: np.ndarray
    found: np.ndarray
    detectors: list[str]
    computed: int  # how many were computed now (not from the cache)

    @property
    def undetected(self) -> int:
        return int((~self.found).sum())


def _init(spec: dict) -> None:
    global _worker_backend
    _worker_backend = make_backend(**spec)


def _embed_one(path: str) -> tuple[str, np.ndarray | None]:
    try:
        faces = _worker_backend.faces(path, "largest")
    except PrivfaceError:
        return "", None
    if not faces:
        return "", None
    return faces[0].detector, faces[0].embedding


def embed_paths(paths: list[Path], spec: dict, *, cache: bool | str = True, workers: int | None = None,
                progress: bool = False, batch: int = 32) -> Embedded:
    """Embed the largest face of each image with the backend `make_backend(**spec)`."""
    backend = make_backend(**spec)
    keys = [file_key(p) for p in paths]
    store = EmbeddingCache(backend.options(), None if cache is True else cache) if cache else None
    known = store.get_many(sorted(set(keys))) if store else {}
    todo = sorted({k: str(p) for k, p in zip(keys, paths) if k not in known}.items())
    workers = workers or min(len(todo), os.cpu_count() or 1) or 1
    bar = _bar(len(todo), progress)
    try:
        if todo:
            if workers == 1:
                _init(spec)
                results = map(_embed_one, (p for _, p in todo))
                _drain(results, todo, known, store, bar, batch)
            else:
                with ProcessPoolExecutor(workers, initializer=_init, initargs=(spec,)) as pool:
                    _drain(pool.map(_embed_one, (p for _, p in todo), chunksize=4), todo, known, store, bar, batch)
    finally:
        if bar is not None:
            bar.close()
        if store:
            store.close()
    dim = next((len(v) for _, v in known.values() if v is not None), backend.dim or 1)
    vectors = np.full((len(paths), dim), np.nan, dtype=np.float32)
    dets = []
    for i, k in enumerate(keys):
        det, v = known[k]
        if v is not None:
            vectors[i] = v
        dets.append(det)
    return Embedded(vectors, ~np.isnan(vectors).any(axis=1), dets, len(todo))


def _drain(results, todo, known, store, bar, batch) -> None:
    pending = []
    for (key, _), (det, vec) in zip(todo, results):
        known[key] = (det, vec)
        pending.append((key, det, vec))
        if bar is not None:
            bar.update(1)
        if store and len(pending) >= batch:
            store.put_many(pending)
            pending = []
    if store and pending:
        store.put_many(pending)


def _bar(total: int, progress: bool):
    if not progress or total == 0 or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="img", desc="embedding", file=sys.stderr)
