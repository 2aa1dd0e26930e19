"""S_key's decryption in parallel worker processes of its own (issue 38 §4; seed 003 §3.2, §4.3).

S_key decrypts one IP_DB ciphertext per block (N / slots of them per identification: 256 at 2^20 with hers, tens of
thousands at 10^8). ``DecryptPool`` splits the blocks of an IP_DB message into contiguous ranges and decrypts them
in ``workers`` child processes of the key server, each holding the secret scheme it rebuilt once from the key
records the key server passed it over its own pipe: the secret key stays inside the key server's trust boundary
(its process and its children on the same machine; never a shard, never Ray). The scores come back in block order,
so the decision is the very one one process takes. A message of fewer than ``min_blocks`` blocks is decrypted in
the key server's own process (the round trip would cost more than it saves).
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ..errors import CryptoError, PrivfaceError, ProtocolError

MIN_BLOCKS = 4
"""Blocks per worker below which a message is decrypted in the key server's own process."""

START_TIMEOUT = 300.0
"""Seconds the workers wait for each other at start (SEAL's context and the key records load in each)."""

_SECRET = None  # the worker's secret scheme (set once by ``_start``)


def key_workers(workers: int | None = None) -> int:
    """``workers`` (≥ 1), else ``$PRIVFACE_KEY_WORKERS``, else one per core."""
    if workers is None:
        env = os.environ.get("PRIVFACE_KEY_WORKERS", "")
        if env and (not env.isdigit() or int(env) < 1):
            raise PrivfaceError(f"PRIVFACE_KEY_WORKERS must be a positive integer, got {env!r}")
        workers = int(env) if env else (os.cpu_count() or 1)
    if workers < 1:
        raise PrivfaceError(f"key-server workers must be at least 1, got {workers}")
    return workers


def _start(settings, pk: bytes, sk: bytes, ready) -> None:
    global _SECRET
    os.environ["PRIVFACE_THREADS"] = "1"  # one core per worker: more cores → more workers
    pub = settings.load_public(pk)
    _SECRET = settings.secret_scheme(settings.load_secret(pub, sk))
    # No worker takes a task before every worker has started: the executor spawns a worker per submitted task
    # only while none is idle, so a fast first worker could otherwise leave the pool one process short.
    ready.wait(timeout=START_TIMEOUT)


def _decrypt(msg):
    try:
        return True, _SECRET.decrypt_scores(msg)
    except (ProtocolError, CryptoError, PrivfaceError) as e:  # sent back as text: exceptions may not pickle
        return False, str(e)


def split(msg, parts: int) -> list:
    """The message's blocks in ``parts`` contiguous ranges, each a message of the same type."""
    n = len(msg.counts)
    bounds = np.linspace(0, n, min(parts, n) + 1).round().astype(int)
    field = "arrays" if hasattr(msg, "arrays") else "values"
    return [type(msg)(**{field: getattr(msg, field)[lo:hi], "counts": list(msg.counts[lo:hi])})
            for lo, hi in zip(bounds, bounds[1:])]


class DecryptPool:
    """The secret scheme's ``decrypt_scores`` over ``workers`` processes (same interface: ``capacity``,
    ``decrypt_scores``). ``secret`` is the key server's own secret scheme (small messages, and the checks)."""

    def __init__(self, secret, settings, pk: bytes, sk: bytes, workers: int | None = None,
                 min_blocks: int = MIN_BLOCKS) -> None:
        self.secret, self.capacity, self.min_blocks = secret, secret.capacity, min_blocks
        self.workers = key_workers(workers)
        self._pool, self.pooled = None, 0  # pooled: messages decrypted by the workers
        if self.workers > 1:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_start,
                                             initargs=(settings, pk, sk, ctx.Barrier(self.workers)))
            list(self._pool.map(_warm, range(self.workers)))  # start every worker now, not at the first request

    def decrypt_scores(self, msg) -> np.ndarray:
        n = len(getattr(msg, "counts", ()))
        if self._pool is None or n < 2 * self.min_blocks:
            return self.secret.decrypt_scores(msg)
        if not hasattr(msg, "arrays") and not hasattr(msg, "values"):
            return self.secret.decrypt_scores(msg)  # not a scores message: the scheme's own check refuses it
        parts = split(msg, min(self.workers, n // self.min_blocks))
        self.pooled += 1
        out = []
        for ok, value in self._pool.map(_decrypt, parts):
            if not ok:
                raise ProtocolError(value)
            out.append(value)
        return np.concatenate(out)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _warm(_: int) -> int:
    return os.getpid()
