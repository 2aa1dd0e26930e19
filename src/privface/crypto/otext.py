"""IKNP oblivious-transfer extension (Ishai–Kilian–Nissim–Petrank, CRYPTO 2003 — seed 001 ref. [18]),
semi-honest, on top of the base OT of ``ot`` (edwards25519); the extension itself runs in the native core
(native/src/otext.rs, through ``native.ext``).

No maintained OT-extension package exists on PyPI (``oblivious`` and ``otc`` offer base OT only), so this
module extends κ = 128 base OTs to millions of random OTs:

* Setup (once per pair): the extension *sender* picks Δ ∈ {0,1}^κ and, as base-OT receiver with choices Δ_i,
  learns one of the receiver's two seeds (k_i^0, k_i^1) for each i.
* Extend(r ∈ {0,1}^M): the receiver sends u_i = G(k_i^0) ⊕ G(k_i^1) ⊕ r (κ rows of M bits; G = AES-128-CTR
  keyed by the seed, a stream that continues across calls); the sender forms q_i = G(k_i^{Δ_i}) ⊕ Δ_i·u_i.
  Transposed, row j satisfies q_j = t_j ⊕ r_j·Δ.
* Outputs: sender (H(j, q_j), H(j, q_j ⊕ Δ)), receiver H(j, t_j) = the one of index r_j, with H the tweakable
  correlation-robust hash TCCR(x, j) = π(π(x) ⊕ j) ⊕ π(x), π fixed-key AES-128 (Guo–Katz–Wang–Yu, S&P 2020).
  The tweak j is a global counter, never reused between calls.

SoftSpokenOT (Roy, CRYPTO 2022; ``SoftSpokenSender``, ``SoftSpokenReceiver``, the default of Alg. 3) gives the same
correlation q_j = t_j ⊕ r_j·Δ from κ/k small-field VOLEs over F_{2^k}: the receiver's u is κ/k rows instead of κ
(128/k bits per OT: 32 at k = 4, against IKNP's 128), for 2^k PRG streams per k rows instead of 2 per row. Its κ
base OTs carry the levels of κ/k GGM trees (native/src/softspoken.rs); everything after the correlation (the
transpose, the TCCR hash, the tweaks) is IKNP's. Its setup messages begin with ``SOFTSPOKEN_TAG``, the version and
k, so that a peer on the other variant or version fails at setup with a clear error, not with wrong bits.

Python keeps the base OTs, Δ, the counters and the checks; the PRG expansion, the bit-matrix transpose and
the hashing are native calls that release the GIL. A consumer that needs only a few bits of each key asks for
a prefix (``width``) or, natively, takes the keys task by task without storing them (``reserve``). The numpy
implementation they replaced is the test oracle (tests/helpers/otext_oracle.py): same seeds, Δ, choices and
counters give the same bytes.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..errors import CryptoError
from .native import ext
from .ot import ED25519, OTReceiver, OTRequest, OTResponse, OTSender

KAPPA = 128
SOFTSPOKEN_K = 4
"""SoftSpokenOT's default width k (docs/crypto.md: k = 8 halves the bytes again for 8× the sender's PRG work)."""
SOFTSPOKEN_KS = (1, 2, 4, 8)
SOFTSPOKEN_TAG = b"privface/softspoken"
SOFTSPOKEN_VERSION = 1
_FIXED_KEY = hashlib.shake_256(b"privface/otext/tccr/v1").digest(16)
"""π's key; native/src/otext.rs holds the same 16 bytes (``ext.tccr_key()``, compared by the tests)."""


def tccr(x: np.ndarray, tweak: np.ndarray) -> np.ndarray:
    """TCCR(x, tweak) for rows x (..., 16) uint8 and integer tweaks (...) (< 2^64)."""
    x = np.ascontiguousarray(x, dtype=np.uint8)
    if x.shape[-1:] != (16,):
        raise CryptoError("TCCR: rows must be 16 bytes")
    tw = np.ascontiguousarray(np.broadcast_to(np.asarray(tweak, dtype=np.uint64), x.shape[:-1]))
    return ext.tccr_hash(x, tw).reshape(x.shape)


