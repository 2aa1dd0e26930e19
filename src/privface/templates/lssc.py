"""Integer and binary templates of Kolberg et al. (seed 002 §2.1), for Hamming distance under NTRU.

§2.1: "the feature space is divided into four segments of equal size. For the integer encoding,
the float values are simply mapped to the corresponding number of their sequence area. [...] the
linearly separable subcode (LSSC) [LT12] transforms each integer value into three binary digits."

* ``segment_index`` is the integer template: each coordinate → its segment number 0 … S−1.
* ``lssc_encode`` is LSSC (Lim & Teoh, TPAMI 2013 [LT12]): with S segments, index k becomes
  S−1 bits, k ones right-aligned (S=4: 0→000, 1→001, 2→011, 3→111). Adjacent segments differ
  in one bit, and the Hamming distance of two codewords is exactly |k − k'|, so the Hamming
  distance of two binary templates is the L1 distance of their integer templates.
"""
from __future__ import annotations

import numpy as np

from ..errors import TemplateError
from .quantize import _float_array, _int_array, _int_param

KOLBERG_SEGMENTS = 4
"""Seed 002 §2.1: four segments, hence three LSSC bits per coordinate."""


def equal_width_edges(segments: int = KOLBERG_SEGMENTS, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """The S−1 inner boundaries splitting [low, high] into S segments of equal width."""
    s = _int_param(segments, "segments", minimum=2)
    lo, hi = float(low), float(high)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise TemplateError(f"need finite low < high, got low={low!r}, high={high!r}")
    return np.linspace(lo, hi, s + 1)[1:-1]


def equal_frequency_edges(samples: object, segments: int = KOLBERG_SEGMENTS) -> np.ndarray:
    """The S−1 inner boundaries putting equally many training values in each segment (quantiles).

    An alternative reading of "segments of equal size" (equal probability mass); fit it on
    training embeddings, never on the templates being compared.
    """
    s = _int_param(segments, "segments", minimum=2)
    edges = np.quantile(_float_array(samples, "samples").ravel(), np.arange(1, s) / s)
    if np.any(np.diff(edges) <= 0):
        raise TemplateError("samples have too few distinct values for strictly increasing edges")
    return edges


def _edges(segments: int, low: float, high: float, edges: object | None) -> np.ndarray:
    if edges is None:
        return equal_width_edges(segments, low, high)
    e = _float_array(edges, "edges")
    if e.ndim != 1 or len(e) != segments - 1:
        raise TemplateError(f"edges must be 1-D with segments−1 = {segments - 1} values, got shape {e.shape}")
    if np.any(np.diff(e) <= 0):
        raise TemplateError("edges must be strictly increasing")
    return e


def segment_index(
    x: object,
    segments: int = KOLBERG_SEGMENTS,
    low: float = -1.0,
    high: float = 1.0,
    edges: object | None = None,
    clip: bool = False,
) -> np.ndarray:
    """Integer template (seed 002 §2.1): the segment number 0 … S−1 of each coordinate, int64.

    Without ``edges``, [low, high] is cut into S equal-width segments; a value outside [low, high]
    raises ``TemplateError`` unless ``clip=True`` puts it in the first/last segment. With explicit
    inner ``edges`` (S−1 increasing values) the outer segments are unbounded. A value on a boundary
    belongs to the upper segment; ``high`` itself belongs to the last one.
    """
    s = _int_param(segments, "segments", minimum=2)
    arr = _float_array(x)
    e = _edges(s, low, high, edges)
    if edges is None and not clip and (arr.min() < low or arr.max() > high):
        raise TemplateError(
            f"template values in [{arr.min():g}, {arr.max():g}] fall outside [{low:g}, {high:g}];"
            " widen low/high or pass clip=True"
        )
    return np.searchsorted(e, arr, side="right").astype(np.int64)


def lssc_encode(indices: object, segments: int = KOLBERG_SEGMENTS) -> np.ndarray:
    """LSSC codewords of segment indices: shape (..., d) → uint8 0/1 of shape (..., d·(S−1)).

    Bits j·(S−1) … (j+1)·(S−1)−1 encode coordinate j.
    """
    s = _int_param(segments, "segments", minimum=2)
    k = _int_array(indices, "segment indices")
    if k.min() < 0 or k.max() > s - 1:
        raise TemplateError(f"segment indices must lie in [0, {s - 1}], got [{k.min()}, {k.max()}]")
    # bit position p (0 = leftmost) of codeword k is 1 iff p ≥ (S−1) − k
    positions = np.arange(s - 1)
    bits = positions >= (s - 1 - k)[..., None]
    return bits.reshape(*k.shape[:-1], -1).astype(np.uint8)


def lssc_decode(bits: object, segments: int = KOLBERG_SEGMENTS) -> np.ndarray:
    """Segment indices of LSSC codewords (inverse of ``lssc_encode``); rejects non-codewords."""
    s = _int_param(segments, "segments", minimum=2)
    b = _bit_array(bits)
    if b.shape[-1] % (s - 1):
        raise TemplateError(f"bit length {b.shape[-1]} is not a multiple of segments−1 = {s - 1}")
    groups = b.reshape(*b.shape[:-1], -1, s - 1).astype(np.int64)
    if np.any(np.diff(groups, axis=-1) < 0):
        raise TemplateError("not an LSSC code: a codeword has a 1 before a 0")
    return groups.sum(axis=-1, dtype=np.int64)


def lssc_binarize(
    x: object,
    segments: int = KOLBERG_SEGMENTS,
    low: float = -1.0,
    high: float = 1.0,
    edges: object | None = None,
    clip: bool = False,
) -> np.ndarray:
    """Binary template (seed 002 §2.1): ``lssc_encode(segment_index(x, ...))``, d·(S−1) bits."""
    return lssc_encode(segment_index(x, segments, low, high, edges, clip), segments)


def _bit_array(x: object, name: str = "binary template") -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    b = _int_array(arr, name)
    if b.min() < 0 or b.max() > 1:
        raise TemplateError(f"{name} must hold only 0 and 1")
    return b.astype(np.uint8)


def hamming(a: object, b: object) -> int | np.ndarray:
    """Number of differing bits (seed 002 §2.2: what NTRU computes as XOR); per row for batches."""
    x, y = _bit_array(a), _bit_array(b)
    if x.shape[-1] != y.shape[-1]:
        raise TemplateError(f"binary templates differ in length: {x.shape[-1]} vs {y.shape[-1]}")
    if x.ndim == 2 and y.ndim == 2 and x.shape[0] != y.shape[0]:
        raise TemplateError(f"batches differ in size: {x.shape[0]} vs {y.shape[0]} rows")
    dist = np.count_nonzero(x != y, axis=-1)
    return int(dist) if np.ndim(dist) == 0 else dist.astype(np.int64)
