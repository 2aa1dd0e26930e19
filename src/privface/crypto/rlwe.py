"""RLWE arithmetic on SEAL BFV ciphertexts held as RNS arrays: key switching between two secret keys
(seed 001 §2.4, SwKeyGen / Switching) and coefficient read-out — the test oracle of the native core's ``bfv``.

SEAL generates the keys and does every encryption; ``tenseal.sealapi`` exposes no key switching between two
different secret keys (only relinearisation and Galois keys, whose key-switching keys it builds internally), so
SwKeyGen and Switching are implemented here over numpy arrays, with SEAL's decomposition:

* q = q_0·…·q_{L−1} (data primes), P = the special prime (SEAL's last coefficient-modulus prime).
* Gadget (RNS): digit_j(c) = [c]_{q_j} (the j-th residue, < q_j), g_j = (q/q_j)·[(q/q_j)^{-1}]_{q_j}, so
  Σ_j digit_j(c)·g_j ≡ c (mod q).
* SwKeyGen(s, s'): K_j = (−a_j·s' + e_j + P·g_j·s, a_j) mod qP, a_j uniform, e_j centred binomial (η = 21,
  σ ≈ 3.24 as SEAL's default); P·g_j·s is P·s in limb j and 0 in every other limb.
* Switching(c, K): (c_0, 0) + ⌊(Σ_j digit_j(c_1)·K_j)/P⌉ mod q decrypts under s' to c_0 + c_1·s + e_ks.

Randomness: ``secrets`` (os.urandom); uniform residues by rejection sampling.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import CryptoError
from .ntt import RNSNTT

CBD_ETA = 21


def uniform(shape, moduli) -> np.ndarray:
    """Uniform residues mod each prime (moduli broadcast on axis −2 of ``shape``), by rejection from 32 bits."""
    shape = tuple(shape)
    out = np.empty(shape, dtype=np.uint64)
    per = int(np.prod(shape[:-2] + shape[-1:], dtype=np.int64))
    for li, p in enumerate(int(x) for x in moduli):
        limit = (1 << 32) // p * p
        got = np.empty(0, dtype=np.uint64)
        while got.size < per:
            w = np.frombuffer(os.urandom(4 * ((per - got.size) * 17 // 16 + 16)), dtype="<u4")
            got = np.concatenate([got, (w[w < limit] % p).astype(np.uint64)])
        out[..., li, :] = got[:per].reshape(shape[:-2] + shape[-1:])
    return out


def cbd(shape) -> np.ndarray:
    """Centred binomial noise B(2η, ½) − η, η = 21 (int64)."""
    n = int(np.prod(shape, dtype=np.int64))
    bits = np.unpackbits(np.frombuffer(os.urandom((2 * CBD_ETA * n + 7) // 8), dtype=np.uint8))[:2 * CBD_ETA * n]
    b = bits.reshape(n, 2, CBD_ETA).sum(axis=2, dtype=np.int64)
    return (b[:, 0] - b[:, 1]).reshape(shape)


class RNSBasis:
    """The data primes q_0..q_{L−1} and special prime P of one SEAL context, with NTTs at both levels."""

    def __init__(self, data_moduli, special: int, n: int) -> None:
        self.q = tuple(int(p) for p in data_moduli)
        self.P, self.n, self.L = int(special), n, len(self.q)
        self.key = self.q + (self.P,)
        self.ntt = RNSNTT(self.q, n)
        self.ntt_key = RNSNTT(self.key, n)
        self.qv = self.ntt.p  # (L, 1) uint64
        self.kv = self.ntt_key.p
        self.Q = 1
        for p in self.q:
            self.Q *= p
        self.P_inv = np.array([pow(self.P, -1, p) for p in self.q], dtype=np.uint64)[:, None]
        # CRT read-out: y_l = x_l·[(Q/q_l)^{-1}]_{q_l} mod q_l, then t·x/Q ≡ Σ_l y_l·t/q_l (mod t)
        self.qhat_inv = np.array([pow(self.Q // p, -1, p) for p in self.q], dtype=np.uint64)

    def reduce_signed(self, v: np.ndarray, moduli=None) -> np.ndarray:
        """Signed integers (..., N) → residues (..., L, N) mod each prime of ``moduli`` (default: data primes)."""
        m = np.array(moduli or self.q, dtype=np.int64)[:, None]
        return np.mod(np.asarray(v, dtype=np.int64)[..., None, :], m).astype(np.uint64)

    def digits(self, c: np.ndarray, moduli) -> np.ndarray:
        """(..., L, N) coefficient residues mod q → (..., L digits, len(moduli), N): digit_j = [c]_{q_j}
        reduced mod every prime of ``moduli``."""
        m = np.array(moduli, dtype=np.uint64)[:, None]
        return c[..., :, None, :] % m


def secret_coefficients(basis: RNSBasis, seal_context, evaluator, secret_key) -> np.ndarray:
    """A SEAL secret key as its ternary coefficients (int64, N): SEAL keeps it in NTT form over qP; the data
    limbs go back through SEAL's inverse NTT (``seal_arrays``), and all limbs must agree on one ternary s."""
    from . import seal_arrays

    ntt = seal_arrays.plaintext_to_array(secret_key.data()).reshape(basis.L + 1, basis.n)
    coeffs = seal_arrays.inverse_ntt(seal_context, evaluator, seal_context.first_parms_id(), ntt[None, :basis.L])[0]
    q = np.array(basis.q, dtype=np.uint64)[:, None]
    s = np.where(coeffs == q - 1, -1, coeffs.astype(np.int64))
    if not (np.all(np.abs(s) <= 1) and np.all(s == s[0])):
        raise CryptoError("secret key is not one ternary polynomial")
    return s[0]


