"""Templates for homomorphic encryption: float embeddings → integer, binary (LSSC) and ternary vectors."""
from .bits import Bounds, bits_needed, max_inner_product, max_squared_distance, plaintext_bits
from .lssc import (
    KOLBERG_SEGMENTS,
    equal_frequency_edges,
    equal_width_edges,
    hamming,
    lssc_binarize,
    lssc_decode,
    lssc_encode,
    segment_index,
)
from .quantize import (
    CRYPTOMASK_PRECISIONS,
    IM2020_SCALE,
    dequantize,
    quantize,
    scale_for_precision,
    unit_normalize,
)
from .ternary import (
    IDFACE_ALPHA,
    IDFACE_EPSILON,
    almost_isometric_transform,
    split_signs,
    ternary_inner_product,
    ternary_unit,
)

__all__ = [
    "Bounds",
    "CRYPTOMASK_PRECISIONS",
    "IDFACE_ALPHA",
    "IDFACE_EPSILON",
    "IM2020_SCALE",
    "KOLBERG_SEGMENTS",
    "almost_isometric_transform",
    "bits_needed",
    "dequantize",
    "equal_frequency_edges",
    "equal_width_edges",
    "hamming",
    "lssc_binarize",
    "lssc_decode",
    "lssc_encode",
    "max_inner_product",
    "max_squared_distance",
    "plaintext_bits",
    "quantize",
    "scale_for_precision",
    "segment_index",
    "split_signs",
    "ternary_inner_product",
    "ternary_unit",
    "unit_normalize",
]
