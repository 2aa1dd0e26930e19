"""IDFace's almost-isometric transformation T_α (seed 003 §4.1) and ternary inner products (§4.2).

§4.1: "given a template, the transformation T_α with a parameter α first takes the top α
components with larger absolute values. Then, those components are replaced with either 1 or −1
according to their signs, and the other components are set to 0." The image is
Z_α ⊂ {−1, 0, 1}^d (exactly α nonzeros); the footnote's final normalisation is the factor
1/√α, which makes T_α(x) a unit vector again. Proposition 1: for d = 512 and α = 341, T_α is a
(0.111, o(1), θ)-isometry for every θ ∈ (0, π) (Definition 2): for x, x' on S^{d−1} with
⟨x, x'⟩ = cos θ, |⟨T_α(x), T_α(x')⟩ − cos θ| < 0.111 except with probability δ = o(1).

§4.2: a ternary x splits into binary x⁺, x⁻ with x = x⁺ − x⁻, and
⟨x, y⟩ = ⟨x⁺, y⁺⟩ + ⟨x⁻, y⁻⟩ − ⟨x⁺, y⁻⟩ − ⟨x⁻, y⁺⟩, each term in [0, α].
"""
from __future__ import annotations

import numpy as np

from ..errors import TemplateError
from .quantize import _float_array, _int_array, _int_param

IDFACE_ALPHA = 341
"""Seed 003 §4.1, Proposition 1: the α that minimises ε for d = 512."""

IDFACE_EPSILON = 0.111
"""Seed 003 Proposition 1: the ε of the (ε, δ, θ)-isometry for d = 512, α = 341."""


def almost_isometric_transform(x: object, alpha: int) -> np.ndarray:
    """T_α(x) as an int8 vector in {−1, 0, 1}^d (or one per row), unnormalised (seed 003 §4.1).

    The α coordinates of largest |x_i| keep their sign as ±1, the rest become 0. Ties in |x_i|
    go to the lower index; a selected coordinate equal to 0 becomes +1, so there are always
    exactly α nonzeros. T_α only depends on ranks and signs, so x need not be unit length, but
    it must not be the zero vector. ``ternary_unit`` gives the normalised view T_α(x)/√α.
    """
    arr = _float_array(x)
    d = arr.shape[-1]
    a = _int_param(alpha, "alpha", minimum=1)
    if a > d:
        raise TemplateError(f"alpha must be at most the dimension d={d}, got {a}")
    if np.any(np.all(arr == 0, axis=-1)):
        raise TemplateError("cannot transform a zero vector: it has no largest components")
    rows = np.atleast_2d(arr)
    top = np.argsort(-np.abs(rows), axis=-1, kind="stable")[:, :a]
    picked = np.take_along_axis(rows, top, axis=-1)
    out = np.zeros(rows.shape, dtype=np.int8)
    np.put_along_axis(out, top, np.where(picked >= 0, 1, -1).astype(np.int8), axis=-1)
    return out.reshape(arr.shape)


def _ternary_array(t: object, name: str = "ternary template") -> np.ndarray:
    arr = _int_array(t, name)
    if arr.min() < -1 or arr.max() > 1:
        raise TemplateError(f"{name} must hold only −1, 0 and 1")
    return arr


def ternary_unit(t: object) -> np.ndarray:
    """The normalised float view T_α(x)/√α on S^{d−1} (seed 003 §4.1 footnote)."""
    arr = _ternary_array(t)
    alpha = np.count_nonzero(arr, axis=-1, keepdims=True)
    if np.any(alpha == 0):
        raise TemplateError("a ternary template with no nonzero entry cannot be normalised")
    return arr / np.sqrt(alpha)


def split_signs(t: object) -> tuple[np.ndarray, np.ndarray]:
    """The separation (x⁺, x⁻) of seed 003 §4.2: binary uint8 arrays with x = x⁺ − x⁻."""
    arr = _ternary_array(t)
    return (arr > 0).astype(np.uint8), (arr < 0).astype(np.uint8)


def ternary_inner_product(x: object, y: object) -> int | np.ndarray:
    """⟨x, y⟩ of ternary templates via the separation of seed 003 §4.2, as an integer in [−α, α].

    x is one template or a database with one template per row; y is one query (1-D). With the
    normalised view, ⟨T_α(x)/√α, T_α(y)/√α⟩ = ``ternary_inner_product`` / α.
    """
    xp, xm = (s.astype(np.int64) for s in split_signs(x))
    yp, ym = (s.astype(np.int64) for s in split_signs(y))
    if yp.ndim != 1:
        raise TemplateError(f"the query y must be one 1-D template, got shape {yp.shape}")
    if xp.shape[-1] != yp.shape[-1]:
        raise TemplateError(f"dimension mismatch: {xp.shape[-1]} vs {yp.shape[-1]}")
    # ct⁺ − ct⁻ of §4.3: same-sign terms minus opposite-sign terms
    ip = (xp @ yp + xm @ ym) - (xp @ ym + xm @ yp)
    return int(ip) if np.ndim(ip) == 0 else ip
