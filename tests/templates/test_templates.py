"""Tests for privface.templates: quantisation, bit bounds, LSSC binarisation, ternary transform."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from privface.errors import TemplateError
from privface.templates import (
    CRYPTOMASK_PRECISIONS,
    IDFACE_ALPHA,
    IDFACE_EPSILON,
    Bounds,
    almost_isometric_transform,
    bits_needed,
    dequantize,
    equal_frequency_edges,
    hamming,
    lssc_binarize,
    lssc_decode,
    lssc_encode,
    max_inner_product,
    max_squared_distance,
    plaintext_bits,
    quantize,
    scale_for_precision,
    segment_index,
    split_signs,
    ternary_inner_product,
    ternary_unit,
    unit_normalize,
)

FAST = settings(max_examples=60, deadline=None)

unit_coords = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False)


def vectors(elements=unit_coords, min_d: int = 1, max_d: int = 32):
    return hnp.arrays(np.float64, st.integers(min_d, max_d), elements=elements)


def batches(elements=unit_coords, max_rows: int = 5, max_d: int = 32):
    shape = st.tuples(st.integers(1, max_rows), st.integers(1, max_d))
    return hnp.arrays(np.float64, shape, elements=elements)


BAD_ARRAYS = [
    pytest.param(1.0, id="scalar"),
    pytest.param(np.zeros((2, 2, 2)), id="3-D"),
    pytest.param(np.zeros((0,)), id="empty"),
    pytest.param([0.1, np.nan], id="nan"),
    pytest.param([0.1, np.inf], id="inf"),
    pytest.param(["a", "b"], id="strings"),
    pytest.param([1 + 2j], id="complex"),
]


# ---------------------------------------------------------------- quantize (seed 000, seed 001)


def test_quantize_im2020_edge_values():
    x = [1.0, -1.0, 0.0, -0.0, 0.5, 1 / 256, -1 / 256, 0.999, -0.999]
    q = quantize(x)
    assert q.dtype == np.int64
    assert q.tolist() == [128, -128, 0, 0, 64, 0, -1, 127, -128]


def test_rounding_modes_differ_on_negatives_and_halves():
    x = np.array([-0.001, 0.001, 0.5 / 128, -0.5 / 128, 1.5 / 128])
    assert quantize(x, mode="floor").tolist() == [-1, 0, 0, -1, 1]
    assert quantize(x, mode="trunc").tolist() == [0, 0, 0, 0, 1]
    assert quantize(x, mode="round").tolist() == [0, 0, 1, -1, 2]


@FAST
@given(vectors())
def test_floor_quantize_rounds_down_and_stays_in_range(x):
    q = quantize(x)
    assert np.all(q <= 128 * x) and np.all(128 * x < q + 1)
    assert np.all((-128 <= q) & (q <= 128))
    back = dequantize(q)
    assert np.all(back <= x) and np.all(x - back <= 1 / 128)


@FAST
@given(vectors(), st.sampled_from(CRYPTOMASK_PRECISIONS))
def test_round_quantize_error_is_half_a_precision_step(x, p):
    s = scale_for_precision(p)
    err = np.abs(dequantize(quantize(x, s, mode="round"), s) - x)
    assert np.all(err <= p / 2 + 1e-12)


@FAST
@given(batches())
def test_batches_quantize_row_by_row(xb):
    q = quantize(xb, 400, "round")
    assert q.shape == xb.shape
    for row, qrow in zip(xb, q):
        assert np.array_equal(quantize(row, 400, "round"), qrow)


def test_scale_for_precision_matches_cryptomask_table_2():
    assert [scale_for_precision(p) for p in CRYPTOMASK_PRECISIONS] == [10.0, 100.0, 400.0, 10000.0]
    assert scale_for_precision(1 / 128) == 128.0


@pytest.mark.parametrize("p", [0, -0.1, float("nan"), float("inf"), "0.1", True])
def test_scale_for_precision_rejects_bad_precision(p):
    with pytest.raises(TemplateError):
        scale_for_precision(p)


@FAST
@given(batches(st.floats(-1e3, 1e3, allow_nan=False)))
def test_unit_normalize_gives_unit_rows(xb):
    assume(np.all(np.linalg.norm(xb, axis=1) > 1e-100))
    assert np.allclose(np.linalg.norm(unit_normalize(xb), axis=1), 1.0)


def test_unit_normalize_rejects_zero_vector():
    with pytest.raises(TemplateError, match="zero vector"):
        unit_normalize([0.0, 0.0])
    with pytest.raises(TemplateError, match="zero vector"):
        unit_normalize([[1.0, 0.0], [0.0, 0.0]])


@pytest.mark.parametrize("bad", BAD_ARRAYS)
def test_float_inputs_are_validated(bad):
    for fn in (quantize, unit_normalize, dequantize, segment_index):
        with pytest.raises(TemplateError):
            fn(bad)
    with pytest.raises(TemplateError):
        almost_isometric_transform(bad, 1)


@pytest.mark.parametrize("kwargs", [
    {"scale": 0}, {"scale": -128}, {"scale": float("nan")}, {"scale": True}, {"mode": "ceil"},
    {"scale": 1e300},
])
def test_quantize_rejects_bad_parameters(kwargs):
    with pytest.raises(TemplateError):
        quantize([0.5, -0.5], **kwargs)


def test_dequantize_needs_integers():
    assert dequantize(np.array([128.0, -64.0])).tolist() == [1.0, -0.5]
    assert dequantize(np.array([3], dtype=np.uint8), 4).tolist() == [0.75]
    with pytest.raises(TemplateError, match="integers"):
        dequantize([1.5, 2.0])


# ---------------------------------------------------------------- bits


def test_bounds_for_dlib_128d_times_128():
    assert max_squared_distance(128, 128) == 128 * 256**2 == 2**23
    assert max_inner_product(128, 128) == 128 * 128**2 == 2**21
    assert plaintext_bits(128, 128, "sed") == 24
    assert plaintext_bits(128, 128, "sed", signed=True) == 25
    assert plaintext_bits(128, 128, "ip") == 23
    # ternary IDFace templates: the separated inner products of §4.2 lie in [0, α]
    assert Bounds(IDFACE_ALPHA, 0, 1).inner_product_range == (0, IDFACE_ALPHA)
    assert Bounds(IDFACE_ALPHA, 0, 1).plaintext_bits("ip") == 9


def test_bits_needed_examples():
    assert [bits_needed(v) for v in (0, 1, 2, 3, 255, 256, 2**23)] == [1, 1, 2, 2, 8, 9, 24]
    assert [bits_needed(v, signed=True) for v in (0, 1, 127, 128)] == [2, 2, 8, 9]


@FAST
@given(st.integers(0, 2**80), st.booleans())
def test_bits_needed_is_minimal(v, signed):
    b = bits_needed(v, signed)
    if signed:
        assert -(2 ** (b - 1)) <= -v and v <= 2 ** (b - 1) - 1
        assert b == 2 or v > 2 ** (b - 2) - 1
    else:
        assert v < 2**b
        assert b == 1 or v >= 2 ** (b - 1)


def test_from_bits_ranges():
    assert Bounds.from_bits(4, 8) == Bounds(4, -128, 127)
    assert Bounds.from_bits(4, 8, signed=False) == Bounds(4, 0, 255)
    assert Bounds.from_bits(4, 8, signed=False).max_squared_distance == 4 * 255**2
    assert Bounds.from_bits(4, 8).max_inner_product == 4 * 128**2


@st.composite
def bounds_and_pair(draw):
    lo = draw(st.integers(-(2**15), 2**15))
    hi = draw(st.integers(lo, 2**15))
    d = draw(st.integers(1, 16))
    coords = st.integers(lo, hi)
    v = draw(st.lists(coords, min_size=d, max_size=d))
    u = draw(st.lists(coords, min_size=d, max_size=d))
    return Bounds(d, lo, hi), np.array(v, np.int64), np.array(u, np.int64)


@FAST
@given(bounds_and_pair())
def test_bounds_are_attained_and_never_exceeded(case):
    b, v, u = case
    sed, ip = int(np.sum((v - u) ** 2)), int(v @ u)
    low, high = b.inner_product_range
    assert 0 <= sed <= b.max_squared_distance and low <= ip <= high
    assert abs(ip) <= b.max_inner_product
    assert sed < 2 ** b.plaintext_bits("sed")
    ip_bits = b.plaintext_bits("ip")
    assert (-(2 ** (ip_bits - 1)) <= ip < 2 ** (ip_bits - 1)) if low < 0 else (0 <= ip < 2**ip_bits)
    # extreme pairs: constant vectors at the corners of the box reach every bound
    top, bottom = np.full(b.d, b.hi), np.full(b.d, b.lo)
    assert int(np.sum((top - bottom) ** 2)) == b.max_squared_distance
    corner_ips = {int(p @ q) for p in (top, bottom) for q in (top, bottom)}
    assert min(corner_ips) == low and max(corner_ips) == high
    assert max(abs(c) for c in corner_ips) == b.max_inner_product


@FAST
@given(st.integers(1, 64), st.integers(0, 2**20))
def test_symmetric_helpers_match_extreme_pair(d, m):
    v, u = np.full(d, m, dtype=object), np.full(d, -m, dtype=object)
    assert np.sum((v - u) ** 2) == max_squared_distance(d, m)
    assert v @ v == max_inner_product(d, m) == -(v @ u)


@FAST
@given(batches(max_rows=2, max_d=128).filter(lambda a: np.all(np.linalg.norm(a, axis=1) > 1e-3)))
def test_quantized_unit_vectors_fit_the_bound(xb):
    q = quantize(unit_normalize(xb))
    d = xb.shape[1]
    assert np.sum((q[0] - q[-1]) ** 2) <= max_squared_distance(d, 128)
    assert abs(int(q[0] @ q[-1])) <= max_inner_product(d, 128)


@pytest.mark.parametrize("call", [
    lambda: bits_needed(-1),
    lambda: bits_needed(1.5),
    lambda: bits_needed(True),
    lambda: Bounds(0, -1, 1),
    lambda: Bounds(3, 2, 1),
    lambda: Bounds(3, 0.5, 1),
    lambda: Bounds.symmetric(3, -1),
    lambda: Bounds.from_bits(3, 1, signed=True),
    lambda: plaintext_bits(3, 4, op="l1"),
    lambda: plaintext_bits(3, 4, op="ip", signed=False),
])
def test_bits_reject_bad_input(call):
    with pytest.raises(TemplateError):
        call()


# ---------------------------------------------------------------- LSSC (seed 002 §2.1)


def test_lssc_codewords_for_four_segments():
    codes = lssc_encode([0, 1, 2, 3]).reshape(4, 3)
    assert codes.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 1], [1, 1, 1]]
    assert codes.dtype == np.uint8


def test_segment_index_boundaries():
    x = [-1.0, -0.75, -0.5, -0.0001, 0.0, 0.4999, 0.5, 1.0]
    assert segment_index(x).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert lssc_binarize(x).shape == (len(x) * 3,)


@FAST
@given(st.integers(2, 9).flatmap(lambda s: st.tuples(
    st.just(s),
    hnp.arrays(np.int64, st.tuples(st.integers(1, 4), st.integers(1, 20)), elements=st.integers(0, s - 1)),
    st.data(),
)))
def test_hamming_of_lssc_equals_l1_of_indices(case):
    s, i, data = case
    j = data.draw(hnp.arrays(np.int64, i.shape, elements=st.integers(0, s - 1)))
    ci, cj = lssc_encode(i, s), lssc_encode(j, s)
    assert ci.shape == (i.shape[0], i.shape[1] * (s - 1))
    assert np.array_equal(hamming(ci, cj), np.abs(i - j).sum(axis=1))
    assert np.array_equal(lssc_decode(ci, s), i)


@FAST
@given(batches(max_rows=1).flatmap(lambda a: st.tuples(st.just(a[0]), vectors(min_d=a.shape[1], max_d=a.shape[1]))))
def test_lssc_hamming_is_l1_of_integer_templates(xy):
    x, y = xy
    # Hamming of binary templates = L1 of integer templates (seed 002 §2.1)
    assert hamming(lssc_binarize(x), lssc_binarize(y)) == np.abs(segment_index(x) - segment_index(y)).sum()


@FAST
@given(st.lists(unit_coords, min_size=3, max_size=3).map(sorted))
def test_farther_values_are_never_closer_in_hamming(abc):
    a, b, c = ([v] for v in abc)
    assert hamming(lssc_binarize(a), lssc_binarize(c)) >= hamming(lssc_binarize(a), lssc_binarize(b))
    assert hamming(lssc_binarize(a), lssc_binarize(c)) >= hamming(lssc_binarize(b), lssc_binarize(c))


def test_adjacent_segments_differ_in_one_bit():
    for s in range(2, 10):
        codes = lssc_encode(np.arange(s), s).reshape(s, s - 1)
        assert np.all(np.count_nonzero(np.diff(codes, axis=0), axis=1) == 1)


def test_lssc_on_quantized_templates():
    q = quantize([-1.0, -0.3, 0.3, 1.0])
    assert segment_index(q, low=-128, high=128).tolist() == [0, 1, 2, 3]


def test_lssc_range_handling_and_edges():
    with pytest.raises(TemplateError, match="outside"):
        segment_index([1.5])
    assert segment_index([1.5, -7.0], clip=True).tolist() == [3, 0]
    assert segment_index([-7.0, 0.05, 7.0], edges=[-0.1, 0.0, 0.1]).tolist() == [0, 2, 3]
    samples = np.random.default_rng(0).normal(0, 0.05, 4000)
    counts = np.bincount(segment_index(samples, edges=equal_frequency_edges(samples)), minlength=4)
    assert counts.tolist() == [1000] * 4


@pytest.mark.parametrize("call", [
    lambda: segment_index([0.0], segments=1),
    lambda: segment_index([0.0], low=1.0, high=-1.0),
    lambda: segment_index([0.0], edges=[0.2, 0.1, 0.3]),
    lambda: segment_index([0.0], edges=[0.1, 0.2]),
    lambda: lssc_encode([4]),
    lambda: lssc_encode([-1]),
    lambda: lssc_encode([0.5]),
    lambda: lssc_decode([1, 0, 0]),
    lambda: lssc_decode([0, 1]),
    lambda: hamming([0, 1, 2], [0, 1, 1]),
    lambda: hamming([0, 1], [0, 1, 1]),
    lambda: hamming([[0, 1]] * 2, [[0, 1]] * 3),
    lambda: equal_frequency_edges(np.zeros(10)),
])
def test_lssc_rejects_bad_input(call):
    with pytest.raises(TemplateError):
        call()


def test_hamming_accepts_bool_and_batches():
    a = np.array([[True, False, True], [False, False, False]])
    assert hamming(a, [1, 1, 1]).tolist() == [1, 3]
    assert hamming([1, 0], [1, 0]) == 0


# ---------------------------------------------------------------- ternary (seed 003 §4.1, §4.2)


nonzero_rows = batches(st.floats(-1e6, 1e6, allow_nan=False), max_rows=4, max_d=40).filter(
    lambda a: np.all(np.any(a != 0, axis=1))
)


@FAST
@given(nonzero_rows, st.data())
def test_transform_keeps_top_alpha_signs(xb, data):
    d = xb.shape[1]
    alpha = data.draw(st.integers(1, d))
    t = almost_isometric_transform(xb, alpha)
    assert t.dtype == np.int8 and t.shape == xb.shape
    assert set(np.unique(t)) <= {-1, 0, 1}
    assert np.all(np.count_nonzero(t, axis=1) == alpha)
    nz = (t != 0) & (xb != 0)
    assert np.array_equal(t[nz], np.sign(xb[nz]).astype(np.int8))
    for row, trow in zip(np.abs(xb), t):
        kept, dropped = row[trow != 0], row[trow == 0]
        assert dropped.size == 0 or kept.min() >= dropped.max()
    assert np.array_equal(almost_isometric_transform(3.5 * xb, alpha), t)  # scale invariant
    assert np.array_equal(almost_isometric_transform(xb[0], alpha), t[0])


@FAST
@given(nonzero_rows, st.data())
def test_split_and_inner_product(xb, data):
    d = xb.shape[1]
    alpha = data.draw(st.integers(1, d))
    t = almost_isometric_transform(xb, alpha)
    plus, minus = split_signs(t)
    assert np.array_equal(plus.astype(int) - minus, t) and not np.any(plus & minus)
    y = t[0]
    ip = ternary_inner_product(t, y)
    assert np.array_equal(ip, t.astype(int) @ y)
    assert ip[0] == alpha and np.all(np.abs(ip) <= alpha)
    assert np.allclose(ternary_unit(t) @ ternary_unit(y), ip / alpha)
    assert np.allclose(np.linalg.norm(ternary_unit(t), axis=1), 1.0)


def test_transform_edge_cases():
    assert almost_isometric_transform([0.5, -2.0, 0.1], 3).tolist() == [1, -1, 1]
    assert almost_isometric_transform([0.5, -2.0, 0.1], 1).tolist() == [0, -1, 0]
    # ties go to the lower index; a selected zero becomes +1 so there are still α nonzeros
    assert almost_isometric_transform([1.0, -1.0, 1.0], 2).tolist() == [1, -1, 0]
    assert almost_isometric_transform([0.0, 3.0, 0.0], 2).tolist() == [1, 1, 0]


def _pairs_at_angle(rng, n: int, d: int, theta: float):
    """x, x' uniform on S^{d-1} with ⟨x, x'⟩ = cos θ, as in seed 003 Definition 2."""
    x = unit_normalize(rng.standard_normal((n, d)))
    u = rng.standard_normal((n, d))
    u = unit_normalize(u - np.sum(u * x, axis=1, keepdims=True) * x)
    return x, np.cos(theta) * x + np.sin(theta) * u


def test_almost_isometry_for_d512_alpha341():
    """Seed 003 Proposition 1: T_341 on S^511 is a (0.111, o(1), θ)-isometry for all θ ∈ (0, π)."""
    rng = np.random.default_rng(2024)
    worst_bias = {}
    for alpha in (128, IDFACE_ALPHA, 512):
        biases, tails = [], []
        for theta in np.linspace(0.1, np.pi - 0.1, 12):
            x, y = _pairs_at_angle(rng, 300, 512, theta)
            tx, ty = almost_isometric_transform(x, alpha), almost_isometric_transform(y, alpha)
            ip = np.einsum("ij,ij->i", tx.astype(np.int64), ty) / alpha
            biases.append(abs(ip.mean() - np.cos(theta)))
            tails.append(np.quantile(np.abs(ip - np.cos(theta)), 0.99))
        worst_bias[alpha] = max(biases)
        if alpha == IDFACE_ALPHA:
            # ε = 0.111 is the systematic deviation; at d = 512 the o(1) part adds sampling noise
            assert max(biases) <= IDFACE_EPSILON + 0.01
            assert max(tails) <= 0.2
    # α = 341 minimises ε among the tested α (the paper's reason for choosing it)
    assert worst_bias[IDFACE_ALPHA] < min(worst_bias[128], worst_bias[512])
    x = unit_normalize(rng.standard_normal(512))
    t = almost_isometric_transform(x, IDFACE_ALPHA)
    assert ternary_inner_product(t, t) == IDFACE_ALPHA
    assert ternary_inner_product(t, almost_isometric_transform(-x, IDFACE_ALPHA)) == -IDFACE_ALPHA


@pytest.mark.parametrize("call", [
    lambda: almost_isometric_transform([0.1, 0.2], 3),
    lambda: almost_isometric_transform([0.1, 0.2], 0),
    lambda: almost_isometric_transform([0.1, 0.2], 1.5),
    lambda: almost_isometric_transform([0.0, 0.0], 1),
    lambda: almost_isometric_transform([[0.1, 0.2], [0.0, 0.0]], 1),
    lambda: split_signs([0, 2, -1]),
    lambda: ternary_unit([0, 0, 0]),
    lambda: ternary_unit([0.5, 1, 0]),
    lambda: ternary_inner_product([[1, 0, -1]], [[1, 0, -1]]),
    lambda: ternary_inner_product([1, 0, -1], [1, 0]),
])
def test_ternary_rejects_bad_input(call):
    with pytest.raises(TemplateError):
        call()
