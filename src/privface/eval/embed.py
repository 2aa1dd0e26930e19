"""Embedding many images: cache lookup, a worker-process pool for the misses, a progress bar."""
from __future__ import annotations

import multiprocessing
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


def _init(spec: dict, single_thread: bool = False) -> None:
    global _worker_backend
    if single_thread:  # one process per core: keep onnxruntime from oversubscribing the cores
        from ..faces import dlib_onnx

        dlib_onnx.DEFAULT_THREADS = 1
    _worker_backend = make_backend(**spec)


def _embed_one(job: tuple[str, str]) -> tuple[str, np.ndarray | None]:
    path, which = job
    try:
        faces = _worker_backend.faces(path, which)
    except PrivfaceError:
        return "", None
    if not faces:
        return "", None
    return faces[0].detector, faces[0].embedding


def embed_paths(paths: list[Path], spec: dict, *, which: str = "largest", cache: bool | str = True,
                workers: int | None = None, progress: bool = False, batch: int = 32) -> Embedded:
    """Embed one face per image (the largest, or with which="center" the most central) with the
    backend `make_backend(**spec)`."""
    backend = make_backend(**spec)
    if spec.get("name", "dlib-resnet128") == "dlib-resnet128":
        from ..faces.dlib_onnx import cached_model_path

        cached_model_path()  # convert once here, not concurrently in every worker
    keys = [file_key(p) for p in paths]
    options = {**backend.options(), "which": which}
    store = EmbeddingCache(options, None if cache is True else cache) if cache else None
    known = store.get_many(sorted(set(keys))) if store else {}
    todo = sorted({k: str(p) for k, p in zip(keys, paths) if k not in known}.items())
    workers = workers or min(len(todo), os.cpu_count() or 1) or 1
    bar = _bar(len(todo), progress)
    try:
        if todo:
            if workers == 1:
                _init(spec)
                results = map(_embed_one, ((p, which) for _, p in todo))
                _drain(results, todo, known, store, bar, batch)
            else:
                # forkserver, not fork: the caller may hold threads (crypto pools, Ray) whose locks a forked
                # child would inherit locked
                ctx = multiprocessing.get_context("forkserver")
                with ProcessPoolExecutor(workers, initializer=_init, initargs=(spec, True), mp_context=ctx) as pool:
                    jobs = ((p, which) for _, p in todo)
                    _drain(pool.map(_embed_one, jobs, chunksize=4), todo, known, store, bar, batch)
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
