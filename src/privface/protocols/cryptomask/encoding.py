"""CryptoMask data representation and encoding (seed 001 §3.4, §2.2, §4.1).

* §3.4: unit-norm face vectors are scaled to integers, a ↦ round(2^SCALE_BITS · a).
* §2.2 (Cheetah): a δ×d matrix A becomes π(A) = Σ_i Σ_j A[i, d−1−j]·X^{i·d+j} and the query b becomes
  π(b) = Σ_j b[j]·X^j, so coefficient (k+1)·d − 1 of π(A)·π(b) is ⟨A[k], b⟩.
* §4.1: δ = ⌈(N − d)/d⌉ rows per polynomial leave the top d coefficients as a buffer, so no product term that
  matters wraps around X^N = −1 (δ·d ≤ N − 1 for every d, so the wrapped terms land below position d − 1).
* Slices (privface's layout, not the paper's): the d columns are cut into S = ``slices(d)`` slices of
  D = ``stride(d)`` columns (D a power of two, at most ``WIDTH``; zero columns pad the last slice), and §2.2 encodes
  each slice on its own: a gallery ciphertext is a stack of S ciphertexts π(A_σ) over the same δ = N/D − 1
  templates, the query S polynomials π(b_σ). Σ_σ π(A_σ)·π(b_σ) holds ⟨A[k], b⟩ at (k+1)·D − 1. The CS sums
  the slices' products before its one inverse transform per stack, and packs D stacks into one ciphertext
  (``he``, PackLWEs over the subring Z[X^D]): the per-ciphertext work after the products is D/d of the
  unsliced layout's (d = D: the paper's π(A) itself).
"""
from __future__ import annotations

import numpy as np

from ...errors import TemplateError

#: §3.4 precision: 2^-8 per coordinate (seed 001 App. B: 0.0025–0.01 keep LFW accuracy). Scores ⟨a, b⟩ then
#: lie within ±2^16·(1 + ε), far inside the signed range ±2^19 of t = 2^20 that Alg. 3's comparison needs.
SCALE_BITS = 8
#: Columns per slice at most: more slices make the query longer (2S + 1 rows) and an enrolment S ciphertexts,
#: fewer make the packing longer (log₂ D levels per D stacks); 8 balances them at d = 128 (docs/protocols).
WIDTH = 8


def stride(d: int) -> int:
    """D: the columns (and coefficients per row) of a slice, d rounded up to a power of two, at most WIDTH."""
    return min(WIDTH, 1 << max(0, int(d) - 1).bit_length())


def slices(d: int) -> int:
    """S = ⌈d/D⌉: the ciphertexts of one gallery stack and the polynomials of one query."""
    return -(-int(d) // stride(d))


def rows_per_poly(n: int, d: int) -> int:
    """δ = ⌈(N − D)/D⌉ = N/D − 1 (§4.1 with the stride D): the templates of one stack."""
    if not 1 <= d < n // 2:
        raise TemplateError(f"dimension must be in [1, {n // 2}), got {d}")
    D = stride(d)
    return -(-(n - D) // D)


def positions(n: int, d: int) -> np.ndarray:
    """The coefficients k·D − 1, k = 1..δ, that hold the δ inner products (Alg. 2 lines 7, 14)."""
    return np.arange(1, rows_per_poly(n, d) + 1) * stride(d) - 1


def quantize(x) -> np.ndarray:
    """Unit vectors (rows) → int64 at 2^SCALE_BITS (§3.4); refuses non-finite or non-unit-ish input."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in (1, 2) or not np.all(np.isfinite(x)):
        raise TemplateError("templates must be finite vectors")
    norms = np.linalg.norm(x, axis=-1)
    if np.any(np.abs(norms - 1) > 1e-3):
        raise TemplateError("cryptomask templates must be unit vectors (§2.1: cosine similarity)")
    return np.rint(x * (1 << SCALE_BITS)).astype(np.int64)


def _sliced(x: np.ndarray, d: int) -> np.ndarray:
    """(…, d) → (…, S, D): the columns cut into slices, the last one padded with zeros."""
    D, S = stride(d), slices(d)
    padded = np.zeros(x.shape[:-1] + (S * D,), dtype=np.int64)
    padded[..., :d] = x
    return padded.reshape(x.shape[:-1] + (S, D))


def encode_matrix(A: np.ndarray, n: int, t: int) -> np.ndarray:
    """π(A_σ) mod t for every slice σ: (S, N) uint64 coefficients, for up to δ integer rows (§2.2, §4.1)."""
    rows, d = A.shape
    if rows > rows_per_poly(n, d):
        raise TemplateError(f"at most δ = {rows_per_poly(n, d)} rows per polynomial, got {rows}")
    sl = _sliced(np.asarray(A, dtype=np.int64), d).transpose(1, 0, 2)  # (S, rows, D)
    out = np.zeros((sl.shape[0], n), dtype=np.int64)
    out[:, :rows * sl.shape[2]] = sl[:, :, ::-1].reshape(sl.shape[0], -1)
    return np.mod(out, t).astype(np.uint64)


def encode_query(b: np.ndarray, n: int) -> np.ndarray:
    """π(b_σ) for every slice σ: (S, N) signed coefficients (§2.2)."""
    sl = _sliced(np.asarray(b, dtype=np.int64), b.size)
    out = np.zeros((sl.shape[0], n), dtype=np.int64)
    out[:, :sl.shape[1]] = sl
    return out
