"""IDFace almost-isometric transform and space-efficient encoding (seed 003 §4.1–§4.2).

* ``t_alpha``: top-α components by |x_i| → sign(x_i), the rest → 0 (Z_α, §4.1). Queries use T_β.
* ``separate``: x = x⁺ − x⁻ with x⁺, x⁻ ∈ {0, 1}^d (§4.2).
* ``encode`` / ``decode``: m binary vectors packed base p, x' = Σ_i p^{i} x_i (digit i = template i), p > every
  inner product that is later decoded. ⟨x', y⟩ = Σ_i p^{i} ⟨x_i, y⟩, so digits decode without carries.

Parameter sets and the base p: ``params.py``.
"""
from __future__ import annotations

import numpy as np

from ...errors import TemplateError


def _matrix(x, dim: int | None = None) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] == 0 or not np.issubdtype(x.dtype, np.number):
        raise TemplateError(f"expected templates as a (count, d) real array, got shape {x.shape}")
    if dim is not None and x.shape[1] != dim:
        raise TemplateError(f"expected d = {dim} coordinates, got {x.shape[1]}")
    if not np.all(np.isfinite(x)):
        raise TemplateError("templates have NaN or infinite coordinates")
    return x


def t_alpha(x, alpha: int) -> np.ndarray:
    """T_α (seed 003 §4.1): each row keeps the signs of its α largest-magnitude components, int8 in {−1, 0, 1}.

    Ties in |x_i| go to the lower index (stable sort), so the transform is deterministic. A zero component
    among the top α stays 0 (sign 0); unit-norm embeddings practically never have one.
    """
    x = _matrix(x)
    if not 1 <= alpha <= x.shape[1]:
        raise TemplateError(f"α must lie in [1, d = {x.shape[1]}], got {alpha}")
    top = np.argsort(-np.abs(x), axis=1, kind="stable")[:, :alpha]
    out = np.zeros(x.shape, dtype=np.int8)
    np.put_along_axis(out, top, np.sign(np.take_along_axis(x, top, axis=1)).astype(np.int8), axis=1)
    return out


def separate(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """z = z⁺ − z⁻ with z⁺, z⁻ ∈ {0, 1} (uint8), seed 003 §4.2."""
    return (z > 0).astype(np.uint8), (z < 0).astype(np.uint8)


def encode(bits: np.ndarray, base: int) -> np.ndarray:
    """Encode (§4.2): (m, …) binary digits → Σ_i p^{i}·bits[i] as uint64 (needs p^m < 2^64)."""
    m = bits.shape[0]
    if base ** m >= 1 << 64:
        raise TemplateError(f"{m} digits of base {base} do not fit 64 bits")
    out = np.zeros(bits.shape[1:], dtype=np.uint64)
    for i in range(m - 1, -1, -1):  # Horner
        out *= np.uint64(base)
        out += bits[i].astype(np.uint64)
    return out


def decode(values: np.ndarray, base: int, m: int) -> np.ndarray:
    """Decode (§4.2): uint64 values → (m, …) digits x_i = ⌊x'/p^{i}⌋ mod p (int64)."""
    v = np.asarray(values, dtype=np.uint64).copy()
    out = np.empty((m,) + v.shape, dtype=np.int64)
    if base & (base - 1) == 0:  # p = 2^k (β = 2^k − 1): shifts and masks, no 64-bit division
        k, mask = base.bit_length() - 1, np.uint64(base - 1)
        for i in range(m):
            out[i] = (v >> np.uint64(i * k)) & mask
        return out
    for i in range(m):
        out[i] = v % np.uint64(base)
        v //= np.uint64(base)
    return out


def plaintext_scores(gallery_t: np.ndarray, query_t: np.ndarray) -> np.ndarray:
    """⟨T_α(x_k), T_β(y)⟩ for every enrolled k (int64): the exact answer IDFace.IP_DB must decode."""
    return gallery_t.astype(np.int64) @ query_t.astype(np.int64).ravel()
