"""The numpy IKNP OT extension that privface.crypto.otext ran before the native core (native/src/otext.rs),
frozen as the test oracle the native functions are compared with byte for byte on the same seeds, Δ,
choices and counters (tests/crypto/test_crypto_otext_native.py). Not used by the library.

IKNP (Ishai–Kilian–Nissim–Petrank, CRYPTO 2003 — seed 001 ref. [18]), semi-honest: the receiver sends
u_i = G(k_i^0) ⊕ G(k_i^1) ⊕ r (κ rows of M bits; G = AES-128-CTR keyed by the seed, a stream that continues
across calls); the sender forms q_i = G(k_i^{Δ_i}) ⊕ Δ_i·u_i; transposed, row j satisfies q_j = t_j ⊕ r_j·Δ.
Outputs: sender (H(j, q_j), H(j, q_j ⊕ Δ)), receiver H(j, t_j), with H the tweakable correlation-robust hash
TCCR(x, j) = π(π(x) ⊕ j) ⊕ π(x), π fixed-key AES-128 (Guo–Katz–Wang–Yu, S&P 2020). The base OTs are left
out: the oracle parties are built from the seeds (``IKNPSender(delta, seeds)``, ``IKNPReceiver(seeds)``).
"""
from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from privface.errors import CryptoError

KAPPA = 128
_FIXED_KEY = hashlib.shake_256(b"privface/otext/tccr/v1").digest(16)


def _perm(x: np.ndarray) -> np.ndarray:
    """π: fixed-key AES-128 on every 16-byte row of x (uint8, (..., 16))."""
    enc = Cipher(algorithms.AES(_FIXED_KEY), modes.ECB()).encryptor()
    src = np.ascontiguousarray(x)
    out = np.empty(src.size + 15, dtype=np.uint8)
    n = enc.update_into(src.data.cast("B"), out.data)
    return out[:n].reshape(x.shape)


def tccr(x: np.ndarray, tweak: np.ndarray) -> np.ndarray:
    """TCCR(x, tweak) for rows x (..., 16) uint8 and integer tweaks (...) (< 2^64)."""
    px = _perm(x)
    tw = np.zeros(x.shape, dtype=np.uint8)
    tw[..., :8] = np.ascontiguousarray(tweak, dtype="<u8")[..., None].view(np.uint8).reshape(tweak.shape + (8,))
    return _perm(px ^ tw) ^ px


class _Streams:
    """κ AES-CTR streams G(k_i), each continuing where the last call stopped."""

    def __init__(self, seeds: list[bytes]) -> None:
        self._enc = [Cipher(algorithms.AES(k), modes.CTR(bytes(16))).encryptor() for k in seeds]

    def take(self, nbytes: int) -> np.ndarray:
        zero = bytes(nbytes)
        return np.stack([np.frombuffer(e.update(zero), dtype=np.uint8) for e in self._enc])


_MASKS = {j: np.uint64(sum(1 << c for c in range(64) if not c & j)) for j in (32, 16, 8, 4, 2, 1)}


def _transpose(rows: np.ndarray, m: int) -> np.ndarray:
    """κ rows of m bits (κ, nb), nb a multiple of 8 → m rows of κ bits (m, 16); bits LSB-first
    (``bitorder="little"``). Each 64×64 bit block (64 uint64 words) is transposed in place by six masked
    swap rounds (Hacker's Delight §7-3), vectorised over all blocks."""
    k, nb = rows.shape
    W = np.ascontiguousarray(rows).view("<u8").copy()  # (κ, nb/8): word r of block c = row r, columns 64c..
    for j in (32, 16, 8, 4, 2, 1):
        V = W.reshape(k // (2 * j), 2, j, -1)
        a, b = V[:, 0], V[:, 1]
        t = ((a >> np.uint64(j)) ^ b) & _MASKS[j]
        a ^= t << np.uint64(j)
        b ^= t
    out = W.reshape(k // 64, 64, -1).transpose(2, 1, 0).reshape(-1, k // 64)
    return np.ascontiguousarray(out).view(np.uint8)[:m]


class IKNPSender:
    """The extension sender, given Δ (16 bytes, bits LSB first) and the κ seeds k_i^{Δ_i} of its base OTs."""

    def __init__(self, delta: bytes, seeds: list[bytes]) -> None:
        self.delta = np.frombuffer(delta, dtype=np.uint8).copy()
        self._delta_bits = np.unpackbits(self.delta, bitorder="little")
        self._streams = _Streams(seeds)
        self.counter = 0

    def extend(self, u: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The receiver's u (κ, 8·⌈m/64⌉) → (H(j, q_j), H(j, q_j ⊕ Δ)), each (m, 16)."""
        nb = -(-m // 64) * 8
        if not isinstance(u, np.ndarray) or u.dtype != np.uint8 or u.shape != (KAPPA, nb):
            raise CryptoError(f"IKNP: u must be uint8 ({KAPPA}, {nb})")
        q = self._streams.take(nb) ^ (u * self._delta_bits[:, None].astype(np.uint8))
        q = _transpose(q, m)
        tweak = np.arange(self.counter, self.counter + m, dtype=np.uint64)
        self.counter += m
        return tccr(q, tweak), tccr(q ^ self.delta, tweak)


class IKNPReceiver:
    """The extension receiver, given the κ seed pairs (k_i^0, k_i^1) of its base OTs."""

    def __init__(self, seeds: list[tuple[bytes, bytes]]) -> None:
        self._s0 = _Streams([a for a, _ in seeds])
        self._s1 = _Streams([b for _, b in seeds])
        self.counter = 0

    def extend(self, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Choice bits r (m,) → (u to send (κ, 8·⌈m/64⌉) uint8, H(j, t_j) (m, 16))."""
        r = np.asarray(choices, dtype=np.uint8).ravel()
        m = r.size
        nb = -(-m // 64) * 8  # whole 64-bit words for the transpose
        t = self._s0.take(nb)
        packed = np.zeros(nb, dtype=np.uint8)
        packed[:(m + 7) // 8] = np.packbits(r, bitorder="little")
        u = t ^ self._s1.take(nb) ^ packed[None, :]
        tweak = np.arange(self.counter, self.counter + m, dtype=np.uint64)
        self.counter += m
        return u, tccr(_transpose(t, m), tweak)
