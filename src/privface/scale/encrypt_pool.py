"""ENC_DB for many blocks in worker processes (hers Alg. 1, IDFace §4.2's ENC_DB: one block is independent of the
others), so a large enrolment uses every core while the enrolling process writes the blocks already encrypted.

A worker gets the gallery's ``Settings`` and its *public* key record only (never the secret key), rebuilds the public
scheme once, and turns a block of templates into the stored block array; the parent writes the arrays in block
order (``scale.gallery.enrol``), so resume and ``after_block`` keep their meaning. Workers are spawned (not forked):
the parent may hold SEAL threads or a database pool.
"""
from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np

MIN_BLOCKS = 8
"""Fewer blocks to encrypt than this: encrypt in process (a worker's start costs more than it saves)."""

_public: tuple | None = None  # (settings, pub, public scheme) of this worker


def _init(settings, pk: bytes) -> None:
    global _public
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one core per worker
        os.environ.setdefault(var, "1")
    pub = settings.load_public(pk)
    _public = (settings, pub, settings.public_scheme(pub))


def _encrypt(x: np.ndarray) -> np.ndarray:
    assert _public is not None, "worker not initialised"
    settings, pub, public = _public
    return np.ascontiguousarray(settings.adapter.block_to_array(public.enc_db(x), pub))


def default_workers(blocks: int) -> int:
    """Worker processes for ``blocks`` blocks to encrypt: one per core (at most 8), none for a few blocks."""
    return 1 if blocks < MIN_BLOCKS else max(1, min(os.cpu_count() or 1, 8))


def encrypted_blocks(settings, pk: bytes, public, pub, todo: list[int],
                     templates: Callable[[int], np.ndarray], workers: int) -> Iterator[tuple[int, np.ndarray]]:
    """(b, block array) for each block index in ``todo``, in order; ``templates(b)`` gives block b's rows.

    ``workers`` ≤ 1: in this process (``public``/``pub`` already loaded). Else that many spawned processes, with at
    most two blocks per worker in flight (bounded memory: a hers block array is 4 MiB of templates in, 8 MiB out)."""
    if workers <= 1:
        for b in todo:
            yield b, settings.adapter.block_to_array(public.enc_db(templates(b)), pub)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init, initargs=(settings, pk)) as pool:
        pending: deque[tuple[int, Future]] = deque()
        it = iter(todo)
        for b in it:
            pending.append((b, pool.submit(_encrypt, templates(b))))
            if len(pending) >= 2 * workers:
                break
        while pending:
            b, fut = pending.popleft()
            array = fut.result()
            nxt = next(it, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(_encrypt, templates(nxt))))
            yield b, array
