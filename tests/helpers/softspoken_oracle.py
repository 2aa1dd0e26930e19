"""A numpy SoftSpokenOT (Roy, CRYPTO 2022), semi-honest, written from the paper independently of
native/src/softspoken.rs, as the test oracle it is compared with byte for byte (tests/crypto/test_crypto_softspoken.py).
Not used by the library.

Per instance i < κ/k: a k-level GGM tree (G(s) = AES-128-CTR_s, 32 bytes: left, right child) gives 2^k leaf seeds
s_{i,x}, x read MSB first along the path; base OT i·k + b carries the XOR of the level-(k − b) nodes whose last bit is
1 (message 0) or 0 (message 1). r_{i,x} = G(s_{i,x}), one AES-CTR stream per leaf continuing across calls. The
receiver sends c_i = ⊕_x r_{i,x} ⊕ r and keeps t rows i·k + b = ⊕_{x: x_b = 1} r_{i,x}; the sender, lacking leaf Δ_i,
forms q rows ⊕_{x ≠ Δ_i: (x ⊕ Δ_i)_b = 1} r_{i,x} ⊕ Δ_{i,b}·c_i. Then IKNP's transpose and TCCR hash
(tests/helpers/otext_oracle.py). Here the field is written out: (Δ_i − x)·r_x over F_{2^k}, x and Δ_i as
polynomials, r_x a bit, is the k-bit vector (Δ_i ⊕ x)·r_x.
"""
from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.helpers.otext_oracle import KAPPA, _Streams, _transpose, tccr


def _g(s: bytes) -> tuple[bytes, bytes]:
    out = Cipher(algorithms.AES(s), modes.CTR(bytes(16))).encryptor().update(bytes(32))
    return out[:16], out[16:]


def ggm(root: bytes, k: int) -> list[list[bytes]]:
    """Every level of the tree: level d holds 2^d nodes, node p's children 2p, 2p + 1."""
    levels = [[root]]
    for _ in range(k):
        levels.append([c for s in levels[-1] for c in _g(s)])
    return levels


def _xor(items) -> bytes:
    acc = np.zeros(16, np.uint8)
    for it in items:
        acc ^= np.frombuffer(it, np.uint8)
    return acc.tobytes()


def base_messages(k: int, roots: list[bytes]) -> tuple[list[tuple[bytes, bytes]], list[list[bytes]]]:
    """(the κ base-OT message pairs, each instance's 2^k leaves)."""
    pairs, leaves = [], []
    for root in roots:
        levels = ggm(root, k)
        for b in range(k):
            nodes = levels[k - b]
            pairs.append((_xor(nodes[1::2]), _xor(nodes[0::2])))
        leaves.append(levels[k])
    return pairs, leaves


def _packed(r: np.ndarray, nb: int) -> np.ndarray:
    out = np.zeros(nb, np.uint8)
    out[:(r.size + 7) // 8] = np.packbits(r, bitorder="little")
    return out


class SoftSpokenReceiver:
    def __init__(self, k: int, roots: list[bytes]) -> None:
        self.k = k
        self.pairs, leaves = base_messages(k, roots)
        self._streams = _Streams([s for inst in leaves for s in inst])
        self.counter = 0

    def extend(self, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = np.asarray(choices, dtype=np.uint8).ravel()
        m, k = r.size, self.k
        nb = -(-m // 64) * 8
        rx = self._streams.take(nb).reshape(KAPPA // k, 1 << k, nb)
        xs = np.arange(1 << k)
        t = np.stack([np.bitwise_xor.reduce(rx[i, (xs >> b) & 1 == 1], axis=0)
                      for i in range(KAPPA // k) for b in range(k)])
        u = np.bitwise_xor.reduce(rx, axis=1) ^ _packed(r, nb)[None, :]
        u[:, (m + 7) // 8:] = 0
        tweak = np.arange(self.counter, self.counter + m, dtype=np.uint64)
        self.counter += m
        return u, tccr(_transpose(t, m), tweak)


class SoftSpokenSender:
    """Given Δ and every leaf of the receiver's trees (it uses none at x = Δ_i)."""

    def __init__(self, k: int, delta: bytes, leaves: list[list[bytes]]) -> None:
        self.k = k
        self.delta = np.frombuffer(delta, np.uint8).copy()
        bits = np.unpackbits(self.delta, bitorder="little")
        self._d = [int(sum(int(bits[i * k + b]) << b for b in range(k))) for i in range(KAPPA // k)]
        self._bits = bits
        self._streams = _Streams([s for inst in leaves for s in inst])
        self.counter = 0

    def extend(self, u: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        k = self.k
        nb = -(-m // 64) * 8
        assert u.shape == (KAPPA // k, nb)
        rx = self._streams.take(nb).reshape(KAPPA // k, 1 << k, nb)
        q = np.zeros((KAPPA, nb), np.uint8)
        for i in range(KAPPA // k):
            for x in range(1 << k):
                if x == self._d[i]:
                    continue
                coeff = x ^ self._d[i]  # (Δ_i − x) in F_{2^k}, as bits
                for b in range(k):
                    if coeff >> b & 1:
                        q[i * k + b] ^= rx[i, x]
            for b in range(k):
                if self._bits[i * k + b]:
                    q[i * k + b] ^= u[i]
        q = _transpose(q, m)
        tweak = np.arange(self.counter, self.counter + m, dtype=np.uint64)
        self.counter += m
        return tccr(q, tweak), tccr(q ^ self.delta, tweak)
