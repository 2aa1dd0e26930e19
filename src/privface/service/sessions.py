"""Server-side session state of multi-round flows (see base.py): random ids, expiry, one-time use, a bound
on how many are open and a smaller one per caller, each session bound to the caller that opened it."""
from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from .base import LimitError, SessionError, SessionLimitError

SESSION_HEADER = "X-Privface-Session"


class SessionQuotaError(LimitError):
    """The caller already holds its share of the open sessions (HTTP 429, Retry-After): finish or abandon
    one of its flows first."""


@dataclass
class _Session:
    protocol: str
    state: Any
    expires: float
    owner: str


def default_quota(max_sessions: int) -> int:
    """The default share of one caller: 1 % of the table, so that one key cannot fill it."""
    return max(1, max_sessions // 100)


class Sessions:
    """Maps a 128-bit random id (32 hex digits, from `secrets`) to a protocol's state.

    `take` removes the session, so each id serves one step: a replayed id is unknown. Every session belongs
    to the caller (``Caller.id``) that opened it: another caller presenting its id gets "unknown session",
    as for a made-up id. One caller holds at most ``max_per_caller`` sessions at once (default
    ``default_quota``), so a single API key cannot fill the table for everyone else."""

    def __init__(self, ttl: float = 120.0, max_sessions: int = 10_000, clock=time.monotonic,
                 max_per_caller: int | None = None):
        max_per_caller = default_quota(max_sessions) if max_per_caller is None else max_per_caller
        if ttl <= 0 or max_sessions < 1 or max_per_caller < 1:
            raise ValueError("session ttl, max_sessions and max_per_caller must be positive")
        self.ttl, self.max_sessions, self.max_per_caller, self._clock = ttl, max_sessions, max_per_caller, clock
        self._items: dict[str, _Session] = {}
        self._owned: dict[str, set[str]] = {}  # owner → its session ids
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    def _drop(self, sid: str) -> _Session:
        s = self._items.pop(sid)
        mine = self._owned.get(s.owner)
        if mine is not None:
            mine.discard(sid)
            if not mine:
                del self._owned[s.owner]
        return s

    def _expire(self, owner: str | None = None) -> None:
        now = self._clock()
        sids = self._items if owner is None else self._owned.get(owner, ())
        for sid in [sid for sid in sids if self._items[sid].expires <= now]:
            self._drop(sid)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._owned.clear()

    def owned(self, owner: str) -> int:
        """How many live sessions ``owner`` holds."""
        with self._lock:
            self._expire(owner)
            return len(self._owned.get(owner, ()))

    def room(self, owner: str) -> None:
        """Raise unless ``owner`` may open one more session: SessionQuotaError (429) when it holds its share,
        SessionLimitError (503) when the table is full."""
        with self._lock:
            self._room(owner)

    def _room(self, owner: str) -> None:
        if len(self._owned.get(owner, ())) >= self.max_per_caller:
            self._expire(owner)
            mine = self._owned.get(owner, ())
            if len(mine) >= self.max_per_caller:
                wait = min(self._items[sid].expires for sid in mine) - self._clock()
                raise SessionQuotaError(f"this caller already holds {len(mine)} open sessions (its share); "
                                        "finish one or retry later", wait)
        if len(self._items) >= self.max_sessions:
            self._expire()
            if len(self._items) >= self.max_sessions:
                raise SessionLimitError("too many open sessions; try again later")

    def open(self, protocol: str, state: Any, owner: str) -> str:
        with self._lock:
            self._room(owner)
            sid = secrets.token_hex(16)
            self._items[sid] = _Session(protocol, state, self._clock() + self.ttl, owner)
            self._owned.setdefault(owner, set()).add(sid)
            return sid

    def check(self, protocol: str, sid: str, owner: str) -> None:
        """Raise SessionError unless `sid` is a live session of `protocol` opened by `owner` (does not
        consume it)."""
        with self._lock:
            self._get(protocol, sid, owner)

    def peek(self, protocol: str, sid: str, owner: str) -> Any:
        """The state of a live session of `protocol` opened by `owner`, leaving the session open."""
        with self._lock:
            return self._get(protocol, sid, owner).state

    def take(self, protocol: str, sid: str, owner: str) -> Any:
        """The state of a live session of `protocol` opened by `owner`, removing the session."""
        with self._lock:
            self._get(protocol, sid, owner)
            return self._drop(sid).state

    def _get(self, protocol: str, sid: str, owner: str) -> _Session:
        s = self._items.get(sid) if isinstance(sid, str) else None
        if s is not None and s.expires <= self._clock():
            self._drop(sid)
            raise SessionError("session expired; start the flow again")
        if s is None or s.protocol != protocol or s.owner != owner:
            raise SessionError("unknown session (each session id serves one step)")
        return s
