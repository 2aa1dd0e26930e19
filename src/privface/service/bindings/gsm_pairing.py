"""Pairing codes of a gsm kiosk (issue 39): the kiosk page shows a short code beside the terminal's address, and the
user types the code into the Device's app, which asks the terminals it may reach (its provider's ``--allow-origin``
list, or its own origin) which one issued it and presents there.

A code is ``CODE_CHARS`` characters of Crockford's base-32 alphabet (no I, L, O, U: ``CODE_CHARS`` × 5 = 40 bits
from ``secrets``), lives ``ttl`` seconds and is single-use: the first claim removes it. The kiosk holds at most
``MAX_LIVE`` live codes (issuing one more drops the oldest). Claims are rate-limited per client address: at most
``MAX_FAILURES`` failed claims per ``WINDOW`` seconds, then every claim from it is refused (429) until the window
moves on — so a guesser needs about 2^40 / (ttl · MAX_FAILURES / WINDOW) addresses per live code to hit one.
A code is a pointer to this terminal, not a credential: the match itself is Π2/Π3 on the signed m1 as always.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections import deque

from ...errors import PrivfaceError

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base 32
CODE_CHARS = 8
TTL = 120.0
MAX_LIVE = 16
MAX_FAILURES = 10
WINDOW = 60.0


class PairingError(PrivfaceError):
    """A claim refused: ``status`` 404 (unknown, used or expired code), 429 (too many failures), 400 (malformed)."""

    def __init__(self, message: str, status: int, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def normalise(code: str) -> str:
    """Upper case without spaces or dashes; Crockford's look-alikes read as digits (O → 0, I/L → 1)."""
    c = code.strip().upper().replace("-", "").replace(" ", "")
    return c.translate(str.maketrans("OIL", "011"))


class Pairing:
    """The live codes of one kiosk and the failed claims per address (module docstring)."""

    def __init__(self, *, ttl: float = TTL, max_failures: int = MAX_FAILURES, window: float = WINDOW,
                 clock=time.monotonic) -> None:
        self.ttl, self.max_failures, self.window = ttl, max_failures, window
        self._clock = clock
        self._lock = threading.Lock()
        self._codes: dict[str, float] = {}  # code → expiry (monotonic)
        self._failures: dict[str, deque[float]] = {}

    def new(self) -> tuple[str, float]:
        """A fresh code and its lifetime in seconds."""
        code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_CHARS))
        with self._lock:
            now = self._clock()
            self._codes = {c: t for c, t in self._codes.items() if t > now}
            self._failures = {a: f for a, f in self._failures.items() if f and f[-1] > now - self.window}
            while len(self._codes) >= MAX_LIVE:
                self._codes.pop(next(iter(self._codes)))
            self._codes[code] = now + self.ttl
        return code, self.ttl

    def claim(self, code: object, address: str) -> None:
        """Use ``code`` (once) for the caller at ``address``, else PairingError."""
        with self._lock:
            now = self._clock()
            fails = self._failures.setdefault(address, deque())
            while fails and fails[0] <= now - self.window:
                fails.popleft()
            if len(fails) >= self.max_failures:
                retry = max(1, int(fails[0] + self.window - now) + 1)
                raise PairingError(f"too many wrong pairing codes from this address: retry in {retry} s", 429, retry)
            c = normalise(code) if isinstance(code, str) else ""
            if len(c) != CODE_CHARS or any(ch not in ALPHABET for ch in c):
                fails.append(now)
                raise PairingError(f"a pairing code is {CODE_CHARS} letters and digits, as the kiosk shows it", 400)
            expiry = self._codes.pop(c, None)
            if expiry is None or expiry <= now:
                fails.append(now)
                raise PairingError("this pairing code is unknown, already used or expired: ask the kiosk for a new "
                                   "one", 404)
            if not fails:
                self._failures.pop(address, None)