def _transpose(rows: np.ndarray, m: int) -> np.ndarray:
    """κ rows of m bits (κ, nb), nb a multiple of 8 → m rows of κ bits (m, 16); bits LSB-first
    (``bitorder="little"``), by 64×64 bit blocks (Hacker's Delight §7-3)."""
    return ext.bit_transpose(np.ascontiguousarray(rows, dtype=np.uint8), m)


class IKNPSender:
    """The extension sender (base-OT receiver). ``setup_request`` → receiver → ``setup_finish``."""

    rows = KAPPA
    """Rows of the receiver's message u."""

    def __init__(self) -> None:
        self._delta_bits = np.unpackbits(np.frombuffer(_random(16), dtype=np.uint8), bitorder="little")
        self.delta = np.packbits(self._delta_bits, bitorder="little")
        self._base = OTReceiver([int(b) for b in self._delta_bits], ED25519)
        self._core = None  # the native extension sender, after setup
        self.counter = 0

    def setup_request(self) -> bytes:
        return self._base.request().to_bytes()

    def setup_finish(self, response: bytes) -> None:
        seeds = self._base.receive(OTResponse.from_bytes(response))
        if any(len(k) != 16 for k in seeds):
            raise CryptoError("IKNP: base-OT seeds must be 16 bytes")
        self._core = ext.IknpSender(self.delta.tobytes(), b"".join(seeds))

    def correlated(self) -> None:
        """From now on ``extend`` returns (q_j, q_j ⊕ Δ) unhashed: the correlation Ferret's setup reads
        (``crypto.ferret``); never for random OTs."""
        if self._core is None:
            raise CryptoError("OT extension: setup first")
        self._core.correlated()

    def extend(self, u: np.ndarray, m: int, width: int = 16) -> tuple[np.ndarray, np.ndarray]:
        """The receiver's u (κ, 8·⌈m/64⌉) → (H(j, q_j), H(j, q_j ⊕ Δ)), each (m, width): the keys' first
        ``width`` bytes (a consumer of one bit or one word keeps 1 or 4)."""
        core, first = self.reserve(u, m)
        return core.extend(np.ascontiguousarray(u), m, first, width)

    def reserve(self, u: np.ndarray, m: int):
        """Check the receiver's u for m OTs and take their tweaks: (the native sender, the first tweak), for a
        native step that extends and uses the keys in one pass (``millionaire``'s leaves)."""
        if self._core is None:
            raise CryptoError("IKNP: setup first")
        nb = -(-m // 64) * 8
        if not isinstance(u, np.ndarray) or u.dtype != np.uint8 or u.shape != (self.rows, nb):
            raise CryptoError(f"OT extension: u must be uint8 ({self.rows}, {nb})")
        first, self.counter = self.counter, self.counter + m
        return self._core, first


class IKNPReceiver:
    """The extension receiver (base-OT sender)."""

    rows = KAPPA

    def __init__(self) -> None:
        self._seeds = [(_random(16), _random(16)) for _ in range(KAPPA)]
        self._core = ext.IknpReceiver(b"".join(a for a, _ in self._seeds), b"".join(b for _, b in self._seeds))
        self.counter = 0

    def setup_response(self, request: bytes) -> bytes:
        return OTSender(ED25519).respond(OTRequest.from_bytes(request), self._seeds).to_bytes()

    def correlated(self) -> None:
        """From now on ``extend`` returns t_j unhashed (t_j = q_j ⊕ r_j·Δ), for Ferret's setup."""
        if self._core is None:
            raise CryptoError("OT extension: setup first")
        self._core.correlated()

    def extend(self, choices: np.ndarray, width: int = 16) -> tuple[np.ndarray, np.ndarray]:
        """Choice bits r (m,) → (u to send (κ, 8·⌈m/64⌉) uint8, H(j, t_j) (m, width): the keys' first ``width``
        bytes)."""
        r = np.ascontiguousarray(np.asarray(choices, dtype=np.uint8).ravel())
        core, first = self.reserve(r.size)
        return core.extend(r, first, width)

    def reserve(self, m: int):
        """Take the tweaks of m OTs: (the native receiver, the first tweak), for a native step that extends and
        uses the keys in one pass (``millionaire``'s leaves)."""
        if self._core is None:
            raise CryptoError("OT extension: setup first")
        first, self.counter = self.counter, self.counter + m
        return self._core, first


def _header(k: int) -> bytes:
    return SOFTSPOKEN_TAG + bytes([SOFTSPOKEN_VERSION, k])


def _split(message: bytes, what: str) -> tuple[int, bytes]:
    """A SoftSpokenOT setup message → (k, the base-OT message); CryptoError when it names another variant."""
    n = len(SOFTSPOKEN_TAG)
    if not isinstance(message, bytes | bytearray) or not message.startswith(SOFTSPOKEN_TAG) or len(message) < n + 2:
        raise CryptoError(f"{what} names no SoftSpokenOT version: the peer runs another OT extension (privface "
                          "before SoftSpokenOT ran IKNP); both sides need the same release")
    version, k = message[n], message[n + 1]
    if version != SOFTSPOKEN_VERSION or k not in SOFTSPOKEN_KS:
        raise CryptoError(f"{what}: SoftSpokenOT version {version}, k = {k}; this side runs version "
                          f"{SOFTSPOKEN_VERSION}, k in {SOFTSPOKEN_KS}")
    return k, bytes(message[n + 2:])


class SoftSpokenSender(IKNPSender):
    """SoftSpokenOT's extension sender (Roy, CRYPTO 2022, semi-honest; native/src/softspoken.rs): as
    ``IKNPSender``, its κ base-OT choices Δ; it learns every GGM leaf but leaf Δ_i of each instance, and the
    receiver's u has κ/k rows. ``k`` (``SOFTSPOKEN_KS``) is this side's choice; the request carries it."""

    def __init__(self, k: int = SOFTSPOKEN_K) -> None:
        if k not in SOFTSPOKEN_KS:
            raise CryptoError(f"SoftSpokenOT: k must be one of {SOFTSPOKEN_KS}")
        super().__init__()
        self.k = k
        self.rows = KAPPA // k

    def setup_request(self) -> bytes:
        return _header(self.k) + super().setup_request()

    def setup_finish(self, response: bytes) -> None:
        k, body = _split(response, "the base-OT response")
        if k != self.k:
            raise CryptoError(f"the base-OT response is for k = {k}, not {self.k}")
        resp = OTResponse.from_bytes(body)
        if resp.message_bytes != 16:
            raise CryptoError("the base-OT response: SoftSpokenOT's messages are 16 bytes")
        got = self._base.receive(resp)
        if any(len(m) != 16 for m in got):
            raise CryptoError("SoftSpokenOT: base-OT messages must be 16 bytes")
        self._core = ext.IknpSender.softspoken(self.k, self.delta.tobytes(), b"".join(got))


class SoftSpokenReceiver(IKNPReceiver):
    """SoftSpokenOT's extension receiver (base-OT sender): κ/k random GGM roots; k is the sender's, read from its
    request (``setup_response``), which builds the native receiver."""

    def __init__(self) -> None:
        self._core = None
        self.counter = 0
        self.k = 0
        self.rows = 0

    def setup_response(self, request: bytes) -> bytes:
        k, body = _split(request, "the base-OT request")
        req = OTRequest.from_bytes(body)
        core, m0, m1 = ext.softspoken_receiver(k, _random(16 * (KAPPA // k)))
        pairs = [(m0[16 * j:16 * j + 16], m1[16 * j:16 * j + 16]) for j in range(KAPPA)]
        resp = OTSender(ED25519).respond(req, pairs).to_bytes()
        self._core, self.k, self.rows = core, k, KAPPA // k
        return _header(k) + resp


def _random(n: int) -> bytes:
    import secrets

    return secrets.token_bytes(n)
