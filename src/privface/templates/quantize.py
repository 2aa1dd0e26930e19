"""Float embeddings → integer templates, the plaintext space of the integer HE schemes.

Im et al. (seed 000, §IV-B.2 "Registration Phase"): "we multiply each element of the feature
vector by 128 and cast it into an integer by rounding down" — ``quantize(x)`` with its defaults.
Bai et al., CryptoMask (seed 001, §3.4 "Data Representation" and Table 2, App. B): features are
scaled "using a specified precision" p ∈ {0.1, 0.01, 0.0025, 0.0001}, i.e. scale = 1/p —
``quantize(x, scale_for_precision(p))``.

Every function takes one template (1-D) or a batch of templates as the rows of a 2-D array.
"""
from __future__ import annotations

import math
import numbers
from typing import Literal

import numpy as np

from ..errors import TemplateError

Rounding = Literal["floor", "round", "trunc"]

IM2020_SCALE = 128
"""Seed 000 §IV-B.2: each element is multiplied by 128."""

CRYPTOMASK_PRECISIONS = (0.1, 0.01, 0.0025, 0.0001)
"""Seed 001 Table 2: the four precisions evaluated on LFW/FaceNet."""

_INT64_LIMIT = 2.0**63


def _float_array(x: object, name: str = "template") -> np.ndarray:
    """``x`` as a finite, non-empty float64 array with 1 (one template) or 2 (rows) dimensions."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TemplateError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise TemplateError(
            f"{name} must be 1-D (one template) or 2-D (one template per row), got shape {arr.shape}"
        )
    if arr.size == 0:
        raise TemplateError(f"{name} is empty (shape {arr.shape})")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise TemplateError(f"{name} contains NaN or infinite values")
    return arr


def _int_array(x: object, name: str = "template") -> np.ndarray:
    """``x`` as a non-empty int64 array with 1 or 2 dimensions; floats must hold whole numbers."""
    arr = np.asarray(x)
    if arr.dtype.kind in "iu":
        if arr.ndim not in (1, 2):
            raise TemplateError(
                f"{name} must be 1-D (one template) or 2-D (one template per row), got shape {arr.shape}"
            )
        if arr.size == 0:
            raise TemplateError(f"{name} is empty (shape {arr.shape})")
        if arr.dtype == np.uint64 and int(arr.max()) >= 2**63:
            raise TemplateError(f"{name} has values beyond the int64 range")
        return arr.astype(np.int64)
    f = _float_array(arr, name)
    if not np.all(f == np.floor(f)):
        raise TemplateError(f"{name} must hold integers, got non-integer values")
    if np.abs(f).max() >= _INT64_LIMIT:
        raise TemplateError(f"{name} has values beyond the int64 range")
    return f.astype(np.int64)


def _int_param(value: object, name: str, minimum: int | None = None) -> int:
    """A scalar integer parameter (bools and non-whole floats rejected), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, numbers.Real)):
        raise TemplateError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, numbers.Integral):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise TemplateError(f"{name} must be an integer, got {value!r}")
    out = int(value)  # type: ignore[call-overload]  # a whole Real (checked above)
    if minimum is not None and out < minimum:
        raise TemplateError(f"{name} must be ≥ {minimum}, got {out}")
    return out


def _scale(scale: object) -> float:
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TemplateError(f"scale must be a positive number, got {scale!r}")
    s = float(scale)
    if not (math.isfinite(s) and s > 0):
        raise TemplateError(f"scale must be a positive finite number, got {scale!r}")
    return s


def unit_normalize(x: object) -> np.ndarray:
    """L2-normalise one template or every row, so inner product = cosine similarity.

    Seed 001 (§4.1) and seed 003 (§4.1) compare templates on the unit hypersphere S^{d-1}.
    A zero vector has no direction and raises ``TemplateError``.
    """
    arr = _float_array(x)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise TemplateError("cannot L2-normalise a zero vector")
    return arr / norms


def scale_for_precision(precision: float) -> float:
    """Scale factor for a CryptoMask precision p (seed 001 Table 2): scale = 1/p, e.g. 0.0025 → 400."""
    if isinstance(precision, bool) or not isinstance(precision, numbers.Real):
        raise TemplateError(f"precision must be a positive number, got {precision!r}")
    p = float(precision)
    if not (math.isfinite(p) and p > 0):
        raise TemplateError(f"precision must be a positive finite number, got {precision!r}")
    s = 1.0 / p
    # 1/p of a decimal precision is meant to be a whole number; drop the float noise.
    return float(round(s)) if abs(s - round(s)) <= 1e-9 * s else s


def quantize(x: object, scale: float = IM2020_SCALE, mode: Rounding = "floor") -> np.ndarray:
    """Integer template ⌊scale·x⌋ (seed 000 §IV-B.2), as int64 with the shape of ``x``.

    mode: "floor" — round down, as the paper states (default); "round" — nearest integer, halves
    away from zero; "trunc" — toward zero (what a C cast does; differs from "floor" for negatives).
    """
    arr = _float_array(x)
    s = _scale(scale)
    y = arr * s  # exact for power-of-two scales such as 128
    if mode == "floor":
        q = np.floor(y)
    elif mode == "round":
        q = np.sign(y) * np.floor(np.abs(y) + 0.5)
    elif mode == "trunc":
        q = np.trunc(y)
    else:
        raise TemplateError(f"mode must be 'floor', 'round' or 'trunc', got {mode!r}")
    if np.abs(q).max() >= _INT64_LIMIT:
        raise TemplateError(f"scale·x overflows int64 (scale={s}, max |x|={np.abs(arr).max()})")
    return q.astype(np.int64)


def dequantize(q: object, scale: float = IM2020_SCALE) -> np.ndarray:
    """Float view q/scale of an integer template; inverts ``quantize`` up to 1/scale."""
    return _int_array(q, "quantized template") / _scale(scale)
