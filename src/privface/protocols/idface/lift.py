"""Tight-frame lift before T_α / T_β: x ↦ x·F, F ∈ R^{d×D} with orthonormal rows (D ≥ d).

**Our addition, not seed 003.** Seed 003 §4.1 bounds the error of ⟨T_α(x), T_β(y)⟩ against cos θ for templates
spread over S^{d−1}, and its < 1 % losses are for 512-D AdaFace templates. At d = 128 (dlib-resnet128) the
ternary transform keeps too few signs: centred LFW templates lose ~7–9 points of rank-1 (docs, idface page). Lifting the
(centred) template into D > d dimensions before T_α spreads its energy over D coordinates, so the sign pattern
of the α = ⌊2D/3⌋ largest keeps far more of the angle: the quantisation error of the ternary transform is spread
over D coordinates. Inner products — hence the plaintext cosine and the identities' geometry — are preserved
exactly, since F·Fᵀ = I_d (⟨xF, yF⟩ = ⟨x, y⟩). The cost is that of IDFace at dimension D (2D ciphertexts per
block, β additions per sign): ``privface bench identify --dim D`` measures it.

F is the transpose of the Q factor of a seeded (D, d) standard Gaussian matrix, with the signs of R's
diagonal moved into Q (so F is Haar-distributed and unique). The seed is fixed (``LIFT_SEED``) and recorded
with the parameters (``IDFaceParams.lift_seed``, persisted gallery metadata), so enrolment and queries use the
same F. F is a public parameter, like α and β: it is not a key and adds no secrecy.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...errors import TemplateError

#: The seed of the lift frame (fixed; galleries record it).
LIFT_SEED = 3
#: The lift D used when none is asked for, by template dimension d (docs, idface page: rank-1 at d = 128).
DEFAULT_LIFT = {128: 2048}
#: The largest lift accepted: 2D ciphertexts per block (D = 4096: 1 GiB per CKKS block at N = 8192).
MAX_LIFT = 4096


def check_lift(dim: int, lift: int, seed: int) -> None:
    if not isinstance(lift, int) or not dim <= lift <= MAX_LIFT:
        raise TemplateError(f"the lift dimension D must be an integer in [d = {dim}, {MAX_LIFT}], got {lift!r}")
    if not isinstance(seed, int) or seed < 0:
        raise TemplateError(f"the lift seed must be a non-negative integer, got {seed!r}")


def frame(dim: int, lift: int, seed: int = LIFT_SEED) -> np.ndarray:
    """F (d, D), float64, read-only: orthonormal rows, deterministic in (d, D, seed)."""
    check_lift(dim, lift, seed)
    return _frame(dim, lift, seed)


@lru_cache(maxsize=8)
def _frame(dim: int, lift: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed).standard_normal((lift, dim))
    q, r = np.linalg.qr(g)  # reduced: q (D, d) with orthonormal columns
    q *= np.where(np.diag(r) < 0, -1.0, 1.0)
    f = np.ascontiguousarray(q.T)
    f.setflags(write=False)
    return f


def lift(x: np.ndarray, dim: int, lift_dim: int, seed: int = LIFT_SEED) -> np.ndarray:
    """Rows of x (count, d) mapped to (count, D) by F; ⟨lift(x), lift(y)⟩ = ⟨x, y⟩."""
    return np.asarray(x, dtype=np.float64) @ frame(dim, lift_dim, seed)
