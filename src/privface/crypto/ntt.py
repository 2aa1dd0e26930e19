"""Negacyclic NTT over an RNS basis, vectorised with numpy (for cryptomask's key switching, seed 001 §2.4).

SEAL's NTT is reachable from Python only through serialisation and only at the data level (SEAL refuses a
ciphertext at the key level, where key switching works), so RLWE polynomials that cryptomask handles as
arrays use this transform instead. For each prime p ≡ 1 (mod 2N) with a primitive 2N-th root ψ,

    NTT(a)_k = Σ_i a_i ψ^{(2k+1)i}  (mod p),  k = 0..N−1 (natural order),

i.e. a evaluated at the odd powers of ψ, so a·b mod (X^N + 1) is the pointwise product. The cyclic part is a
radix-2 decimation-in-time transform vectorised over every leading axis (a 16-point DFT matrix at the bottom,
then log2(N/16) butterfly stages over whole arrays; min(x, x − p) is the conditional subtraction of p in
uint64). Primes must be below 2^29 so that 16 products of two residues fit a uint64 exactly.
"""
from __future__ import annotations

import numpy as np

from ..errors import CryptoError

_BASE = 16


def _root(p: int, n: int) -> int:
    """A primitive 2n-th root of unity mod the prime p (needs p ≡ 1 mod 2n)."""
    if (p - 1) % (2 * n):
        raise CryptoError(f"NTT: {p} is not ≡ 1 (mod {2 * n})")
    for g in range(2, 1 << 16):
        psi = pow(g, (p - 1) // (2 * n), p)
        if pow(psi, n, p) == p - 1:
            return psi
    raise CryptoError(f"NTT: no 2N-th root found mod {p}")


def _powers(base: int, count: int, p: int) -> np.ndarray:
    out = np.empty(count, dtype=np.uint64)
    x = 1
    for i in range(count):
        out[i] = x
        x = x * base % p
    return out


class RNSNTT:
    """Forward/inverse negacyclic NTT of arrays shaped (..., L, N) for the primes ``moduli`` (L of them)."""

    def __init__(self, moduli, n: int) -> None:
        moduli = tuple(int(p) for p in moduli)
        if any(p >= 1 << 29 for p in moduli) or n < _BASE or n & (n - 1):
            raise CryptoError("NTT: primes must be < 2^29 and N a power of two ≥ 16")
        self.moduli, self.n = moduli, n
        self.p = np.array(moduli, dtype=np.uint64)[:, None]
        self.psis = psis = [_root(p, n) for p in moduli]
        self.psi_pow = np.stack([_powers(s, n, p) for s, p in zip(psis, moduli)])
        self.psi_inv_pow_ninv = np.stack([_powers(pow(s, -1, p), n, p) * np.uint64(pow(n, -1, p)) % np.uint64(p)
                                          for s, p in zip(psis, moduli)])
        self._fwd = self._tables([s * s % p for s, p in zip(psis, moduli)])
        self._inv = self._tables([pow(s * s, -1, p) for s, p in zip(psis, moduli)])

    def _tables(self, omegas):
        """Per prime: the 16-point DFT matrix and the twiddles of every butterfly stage."""
        n = self.n
        base = np.stack([np.array([[pow(w, (n // _BASE) * i * j, p) for j in range(_BASE)] for i in range(_BASE)],
                                  dtype=np.uint64) for w, p in zip(omegas, self.moduli)])
        stages, r = [], _BASE
        while r < n:
            stages.append(np.stack([_powers(pow(w, n // (2 * r), p), r, p) for w, p in zip(omegas, self.moduli)]))
            r *= 2
        return base, stages

    def _cyclic(self, x: np.ndarray, tables) -> np.ndarray:
        base, stages = tables
        lead, L, n = x.shape[:-2], x.shape[-2], self.n
        p = self.p.reshape(L, 1, 1)
        y = x.reshape(-1, L, _BASE, n // _BASE)
        acc = np.zeros_like(y)
        for j in range(_BASE):  # y[b, l] = base[l] @ y[b, l]: 16 products < 2^59 in all, reduced once
            acc += base[None, :, :, j, None] * y[:, :, None, j, :]
        acc %= p
        for tw in stages:
            half = acc.shape[-1] // 2
            even, odd = acc[..., :half], acc[..., half:]
            t = odd * tw[None, :, :, None] % p
            hi, lo = even + t, even + p - t
            acc = np.concatenate([np.minimum(hi, hi - p), np.minimum(lo, lo - p)], axis=-2)
        return acc.reshape(*lead, L, n)

    def _check(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a, dtype=np.uint64)
        if a.ndim < 2 or a.shape[-2:] != (len(self.moduli), self.n):
            raise CryptoError(f"NTT: expected (..., {len(self.moduli)}, {self.n}), got {a.shape}")
        return a

    def forward(self, a: np.ndarray) -> np.ndarray:
        """NTT of residues in [0, p) per limb."""
        a = self._check(a)
        return self._cyclic(a * self.psi_pow % self.p, self._fwd)

    def inverse(self, a: np.ndarray) -> np.ndarray:
        a = self._check(a)
        return self._cyclic(a, self._inv) * self.psi_inv_pow_ninv % self.p

    def coefficient_functional(self, positions) -> np.ndarray:
        """W (L, len(positions), N): coefficient j of a polynomial a is Σ_k W[l, j, k]·NTT(a)[l, k] mod p_l
        (row j of the inverse transform: W[j, k] = N^{-1}·ψ^{-(2k+1)j}), for reading a few coefficients
        without an inverse NTT."""
        pos = [int(j) for j in positions]
        out = np.empty((len(self.moduli), len(pos), self.n), dtype=np.uint64)
        for li, (p, psi) in enumerate(zip(self.moduli, self.psis)):
            inv, ninv = pow(psi, -1, p), pow(self.n, -1, p)
            for r, j in enumerate(pos):
                out[li, r] = (_powers(pow(inv, 2 * j, p), self.n, p) * np.uint64(pow(inv, j, p) * ninv % p)
                              % np.uint64(p))
        return out
