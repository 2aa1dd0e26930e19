"""Unit-norm embeddings → m-bit integer templates of one exact L2 norm ζ (seed 004 §2 Def. 1, §3 Fig. 1).

Seed 004 compares templates u, w ∈ Z_{2^m}^ℓ with ‖u‖ = ‖w‖ = ζ by the inner product: CS(u, w) ≥ T′ iff
⟨u, w⟩ ≥ T = T′·ζ², and enrolment proves ‖u‖² = ζ² exactly (§8.3, Fig. 10). Embeddings are signed, so a
template here is the signed vector u with |u_i| ≤ ζ = 2^(m−1) − 1 (an m-bit two's-complement range) and
Σu_i² = ζ² exactly; the protocol shifts it by 2^(m−1) into Z_{2^m} where the packing needs it.

``fixed_norm_template``: round ζ·x/‖x‖ to integers, then move single coordinates by ±1 (or a pair in
opposite directions) until Σu_i² = ζ², always taking the move that brings the squared norm closest to
ζ² — each move changes a coordinate by 1 out of ζ, so the direction moves by O(1/ζ). When no such move
helps (large m: the gaps between achievable steps exceed the residue), the four smallest coordinates are
re-chosen near their values as a sum of four squares with the missing total (Lagrange: one always exists).
Ties go to the first index and sorts are stable, so the page's port (web/src/templates/fixedNorm.ts) gives the
same template bit for bit.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TemplateError


def zeta(m: int) -> int:
    """ζ = 2^(m−1) − 1: the norm of an m-bit template (every |u_i| ≤ ζ fits m-bit two's complement)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 2 <= m <= 31:
        raise TemplateError(f"template bits m must be an integer in [2, 31], got {m!r}")
    return (1 << (int(m) - 1)) - 1


def fixed_norm_template(x, m: int, *, max_moves: int = 100_000) -> np.ndarray:
    """The int64 template u with Σu_i² = ζ² closest (greedy, see module docstring) to ζ·x/‖x‖."""
    z = zeta(m)
    v = np.asarray(x, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise TemplateError(f"an embedding must be a non-empty finite 1-D vector, got shape {v.shape}")
    norm = math.sqrt(math.fsum(v * v))  # correctly rounded: the page's port (web/src/templates) gets the same bits
    if norm == 0:
        raise TemplateError("cannot normalise a zero embedding")
    u = np.rint(v * (z / norm)).astype(np.int64)
    target = z * z
    for _ in range(max_moves):
        r = target - int(np.dot(u, u))
        if r == 0:
            return u
        gap, moved = _best_move(u, z, r)
        if gap >= abs(r):  # stuck (e.g. r odd and small: pair moves are even): one single move first
            options = [(g, w) for w in _single_moves(u, z, r, 16)
                       for g, w in [_apply_best(w, z, target - int(np.dot(w, w)))]]
            gap, moved = min(options, key=lambda o: o[0])
            if gap >= abs(r):
                return _finish(u, z, target)
        u = moved
    raise TemplateError(f"could not reach the exact squared norm ζ² = {target} (ℓ = {u.size}, m = {m})")


def _steps(u: np.ndarray, z: int) -> tuple[np.ndarray, np.ndarray]:
    """Change of Σu² when |u_i| grows by 1 (2|u_i| + 1) or shrinks by 1 (−(2|u_i| − 1)); ±inf if impossible."""
    mag = np.abs(u).astype(np.float64)
    return np.where(mag < z, 2 * mag + 1, np.inf), np.where(mag >= 1, -(2 * mag - 1), -np.inf)


def _moved(u: np.ndarray, grow: tuple[int, ...], shrink: tuple[int, ...]) -> np.ndarray:
    w = u.copy()
    for i in grow:
        w[i] += 1 if w[i] >= 0 else -1
    for i in shrink:
        w[i] -= 1 if w[i] > 0 else -1
    return w


def _best_move(u: np.ndarray, z: int, r: int) -> tuple[float, np.ndarray]:
    """(|r − Δ|, moved template) for the best single or pair move (pairs: one coordinate up, one down)."""
    up, down = _steps(u, z)
    i_up, i_down = int(np.argmin(np.abs(r - up))), int(np.argmin(np.abs(r - down)))
    with np.errstate(invalid="ignore"):
        pair = up[:, None] + down[None, :]
    pair[~np.isfinite(pair)] = np.inf
    np.fill_diagonal(pair, np.inf)
    i, j = divmod(int(np.argmin(np.abs(r - pair))), u.size)
    options = [(abs(r - up[i_up]), (i_up,), ()), (abs(r - down[i_down]), (), (i_down,)),
               (abs(r - pair[i, j]), (i,), (j,))]
    gap, grow, shrink = min(options, key=lambda o: o[0])
    return gap, _moved(u, grow, shrink)


def _apply_best(u: np.ndarray, z: int, r: int) -> tuple[float, np.ndarray]:
    gap, moved = _best_move(u, z, r)
    return (gap, moved) if gap < abs(r) else (abs(r), u)


def _single_moves(u: np.ndarray, z: int, r: int, count: int) -> list[np.ndarray]:
    """The ``count`` single-coordinate moves whose change is closest to r (either direction)."""
    up, down = _steps(u, z)
    order_up = np.argsort(np.abs(r - up), kind="stable")[:count]
    order_down = np.argsort(np.abs(r - down), kind="stable")[:count]
    return [_moved(u, (int(i),), ()) for i in order_up if np.isfinite(up[i])] + \
           [_moved(u, (), (int(i),)) for i in order_down if np.isfinite(down[i])]


def _finish(u: np.ndarray, z: int, target: int) -> np.ndarray:
    """``_four_squares``; when the total has a large power of 4 (then every solution is a multiple of a
    power of 2, far from a, b, c, d), first grow the 5th, 6th, … smallest coordinate by one."""
    order = np.argsort(np.abs(u), kind="stable")
    for k in range(4, min(u.size, 16)):
        w = u if k == 4 else _moved(u, (int(order[k]),), ())
        try:
            return _four_squares(w, z, target - int(np.dot(w, w)))
        except TemplateError:
            continue
    raise TemplateError(f"could not reach the exact squared norm ζ² = {target} (ℓ = {u.size})")


def _four_squares(u: np.ndarray, z: int, r: int, windows=(8, 32, 96)) -> np.ndarray:
    """u with its four smallest-magnitude coordinates a, b, c, d (when r < 0: the four smallest non-zero ones,
    else three zeros and the smallest non-zero one) replaced by a′, b′, c′ within ±W of a, b, c and
    d′ = √(a² + b² + c² + d² + r − a′² − b′² − c′²), the closest such solution (searched in numpy)."""
    order = np.argsort(np.abs(u), kind="stable")
    if u.size < 4:
        raise TemplateError("an exact-norm template needs at least 4 coordinates")
    candidates = [order[:4]]
    if r < 0:  # the total must shrink: take the smallest non-zero coordinates, or one of them and 3 zeros
        nonzero, zero = order[np.abs(u[order]) > 0], order[u[order] == 0]
        candidates = [nonzero[:4]] + ([np.concatenate([zero[:3], nonzero[:1]])] if zero.size >= 3 else [])
    for idx in candidates:
        if idx.size == 4:
            found = _four_squares_at(u, z, r, idx, windows)
            if found is not None:
                return found
    raise TemplateError(f"could not reach the exact squared norm ζ² = {z * z} (ℓ = {u.size})")


def _four_squares_at(u: np.ndarray, z: int, r: int, idx: np.ndarray, windows) -> np.ndarray | None:
    a, b, c, d = (int(abs(u[i])) for i in idx)
    total = a * a + b * b + c * c + d * d + r
    for w in windows:
        off = np.arange(-w, w + 1)
        A, B, C = (np.abs(x + off) for x in (a, b, c))
        rest = total - (A[:, None, None] ** 2 + B[None, :, None] ** 2 + C[None, None, :] ** 2)
        rest = np.where(rest >= 0, rest, -1)
        D = np.rint(np.sqrt(np.maximum(rest, 0))).astype(np.int64)
        ok = (D * D == rest) & (np.maximum(np.maximum(A[:, None, None], B[None, :, None]),
                                           np.maximum(C[None, None, :], D)) <= z)
        if ok.any():
            cost = np.abs(off)[:, None, None] + np.abs(off)[None, :, None] + np.abs(off)[None, None, :] + np.abs(D - d)
            i, j, k = np.unravel_index(np.argmin(np.where(ok, cost, np.iinfo(np.int64).max)), ok.shape)
            out = u.copy()
            for pos, value in zip(idx, (A[i], B[j], C[k], D[i, j, k])):
                out[pos] = value if u[pos] >= 0 else -value
            return out
    return None
