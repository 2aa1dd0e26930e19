"""Limits of the HTTP service (issue 8 §2) beyond the body caps and sessions of app.py / sessions.py:

``RateLimiter``  a token bucket per client (API key id, else client address);
``Lockout``      consecutive rejected verification attempts per subject ID, with lockout and exponential
                 back-off: online guessing (seed 000 §VI, attack MC2: a malicious client submits templates
                 until one is accepted) gets at most ``failures`` tries, then one try per growing back-off.

Both refuse with ``LimitError`` (HTTP 429 with Retry-After) and change no state when they refuse: a refused
call takes no token, writes nothing and leaves the counter as it was.
"""
from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import PrivfaceError
from ..store.base import TemplateStore

LOCKOUT_NAMESPACE = "privface-lockout-{protocol}"


class LimitError(PrivfaceError):
    """Too many requests from one client, or too many rejected attempts for one subject (HTTP 429)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))  # whole seconds, as Retry-After wants


class RateLimiter:
    """``rate`` requests per second per client, in bursts of up to ``burst``. In memory (a restart refills
    the buckets); at most ``max_clients`` buckets, the full ones forgotten first when that is reached."""

    def __init__(self, rate: float, burst: int, *, max_clients: int = 100_000, clock=time.monotonic) -> None:
        if rate <= 0 or burst < 1 or max_clients < 1:
            raise ValueError("rate limit: rate > 0, burst ≥ 1 and max_clients ≥ 1")
        self.rate, self.burst, self.max_clients, self._clock = float(rate), int(burst), max_clients, clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client → (tokens, when)
        self._lock = threading.Lock()

    def _tokens(self, client: str, now: float) -> float:
        tokens, when = self._buckets.get(client, (self.burst, now))
        return min(self.burst, tokens + (now - when) * self.rate)

    def take(self, client: str) -> None:
        """Spend one token of ``client``'s bucket, or raise LimitError (spending nothing)."""
        with self._lock:
            now = self._clock()
            tokens = self._tokens(client, now)
            if tokens < 1:
                raise LimitError("rate limit exceeded; slow down", (1 - tokens) / self.rate)
            if client not in self._buckets and len(self._buckets) >= self.max_clients:
                self._forget(now)
            self._buckets[client] = (tokens - 1, now)

    def _forget(self, now: float) -> None:
        full = [c for c in self._buckets if self._tokens(c, now) >= self.burst]
        for c in full or list(self._buckets)[: max(1, len(self._buckets) // 10)]:
            del self._buckets[c]


class Lockout:
    """The failure counter of verification attempts, kept in the template store under
    ``(privface-lockout-<protocol>, subject ID)`` as ``{"failures": n, "last": unix time}`` so that a
    restart does not reset it.

    After ``failures`` rejections in a row, an attempt is refused until ``base · 2^(n − failures)`` seconds
    (at most ``cap``) after the last rejection; an accepted attempt deletes the record. Only decided attempts
    write: a record exists only for an enrolled subject that was rejected, and a refused call writes nothing.

    Attempts in flight count as possible rejections: a deciding step may start only while
    ``n + in flight < failures`` (or, once locked, when the back-off is over and none is in flight), so
    concurrent requests cannot run more guesses than the counter allows. (Per process: several server
    processes over one store share the counter but not this in-flight bound.)"""

    def __init__(self, store: TemplateStore, failures: int = 5, base: float = 30.0, cap: float = 3600.0,
                 clock=time.time) -> None:
        if failures < 1 or base <= 0 or cap < base:
            raise ValueError("lockout: failures ≥ 1, base > 0 and cap ≥ base")
        self.store, self.failures, self.base, self.cap, self._clock = store, failures, base, cap, clock
        self._in_flight: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def _read(self, protocol: str, subject: str) -> tuple[int, float]:
        raw = self.store.get(LOCKOUT_NAMESPACE.format(protocol=protocol), subject)
        if raw is None:
            return 0, 0.0
        r = json.loads(raw)
        return int(r["failures"]), float(r["last"])

    def backoff(self, n: int) -> float:
        """Seconds an attempt waits after the n-th rejection in a row."""
        return 0.0 if n < self.failures else min(self.cap, self.base * 2.0 ** min(n - self.failures, 64))

    def _wait(self, n: int, last: float) -> float:
        return min(self.cap, last + self.backoff(n) - self._clock())

    def check(self, protocol: str, subject: str) -> None:
        """Raise LimitError while ``subject`` is locked out (reads only)."""
        n, last = self._read(protocol, subject)
        if (wait := self._wait(n, last)) > 0:
            raise LimitError(f"too many rejected attempts for this subject; retry in {math.ceil(wait)} s", wait)

    @contextmanager
    def attempt(self, protocol: str, subject: str) -> Iterator[None]:
        """Around a deciding step: check, then hold an in-flight slot (LimitError when none is free)."""
        key = (protocol, subject)
        with self._lock:  # the count and the slots together, so that no decision slips in between
            n, last = self._read(protocol, subject)
            if (wait := self._wait(n, last)) > 0:
                raise LimitError(f"too many rejected attempts for this subject; retry in {math.ceil(wait)} s", wait)
            busy = self._in_flight.get(key, 0)
            if busy and n + busy >= self.failures:
                raise LimitError("another attempt for this subject is in progress", 1)
            self._in_flight[key] = busy + 1
        try:
            yield
        finally:
            with self._lock:
                if self._in_flight[key] == 1:
                    del self._in_flight[key]
                else:
                    self._in_flight[key] -= 1

    def record(self, protocol: str, subject: str, accepted: bool) -> int:
        """Count a decided attempt; returns the rejections in a row (0 after an acceptance)."""
        space = LOCKOUT_NAMESPACE.format(protocol=protocol)
        with self._lock:  # read-modify-write of one counter
            n, _ = self._read(protocol, subject)
            if accepted:
                if n:
                    self.store.delete(space, subject)
                return 0
            self.store.put(space, subject, json.dumps({"failures": n + 1, "last": self._clock()}).encode())
            return n + 1


__all__ = ["LimitError", "RateLimiter", "Lockout", "LOCKOUT_NAMESPACE"]