def swkeygen(basis: RNSBasis, s: np.ndarray, s_new: np.ndarray) -> np.ndarray:
    """SwKeyGen(s, s') → K of shape (L, 2, L+1, N), NTT form over qP (module docstring)."""
    L, n = basis.L, basis.n
    S = basis.ntt_key.forward(basis.reduce_signed(s, basis.key))
    S_new = basis.ntt_key.forward(basis.reduce_signed(s_new, basis.key))
    a = uniform((L, L + 1, n), basis.key)
    e = basis.ntt_key.forward(basis.reduce_signed(cbd((L, n)), basis.key))
    k0 = (e + basis.kv - a * S_new % basis.kv) % basis.kv
    for j in range(L):
        k0[j, j] = (k0[j, j] + np.uint64(basis.P % basis.q[j]) * S[j] % basis.kv[j]) % basis.kv[j]
    return np.stack([k0, a], axis=1)


def switch(basis: RNSBasis, ct: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Switching(ct, K): ciphertexts (..., 2, L, N) in coefficient form under s → the same under s'."""
    if ct.shape[-3:] != (2, basis.L, basis.n) or K.shape != (basis.L, 2, basis.L + 1, basis.n):
        raise CryptoError(f"key switching: bad shapes {ct.shape}, {K.shape}")
    D = basis.ntt_key.forward(basis.digits(ct[..., 1, :, :], basis.key))  # (..., L digits, L+1, N)
    acc = np.zeros(ct.shape[:-3] + (2, basis.L + 1, basis.n), dtype=np.uint64)
    for j in range(basis.L):
        for o in range(2):
            acc[..., o, :, :] += D[..., j, :, :] * K[j, o] % basis.kv
    acc = basis.ntt_key.inverse(acc % basis.kv)
    v = acc[..., basis.L:, :].astype(np.int64)  # the P limb, centred: ⌊x/P⌉ = (x − [x]_P)/P
    v = np.where(v > basis.P // 2, v - basis.P, v)
    q = basis.qv.astype(np.int64)
    low = np.mod(acc[..., :basis.L, :].astype(np.int64) - v, q).astype(np.uint64)
    out = low * basis.P_inv % basis.qv
    out[..., 0, :, :] = (out[..., 0, :, :] + ct[..., 0, :, :]) % basis.qv
    return out


def functional_parts(W: np.ndarray) -> np.ndarray:
    """W (L, k, N) residues < 2^30 → (L, N, 3k) float64: its 10-bit parts (shifts 20, 10, 0), for ``matmul_mod``."""
    parts = [((W >> np.uint64(sh)) & np.uint64(1023)) for sh in (20, 10, 0)]
    return np.ascontiguousarray(np.concatenate(parts, axis=1).transpose(0, 2, 1)).astype(np.float64)


def matmul_mod(x: np.ndarray, parts: np.ndarray, moduli) -> np.ndarray:
    """Per limb, x[:, l, :] @ W[l].T mod q_l exactly, with ``parts = functional_parts(W)``: x (S, L, N) residues
    < 2^28; each float64 (BLAS) sum of products of x with a 10-bit part stays below 2^53 (N ≤ 8192)."""
    S, L, n = x.shape
    k = parts.shape[2] // 3
    out = np.empty((S, L, k), dtype=np.uint64)
    for limb in range(L):
        p = np.uint64(moduli[limb])
        r = (x[:, limb, :].astype(np.float64) @ parts[limb]).astype(np.uint64) % p  # (S, 3k)
        acc = r[:, :k] * (np.uint64(1 << 20) % p) % p + r[:, k:2 * k] * np.uint64(1 << 10) % p + r[:, 2 * k:]
        out[:, limb] = acc % p
    return out


