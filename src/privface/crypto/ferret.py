"""Silent OT for Alg. 3: Ferret's correlated OTs (Yang, Weng, Lan, Zhang, Wang, CCS 2020; native/src/ferret.rs,
semi-honest) kept in a pool on each side and turned into random OTs by hashing (native/src/cot.rs), as
OpenCheetah — the code seed 001 §5 built on — runs its comparisons.

* Setup (once per pair): the sender S (the CS, Δ holder) sends a request — ``FERRET_TAG``, the version, the parameter
  set, the public LPN seed, then a SoftSpokenOT base-OT request (edwards25519 base OTs, ``otext``); the receiver R
  answers with the base-OT response and the u of ``reserve`` SoftSpokenOT OTs on random choices, read *before* their
  hash: the correlation r_j = s_j ⊕ b_j·Δ (Ferret §6: the first iteration's COTs from IKNP-style extension).
* Refill: one Ferret iteration is one message S → R (``Params.msg_bytes``: 0.56 MB at EMP's regular set for
  ≈ 10^7 COTs); both pools grow by its outputs. A refill runs between identifications (``ensure``), not inside
  one: an identification only takes COTs from the pools.
* Use: ``take(n)`` hands out the next n COTs' random-OT keys and their TCCR tweaks — the same on both sides, since
  each takes in the same order. The keys are hashed when a refill adds the COTs (the first ``KEY_BYTES`` of each:
  all that Alg. 3's leaves, triples and B2A read), so an identification hashes nothing. Tweaks start at
  ``TWEAK_BASE`` = 2^63, apart from the tweaks Ferret's trees hash with (from 0).

Semi-honest (cryptomask's model, §3.2): no consistency check, as OpenCheetah's semi-honest Ferret; the check
guards against a malicious sender's inconsistent Δ across trees and a malicious receiver's choice bits.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import CryptoError
from .native import ext
from .otext import SoftSpokenReceiver, SoftSpokenSender

FERRET_TAG = b"privface/ferret"
FERRET_VERSION = 1
PARAMS = ("regular", "toy")
"""Ferret's parameter sets (native/src/ferret.rs): EMP's regular set (128-bit LPN), or a toy one for tests."""
TWEAK_BASE = 1 << 63
KEY_BYTES = 4
"""Bytes of each random-OT key the pools keep (blocks of ≤ 4 bits need 2^5 bits, B2A 32)."""
_NONE = np.zeros(0, np.uint8)

__all__ = ["FERRET_TAG", "FERRET_VERSION", "KEY_BYTES", "PARAMS", "FerretReceiver", "FerretSender", "ensure", "params"]


def params(name: str) -> dict:
    """(n, k, t, h, reserve, output, msg_bytes) of a named set, as a dict."""
    if name not in PARAMS:
        raise CryptoError(f"Ferret: parameter set must be one of {PARAMS}")
    keys = ("n", "k", "t", "h", "reserve", "output", "msg_bytes")
    return dict(zip(keys, ext.ferret_params(name), strict=True))


def _head(name: str) -> bytes:
    return FERRET_TAG + bytes([FERRET_VERSION, PARAMS.index(name)])


def _split(message: bytes, what: str) -> tuple[str, bytes]:
    """A Ferret setup message → (the parameter set, the rest); CryptoError naming what is wrong."""
    n = len(FERRET_TAG)
    if not isinstance(message, bytes | bytearray) or not message.startswith(FERRET_TAG) or len(message) < n + 2:
        raise CryptoError(f"{what} names no Ferret version: the peer runs another OT extension; both sides need "
                          "the same release and --ot")
    version, p = message[n], message[n + 1]
    if version != FERRET_VERSION or p >= len(PARAMS):
        raise CryptoError(f"{what}: Ferret version {version}, parameter set {p}; this side runs version "
                          f"{FERRET_VERSION}, sets {PARAMS}")
    return PARAMS[p], bytes(message[n + 2:])


class _Pool:
    """The unused COTs of one side as random-OT keys hashed ahead, rows [lo, hi) of its buffers, and the tweak of the
    next: ``keys`` arrays of ``KEY_BYTES`` per COT (the sender's H(j, s_j), H(j, s_j ⊕ Δ), the receiver's H(j, r_j),
    their first bytes — all that ``crypto.millionaire`` reads) and the receiver's choice bits, so that an
    identification does no hashing; the COTs themselves are not kept. ``take`` hands out views (no copy); ``room``
    compacts the unused rows to the front and sizes the buffers for what the coming refills add, so a refill copies
    its output in once (no concatenation of the whole pool). Refills run between identifications, when no view handed
    out is in use any more."""

    def __init__(self, with_bits: bool, keys: int) -> None:
        self._bits: np.ndarray | None = np.zeros(0, np.uint8) if with_bits else None
        self._keys: list[np.ndarray] = [np.zeros((0, KEY_BYTES), np.uint8) for _ in range(keys)]
        self._lo = self._hi = 0
        self.counter = TWEAK_BASE

    @property
    def available(self) -> int:
        return self._hi - self._lo

    @property
    def next_added(self) -> int:
        """The tweak of the next row ``add`` appends."""
        return self.counter + self.available

    def room(self, total: int) -> None:
        """Unused rows moved to the front, the buffers holding at least ``total`` rows."""
        have, lo, hi = self.available, self._lo, self._hi
        cols = self._keys + ([self._bits] if self._bits is not None else [])
        if len(self._keys[0]) >= total:
            if lo:
                for c in cols:
                    c[:have] = c[lo:hi]
        else:
            grown = [np.empty((total,) + c.shape[1:], np.uint8) for c in cols]
            for g, c in zip(grown, cols):
                g[:have] = c[lo:hi]
            self._keys = grown[:len(self._keys)]
            if self._bits is not None:
                self._bits = grown[-1]
        self._lo, self._hi = 0, have

    def add(self, keys: tuple, bits: np.ndarray | None = None) -> None:
        n = len(keys[0]) if keys else 0
        if ((bits is None) != (self._bits is None) or (bits is not None and len(bits) != n)
                or len(keys) != len(self._keys) or any(k.shape != (n, KEY_BYTES) for k in keys)):
            raise CryptoError("Ferret: a refill's keys and choice bits differ")
        if self._hi + n > len(self._keys[0]):
            self.room(self.available + n)
        for dst, k in zip(self._keys, keys):
            dst[self._hi:self._hi + n] = k
        if self._bits is not None and bits is not None:
            self._bits[self._hi:self._hi + n] = bits
        self._hi += n

    def take(self, n: int, side: str):
        if n > self.available:
            raise CryptoError(f"Ferret: the {side}'s pool holds {self.available} COTs, {n} asked: refill first "
                              "(crypto.ferret.ensure)")
        lo, self._lo = self._lo, self._lo + n
        bits = self._bits[lo:lo + n] if self._bits is not None else np.zeros(0, np.uint8)
        keys = tuple(k[lo:lo + n] for k in self._keys)
        first, self.counter = self.counter, self.counter + n
        return keys, bits, first


class FerretSender:
    """The COT sender (Δ holder; Alg. 3's OT sender, the CS). ``setup_request`` → R → ``setup_finish``; then
    ``refill`` messages to R; ``take`` in the protocol."""

    kind = "ferret"

    def __init__(self, params_name: str = "regular") -> None:
        self.p = params(params_name)
        self.params_name = params_name
        self._boot = SoftSpokenSender()
        self.delta = self._boot.delta.tobytes()
        self._lpn_seed = os.urandom(16)
        self._core = None
        self._pool = _Pool(with_bits=False, keys=2)

    @property
    def available(self) -> int:
        return self._pool.available

    @property
    def counter(self) -> int:
        """The TCCR tweak of the next COT: with ``available``, the pool's state, equal on both sides."""
        return self._pool.counter

    def room(self, iterations: int) -> None:
        """Before ``iterations`` refills: the pool sized for them (each adds ``output`` COTs), so that adding copies
        each refill's output once."""
        self._pool.room(self.available + iterations * params(self.params_name)["output"])

    def setup_request(self) -> bytes:
        return _head(self.params_name) + self._lpn_seed + self._boot.setup_request()

    def setup_finish(self, response: bytes) -> None:
        """R's base-OT response and the u of the reserve's SoftSpokenOT OTs (read unhashed)."""
        name, body = _split(response, "the Ferret setup response")
        if name != self.params_name:
            raise CryptoError(f"the Ferret setup response is for set {name!r}, not {self.params_name!r}")
        m = self.p["reserve"]
        nu = self._boot.rows * (-(-m // 64) * 8)
        if len(body) <= nu:
            raise CryptoError(f"the Ferret setup response must carry {nu} bytes of u after the base-OT response")
        self._boot.setup_finish(body[:-nu])
        self._boot.correlated()
        u = np.frombuffer(body[-nu:], np.uint8).reshape(self._boot.rows, -1)
        s, _ = self._boot.extend(u, m)
        self._core = ext.FerretSender(self.params_name, self.delta, np.ascontiguousarray(s), self._lpn_seed,
                                      os.urandom(16))

    def refill(self) -> bytes:
        """One Ferret iteration: its message to R (``msg_bytes``); this pool grows by ``output`` COTs."""
        if self._core is None:
            raise CryptoError("Ferret: setup first")
        msg, s = self._core.extend()
        self._pool.add(ext.cot_rot_send(s, self.delta, _NONE, self._pool.next_added, KEY_BYTES))
        return bytes(msg)

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The next n COTs as random-OT keys hashed ahead: k0 = H(j, s_j), k1 = H(j, s_j ⊕ Δ), their first
        ``KEY_BYTES`` (n, KEY_BYTES) each, and the first tweak j."""
        (k0, k1), _, first = self._pool.take(n, "sender")
        return k0, k1, first


class FerretReceiver:
    """The COT receiver (the verifier): ``setup_response``, ``absorb`` each refill message, ``take``."""

    kind = "ferret"

    def __init__(self) -> None:
        self._boot = SoftSpokenReceiver()
        self._core = None
        self._pool = _Pool(with_bits=True, keys=1)
        self.params_name = ""

    @property
    def available(self) -> int:
        return self._pool.available

    @property
    def counter(self) -> int:
        """The TCCR tweak of the next COT: with ``available``, the pool's state, equal on both sides."""
        return self._pool.counter

    def room(self, iterations: int) -> None:
        """Before ``iterations`` refills: the pool sized for them (each adds ``output`` COTs), so that adding copies
        each refill's output once."""
        self._pool.room(self.available + iterations * params(self.params_name)["output"])

    def setup_response(self, request: bytes) -> bytes:
        name, body = _split(request, "the Ferret setup request")
        if len(body) < 16:
            raise CryptoError("the Ferret setup request carries no LPN seed")
        lpn_seed, base = body[:16], body[16:]
        resp = self._boot.setup_response(base)
        self._boot.correlated()
        m = params(name)["reserve"]
        b = np.unpackbits(np.frombuffer(os.urandom(-(-m // 8)), np.uint8), count=m, bitorder="little")
        u, r = self._boot.extend(b)
        self._core = ext.FerretReceiver(name, np.ascontiguousarray(b), np.ascontiguousarray(r), lpn_seed)
        self.params_name = name
        return _head(name) + resp + u.tobytes()

    @property
    def msg_bytes(self) -> int:
        """The bytes of one refill message of this pool's parameter set (after ``setup_response``)."""
        return params(self.params_name)["msg_bytes"]

    def absorb(self, message: bytes) -> None:
        """S's refill message (its length checked natively before use) → this pool grows by ``output`` COTs."""
        if self._core is None:
            raise CryptoError("Ferret: setup first")
        try:
            bits, r = self._core.extend(bytes(message))
        except ValueError as e:  # the native size check, before the message is used
            raise CryptoError(f"the Ferret refill message: {e}") from e
        self._pool.add((ext.cot_rot_recv(r, self._pool.next_added, KEY_BYTES),), bits)

    def take(self, n: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The next n COTs as random-OT keys hashed ahead: choice bits b (n,), H(j, r_j)'s first ``KEY_BYTES``
        (n, KEY_BYTES), the first tweak j."""
        (k,), b, first = self._pool.take(n, "receiver")
        return b, k, first


def setup_pair(name: str = "regular") -> tuple[FerretSender, FerretReceiver, int]:
    """Both sides' setup in process: (S, R, bytes exchanged)."""
    S, R = FerretSender(name), FerretReceiver()
    req = S.setup_request()
    resp = R.setup_response(req)
    S.setup_finish(resp)
    return S, R, len(req) + len(resp)


def ensure(S: FerretSender, R: FerretReceiver, n: int) -> int:
    """Refill both pools in process until each holds ≥ n COTs: the bytes of the refill messages S → R."""
    sent, k = 0, max(0, -(-(n - S.available) // params(S.params_name)["output"]))
    S.room(k)
    R.room(k)
    while S.available < n:
        msg = S.refill()
        R.absorb(msg)
        sent += len(msg)
    if R.available != S.available:
        raise CryptoError("Ferret: the two pools differ in size")
    return sent
