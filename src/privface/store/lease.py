"""Records changed by compare-and-swap (``TemplateStore.swap``): ``update`` (read, change, swap, again on a
lost race) and ``Lease``, one writer at a time per record across threads, processes and hosts.

A lease is a JSON record ``{"token", "host", "pid", "acquired", "expires"}`` (wall-clock unix times). It is
taken when absent or expired, renewed and released by a swap against the exact bytes its holder wrote last, so
a holder whose lease expired and was taken over learns it (``LeaseLost``) and never deletes the new one.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from datetime import UTC, datetime

from ..errors import PrivfaceError
from .base import StoreError, StoreUnavailableError, TemplateStore

SWAP_TRIES = 1000  # each failed compare-and-swap means another writer's succeeded: contention, not a loop


def update(store: TemplateStore, protocol: str, subject: str, change, what: str = "the record"):
    """``change(raw) → (new, result)`` applied atomically to one record (raw/new None: no record): a swap
    against the bytes read, read again when another writer got in between. ``change`` raising leaves the
    record as it was. Returns ``result``."""
    for _ in range(SWAP_TRIES):
        raw = store.get(protocol, subject)
        new, result = change(raw)
        if new == raw or store.swap(protocol, subject, raw, new):
            return result
    raise StoreUnavailableError(f"{what} kept changing under concurrent writers")


def when(t: float) -> str:
    """A unix time as UTC ISO 8601 to the second (for messages)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LeaseHeld(PrivfaceError):
    """Another holder's lease is live; ``holder`` is its record (host, pid, acquired, expires)."""

    def __init__(self, holder: dict) -> None:
        super().__init__(f"held by {holder['host']}/{holder['pid']} since {when(holder['acquired'])} "
                         f"until {when(holder['expires'])}")
        self.holder = holder


class LeaseLost(PrivfaceError):
    """The lease expired and another holder took it (or its record was removed)."""


def _parse(raw: bytes) -> dict | None:
    """The lease in ``raw``, or None when the record is not a lease (damaged: treated as expired)."""
    try:
        r = json.loads(raw)
        return {"token": str(r["token"]), "host": str(r["host"]), "pid": int(r["pid"]),
                "acquired": float(r["acquired"]), "expires": float(r["expires"])}
    except (ValueError, TypeError, KeyError):
        return None


class Lease:
    """An exclusive, expiring lease on ``(protocol, subject)`` of ``store``.

    ``with lease:`` acquires (``LeaseHeld`` when another live lease exists), renews every ``ttl / 3`` seconds
    from a daemon thread while the body runs, and releases on the way out, exceptions included. The body calls
    ``check()`` before each write and may ``renew()`` after each unit of work: both raise ``LeaseLost`` once
    the lease is no longer this holder's."""

    def __init__(self, store: TemplateStore, protocol: str, subject: str, *, ttl: float = 120.0,
                 clock=time.time) -> None:
        if ttl <= 0:
            raise ValueError("lease: ttl > 0")
        self.store, self.protocol, self.subject, self.ttl, self._clock = store, protocol, subject, ttl, clock
        self._record: bytes | None = None  # what this holder wrote last (None: not held)
        self._lock = threading.Lock()  # the heartbeat and the holder's thread
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def _fresh(self, acquired: float | None = None) -> bytes:
        now = self._clock()
        token = secrets.token_hex(16) if self._record is None else json.loads(self._record)["token"]
        return json.dumps({"token": token, "host": socket.gethostname(), "pid": os.getpid(),
                           "acquired": now if acquired is None else acquired, "expires": now + self.ttl},
                          sort_keys=True).encode()

    def acquire(self) -> None:
        """Take the lease if nobody holds a live one; otherwise raise ``LeaseHeld`` (changing nothing)."""
        def take(raw: bytes | None):
            held = None if raw is None else _parse(raw)
            if held is not None and held["expires"] > self._clock():
                raise LeaseHeld(held)
            new = self._fresh()
            return new, new

        with self._lock:
            self._record = None
            self._record = update(self.store, self.protocol, self.subject, take, what="the lease")

    def renew(self) -> None:
        """Push the expiry ``ttl`` ahead, by a swap on the exact record held; ``LeaseLost`` if it changed."""
        with self._lock:
            if self._record is None:
                raise LeaseLost("the lease is not held")
            new = self._fresh(acquired=json.loads(self._record)["acquired"])
            if not self.store.swap(self.protocol, self.subject, self._record, new):
                self._record = None
                raise LeaseLost("the lease expired and was taken over")
            self._record = new

    def check(self) -> None:
        """``LeaseLost`` unless the stored lease is still this holder's; one past its expiry (the heartbeat was
        held up) but not taken over is renewed first."""
        with self._lock:
            held = None if self._record is None else _parse(self._record)
            if held is None or self.store.get(self.protocol, self.subject) != self._record:
                self._record = None
                raise LeaseLost("the lease expired and was taken over")
        if held["expires"] <= self._clock():
            self.renew()

    def release(self) -> None:
        """Delete the lease if it is still this holder's (never another's); store errors are ignored (it expires)."""
        with self._lock:
            record, self._record = self._record, None
            if record is not None:
                try:
                    self.store.swap(self.protocol, self.subject, record, None)
                except StoreError:
                    pass

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.renew()
            except LeaseLost:
                return  # the holder's next check() or renew() raises
            except StoreError:
                continue  # transient: retried at the next beat; the lease may expire meanwhile

    def __enter__(self) -> Lease:
        self.acquire()
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._beat, name=f"lease-{self.subject}", daemon=True)
        self._heartbeat.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        self.release()


__all__ = ["update", "when", "Lease", "LeaseHeld", "LeaseLost", "SWAP_TRIES"]
