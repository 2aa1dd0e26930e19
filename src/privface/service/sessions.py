"""Server-side session state of multi-round flows (see base.py): random ids, expiry, a bound on
how many are open, one-time use."""
from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from .base import SessionError

SESSION_HEADER = "X-Privface-Session"


class SessionLimitError(SessionError):
    """Too many open sessions (HTTP 503): the server is busy, try again later."""


@dataclass
class _Session:
    protocol: str
    state: Any
    expires: float


class Sessions:
    """Maps a 128-bit random id (32 hex digits, from `secrets`) to a protocol's state.

    `take` removes the session, so each id serves one step: a replayed id is unknown."""

    def __init__(self, ttl: float = 120.0, max_sessions: int = 10_000, clock=time.monotonic):
        if ttl <= 0 or max_sessions < 1:
            raise ValueError("session ttl and max_sessions must be positive")
        self.ttl, self.max_sessions, self._clock = ttl, max_sessions, clock
        self._items: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    def _expire(self) -> None:
        now = self._clock()
        for sid in [sid for sid, s in self._items.items() if s.expires <= now]:
            del self._items[sid]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def has_room(self) -> bool:
        with self._lock:
            if len(self._items) >= self.max_sessions:
                self._expire()
            return len(self._items) < self.max_sessions

    def open(self, protocol: str, state: Any) -> str:
        with self._lock:
            if len(self._items) >= self.max_sessions:
                self._expire()
                if len(self._items) >= self.max_sessions:
                    raise SessionLimitError("too many open sessions; try again later")
            sid = secrets.token_hex(16)
            self._items[sid] = _Session(protocol, state, self._clock() + self.ttl)
            return sid

    def check(self, protocol: str, sid: str) -> None:
        """Raise SessionError unless `sid` is a live session of `protocol` (does not consume it)."""
        with self._lock:
            self._get(protocol, sid)

    def peek(self, protocol: str, sid: str) -> Any:
        """The state of a live session of `protocol`, leaving the session open."""
        with self._lock:
            return self._get(protocol, sid).state

    def take(self, protocol: str, sid: str) -> Any:
        """The state of a live session of `protocol`, removing the session."""
        with self._lock:
            self._get(protocol, sid)
            return self._items.pop(sid).state

    def _get(self, protocol: str, sid: str) -> _Session:
        s = self._items.get(sid) if isinstance(sid, str) else None
        if s is not None and s.expires <= self._clock():
            del self._items[sid]
            raise SessionError("session expired; start the flow again")
        if s is None or s.protocol != protocol:
            raise SessionError("unknown session (each session id serves one step)")
        return s
