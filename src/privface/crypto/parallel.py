"""Thread pools for big-integer work: gmpy2 releases the GIL inside its operations in these threads, so batched
encryption, decryption and blinding use every core.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import gmpy2

from ..errors import CryptoError


def release_gil() -> None:
    """Let gmpy2 drop the GIL during big-integer operations in the calling thread (thread-pool initializer).

    gmpy2 keeps the GIL by default; with ``allow_release_gil`` its mpz operations (powmod, mul, mod)
    run outside it, so base decryptions in a thread pool use several cores.
    """
    gmpy2.get_context().allow_release_gil = True


_POOLS: dict[int, object] = {}


def default_workers(workers: int | None) -> int:
    """``workers`` (≥ 1); when None, ``$PRIVFACE_THREADS`` if set (``bench identify --threads``), else one per
    core."""
    if workers is None:
        env = os.environ.get("PRIVFACE_THREADS", "")
        if not env:
            return os.cpu_count() or 1
        if not env.isdigit() or int(env) < 1:
            raise CryptoError(f"PRIVFACE_THREADS must be a positive integer, got {env!r}")
        return int(env)
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise CryptoError(f"workers must be an integer, got {type(workers).__name__}")
    if workers < 1:
        raise CryptoError(f"workers must be at least 1, got {workers}")
    return workers


_POOL_THREAD = "privface-gmp"


def _in_pool() -> bool:
    """True on one of the shared pool's threads: nested parallel calls run serially there (no deadlock)."""
    return threading.current_thread().name.startswith(_POOL_THREAD)


def _pool(w: int):
    pool = _POOLS.get(w)
    if pool is None:
        pool = _POOLS[w] = ThreadPoolExecutor(max_workers=w, initializer=release_gil,
                                              thread_name_prefix=_POOL_THREAD)
    return pool


def run_chunks(fn, chunks: list[list], workers: int | None = None) -> list:
    """fn(chunk) for each chunk, concurrently on the shared pool (``workers`` threads, default one per
    chunk); the results (lists) concatenated in order."""
    chunks = [c for c in chunks if c]
    w = min(len(chunks), default_workers(workers) if workers is not None else len(chunks))
    if w <= 1 or _in_pool():
        return [x for c in chunks for x in fn(c)]
    return [x for part in _pool(w).map(fn, chunks) for x in part]


def parallel_map(fn, items, workers: int | None = None) -> list:
    """[fn(x) for x in items] on ``workers`` threads of the shared pool (None: one per core; 1: serial)."""
    items = list(items)
    w = min(default_workers(workers), len(items))
    if w <= 1 or _in_pool():
        return [fn(x) for x in items]
    return list(_pool(w).map(fn, items))


def thread_map(fn, items: list, workers: int | None = None, chunk: int | None = None) -> list:
    """fn over contiguous chunks of items (one per worker, or of ``chunk`` items each) on ``workers``
    threads of the shared pool, whose threads let gmpy2 release the GIL; the chunk results (lists) are
    concatenated in order. Small chunks let one thread's GIL-bound Python work overlap another's
    GIL-free exponentiations."""
    w = max(1, min(default_workers(workers), len(items)))
    step = (chunk or -(-len(items) // w)) if items else 1
    return run_chunks(fn, [items[i:i + step] for i in range(0, len(items), step)], w)


@contextmanager
def gil_held():
    """Within the block gmpy2 keeps the GIL: for loops of many small operations, where releasing and
    re-acquiring the GIL around each one costs more than it gains (the thread is Python-bound anyway)."""
    ctx = gmpy2.get_context()
    old = ctx.allow_release_gil
    ctx.allow_release_gil = False
    try:
        yield
    finally:
        ctx.allow_release_gil = old
