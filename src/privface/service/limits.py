"""Limits of the HTTP service (issue 8 §2) beyond the body caps and sessions of app.py / sessions.py:

``RateLimiter``  a token bucket per client (API key id, else client address);
``BodyLimits``   how long a request body may take to arrive: a deadline, and a minimum rate in every window of
                 ``rate_window`` seconds (a slow-loris body is cut with 408, issue 35 A1/A2);
``InFlight``     requests and body bytes in flight per client (429 beyond), so that stalled uploads of one key
                 cannot pile up;
``Lockout``      consecutive rejected verification attempts per subject ID, with lockout and exponential
                 back-off: online guessing (seed 000 §VI, attack MC2: a malicious client submits templates
                 until one is accepted) gets at most ``failures`` tries, then one try per growing back-off.
                 Identification (1:N) names no subject: its failures count per caller (``caller_counter``).

Both refuse with ``LimitError`` (HTTP 429 with Retry-After) and change no state when they refuse: a refused
call takes no token, writes nothing and leaves the counter as it was.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..store.base import TemplateStore
from ..store.lease import update
from .base import LimitError

LOCKOUT_NAMESPACE = "privface-lockout-{protocol}"
CALLER_COUNTER = "{protocol}-1n"
"""The ``protocol`` of the counters of 1:N attempts per caller: a namespace of their own, so that no subject ID
(which may look like a caller's) shares one."""
_STORE_KEY = re.compile(r"[A-Za-z0-9._@+-]{1,128}")


def caller_counter(protocol: str, caller_id: str) -> tuple[str, str]:
    """(protocol, key) of the failure counter of ``caller_id``'s 1:N attempts (``Caller.id``: ``key:<key id>``
    or ``addr:<address>``), as ``Lockout`` takes them: ``:`` becomes ``-``, and an id that is still no valid store
    key (an IPv6 zone, an overlong name) is replaced by its SHA-256."""
    key = caller_id.replace(":", "-")
    if not _STORE_KEY.fullmatch(key):
        key = "sha256-" + hashlib.sha256(caller_id.encode()).hexdigest()
    return CALLER_COUNTER.format(protocol=protocol), key


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


@dataclass(frozen=True)
class BodyLimits:
    """How long a request body may take: at most ``timeout`` s from the moment the service starts reading it, and at
    least ``min_rate`` bytes/s in every window of ``rate_window`` s (the first window is the grace period; a body
    that ends within a window is never cut for rate). ``min_rate`` 0 turns the rate check off."""

    timeout: float = 300.0
    min_rate: float = 16_384.0
    rate_window: float = 10.0

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.min_rate < 0 or self.rate_window <= 0:
            raise ValueError("body limits: timeout > 0, min_rate ≥ 0 and rate_window > 0")


class InFlight:
    """Requests and body bytes in flight per client (``Caller.id``): at most ``max_requests`` requests, and at most
    ``max_bytes`` body bytes together, except that a client's only request holding bytes may hold up to its step's
    own cap (so a single large upload, e.g. a cryptomask round at 2^20, is never refused for it). ``enter``/``leave``
    bracket a request; ``add`` counts bytes as they arrive (or as declared by Content-Length, before any is read).
    Refusals (LimitError) change nothing. Called from the event loop; the lock only guards against other threads."""

    def __init__(self, max_requests: int = 32, max_bytes: int = 64 << 20) -> None:
        if max_requests < 1 or max_bytes < 1:
            raise ValueError("in-flight limits: max_requests ≥ 1 and max_bytes ≥ 1")
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self._requests: dict[str, int] = {}
        self._bytes: dict[str, dict[int, int]] = {}  # client → {request ticket: bytes}
        self._lock = threading.Lock()
        self._next = 0

    def enter(self, client: str) -> int:
        """A ticket for one more request of ``client``, or LimitError (nothing counted)."""
        with self._lock:
            n = self._requests.get(client, 0)
            if n >= self.max_requests:
                raise LimitError(f"this client already has {n} requests in flight; wait for one to finish", 1)
            self._requests[client] = n + 1
            self._next += 1
            self._bytes.setdefault(client, {})[self._next] = 0
            return self._next

    def add(self, client: str, ticket: int, n: int) -> None:
        """Count ``n`` more body bytes of request ``ticket``; LimitError (nothing counted) if the client's bytes in
        flight would pass ``max_bytes`` while another of its requests holds bytes."""
        with self._lock:
            mine = self._bytes[client]
            others = sum(v for k, v in mine.items() if k != ticket)
            if others and others + mine[ticket] + n > self.max_bytes:
                raise LimitError(f"this client has more than {self.max_bytes} bytes of request bodies in flight; "
                                 "send one large body at a time", 1)
            mine[ticket] += n

    def leave(self, client: str, ticket: int) -> None:
        with self._lock:
            mine = self._bytes.get(client, {})
            if mine.pop(ticket, None) is None:
                return
            self._requests[client] -= 1
            if not self._requests[client]:
                del self._requests[client], self._bytes[client]

    def requests(self, client: str) -> int:
        with self._lock:
            return self._requests.get(client, 0)


class Lockout:
    """The failure counter of verification attempts, kept in the template store under
    ``(privface-lockout-<protocol>, subject ID)`` as ``{"failures": n, "last": unix time, "leases": {…}}`` so
    that a restart does not reset it and every server process over one store shares it.

    After ``failures`` rejections in a row, an attempt is refused until ``base · 2^(n − failures)`` seconds
    (at most ``cap``) after the last rejection; an accepted attempt resets the counter. A refused call writes
    nothing; once no attempt is in flight, a record exists only for an enrolled subject that was rejected.

    Attempts in flight count as possible rejections: a deciding step may start only while
    ``n + in flight < failures`` (or, once locked, when the back-off is over and none is in flight), so
    concurrent requests cannot run more guesses than the counter allows — across processes too: the
    in-flight slots are leases in the same record (id → expiry, ``lease`` seconds after the reservation),
    reserved and released by compare-and-swap (``TemplateStore.swap``). The lease of a process that died
    mid-step expires by itself; a step running longer than ``lease`` stops counting as in flight."""

    def __init__(self, store: TemplateStore, failures: int = 5, base: float = 30.0, cap: float = 3600.0,
                 clock=time.time, lease: float = 60.0) -> None:
        if failures < 1 or base <= 0 or cap < base or lease <= 0:
            raise ValueError("lockout: failures ≥ 1, base > 0, cap ≥ base and lease > 0")
        self.store, self.failures, self.base, self.cap, self._clock = store, failures, base, cap, clock
        self.lease = lease

    def _counter(self, raw: bytes | None) -> dict:
        """The counter held in the stored bytes ``raw``, expired leases left out."""
        r = json.loads(raw) if raw is not None else {}
        now = self._clock()
        leases = {k: float(v) for k, v in r.get("leases", {}).items() if float(v) > now}
        return {"failures": int(r.get("failures", 0)), "last": float(r.get("last", 0.0)), "leases": leases}

    def _update(self, protocol: str, subject: str, change):
        """``change(counter)`` (mutating it; raising leaves the store as it was) applied atomically by
        ``store.lease.update`` (compare-and-swap, again on a lost race). A counter with no failures and no
        leases is deleted."""
        def step(raw: bytes | None):
            counter = self._counter(raw)
            result = change(counter)
            new = (json.dumps(counter, sort_keys=True).encode()
                   if counter["failures"] or counter["leases"] else None)
            return new, result

        return update(self.store, LOCKOUT_NAMESPACE.format(protocol=protocol), subject, step,
                      what="the lockout counter")

    def backoff(self, n: int) -> float:
        """Seconds an attempt waits after the n-th rejection in a row."""
        return 0.0 if n < self.failures else min(self.cap, self.base * 2.0 ** min(n - self.failures, 64))

    def _refuse_while_locked(self, counter: dict) -> None:
        wait = min(self.cap, counter["last"] + self.backoff(counter["failures"]) - self._clock())
        if wait > 0:
            raise LimitError(f"too many rejected attempts; retry in {math.ceil(wait)} s", wait)

    def check(self, protocol: str, subject: str) -> None:
        """Raise LimitError while ``subject`` is locked out (reads only)."""
        self._refuse_while_locked(self._counter(self.store.get(LOCKOUT_NAMESPACE.format(protocol=protocol), subject)))

    @contextmanager
    def attempt(self, protocol: str, subject: str) -> Iterator[None]:
        """Around a deciding step: check, then hold an in-flight lease (LimitError when none is free)."""
        lease_id = secrets.token_hex(8)

        def reserve(counter: dict) -> None:
            self._refuse_while_locked(counter)
            busy = len(counter["leases"])
            if busy and counter["failures"] + busy >= self.failures:
                raise LimitError("another attempt is in progress", 1)
            counter["leases"][lease_id] = self._clock() + self.lease

        self._update(protocol, subject, reserve)
        try:
            yield
        finally:
            self._update(protocol, subject, lambda counter: counter["leases"].pop(lease_id, None))

    def record(self, protocol: str, subject: str, accepted: bool) -> int:
        """Count a decided attempt; returns the rejections in a row (0 after an acceptance)."""
        def count(counter: dict) -> int:
            if accepted:
                counter["failures"] = 0
            else:
                counter["failures"] += 1
                counter["last"] = self._clock()
            return counter["failures"]

        return self._update(protocol, subject, count)


__all__ = ["LimitError", "RateLimiter", "BodyLimits", "InFlight", "Lockout", "LOCKOUT_NAMESPACE", "caller_counter"]
