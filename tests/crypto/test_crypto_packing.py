"""GSM packing (seed 004 §4, Fig. 2): layouts, encode/decode round trips, products through Mult/Add₂/Mask,
the parameter solver, the compact ternary layout, and a packed inner product under (toy) Paillier."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto import packing as pk
from privface.crypto.paillier import generate_paillier_keypair
from privface.errors import CryptoError

FAST = settings(max_examples=40, deadline=None)


@pytest.mark.parametrize("layout, n", [("gsm", 16), ("ternary", 64)])
def test_layout_positions_have_no_three_term_progression(layout, n):
    """Block 2t_i of u*·v* holds u_i·v_i alone iff no t_a + t_b = 2t_i with a ≠ b (module docstring)."""
    pos = pk.positions(layout, n)
    assert len(set(pos)) == n and list(pos) == sorted(pos)
    sums = {}
    for a in range(n):
        for b in range(n):
            sums.setdefault(pos[a] + pos[b], set()).add(frozenset((a, b)))
    for i, t in enumerate(pos):
        assert sums[2 * t] == {frozenset((i,))}


def test_positions_and_terms_per_block():
    assert pk.positions("gsm", 5) == (0, 1, 3, 7, 15)
    assert pk.positions("ternary", 9) == (0, 1, 3, 4, 9, 10, 12, 13, 27)
    assert pk.max_terms_per_block(pk.positions("gsm", 8)) == 2
    assert pk.max_terms_per_block(pk.positions("ternary", 8)) == 8
    assert pk.positions("ternary", 64)[-1] < 64 ** math.log2(3)
    with pytest.raises(CryptoError, match="unknown packing layout"):
        pk.positions("dense", 3)


def params_strategy():
    return st.builds(lambda m, lam, ell, layout, L: pk.solve(m, L, lam, ell, layout=layout),
                     st.integers(1, 24), st.integers(8, 64), st.integers(1, 300),
                     st.sampled_from(pk.LAYOUTS), st.sampled_from([1024, 2048, 3072]))


def vectors(params, size=None):
    top = 2**params.m - 1
    return st.lists(st.one_of(st.sampled_from([0, top]), st.integers(0, top)),
                    min_size=size or 0, max_size=size or params.n)


@FAST
@given(data=st.data())
def test_encode_decode_round_trips(data):
    params = data.draw(params_strategy())
    u = data.draw(vectors(params))
    padded = u + [0] * (params.n - len(u))
    assert pk.decode1(params, pk.encode1(params, u)) == padded
    assert pk.decode2(params, pk.encode2(params, u)) == padded
    assert pk.decode2(params, pk.mask(params, pk.encode2(params, u))) == padded


@FAST
@given(data=st.data())
def test_inner_product_slots_through_mult_add2_and_mask(data):
    """Σ_chunks Mult(Encode₁(u_c), Encode₁(w_c)), masked, decodes to the slot-wise sums of u_i·w_i."""
    params = data.draw(params_strategy())
    ell = data.draw(st.integers(1, 3 * params.n))
    params = pk.solve(params.m, params.L, params.lam, ell, layout=params.layout)
    top = 2**params.m - 1
    u = data.draw(st.lists(st.one_of(st.just(top), st.integers(0, top)), min_size=ell, max_size=ell))
    w = data.draw(st.lists(st.one_of(st.just(top), st.integers(0, top)), min_size=ell, max_size=ell))
    total = 0
    for a, b in zip(pk.encode1_vector(params, u), pk.encode1_vector(params, w)):
        total = pk.add2(total, pk.mult(a, b))
    slots = [sum(u[i] * w[i] for i in range(j, ell, params.n)) for j in range(params.n)]
    assert pk.decode2(params, pk.mask(params, total)) == slots
    assert sum(slots) == sum(a * b for a, b in zip(u, w))


@FAST
@given(data=st.data())
def test_d_is_exactly_the_largest_block(data):
    """Worst-case inputs fill the fullest block to exactly m + d bits: d is tight, and nothing overflows."""
    params = data.draw(params_strategy())
    ell = data.draw(st.integers(1, 300))
    params = pk.solve(params.m, params.L, params.lam, ell, layout=params.layout)
    t = math.ceil(ell / params.n)  # the solver's default add2: an inner product of ℓ-vectors
    top = [2**params.m - 1] * params.n
    product = pk.mult(pk.encode1(params, top), pk.encode1(params, top))
    total = sum([product] * t)
    blocks = [(total >> (params.k * j)) & ((1 << params.k) - 1) for j in range(params.level2_blocks)]
    assert sum(b << (params.k * j) for j, b in enumerate(blocks)) == total  # no block overflowed
    assert max(blocks).bit_length() == params.m + params.d


def test_mask_randomises_every_block_outside_I_and_keeps_I():
    params = pk.solve(8, 1024, 40, 16, layout="ternary")
    span = 2**params.k - 2 ** (params.m + params.d)
    wanted = set(params.product_positions)
    values = list(range(1, params.n + 1))
    masked = [pk.mask(params, pk.encode2(params, values)) for _ in range(20)]
    for x in masked:
        blocks = [(x >> (params.k * j)) & ((1 << params.k) - 1) for j in range(params.level2_blocks)]
        assert [blocks[j] for j in sorted(wanted)] == values
        assert all(0 <= blocks[j] < span for j in range(params.level2_blocks) if j not in wanted)
    outside = [j for j in range(params.level2_blocks) if j not in wanted]
    for j in outside:  # 20 draws from ≥ 2^40 values: all distinct unless Mask ignores the block
        assert len({(x >> (params.k * j)) & ((1 << params.k) - 1) for x in masked}) == 20


# ---------------------------------------------------------------- solver


def test_solver_matches_seed_004_and_the_ternary_layout_packs_more():
    """m = 16, ℓ = 256, λ = 40: seed 004 §5's rule 2^n·(2m + log n + log t + λ + 2) ≤ L gives n = 4 at 2048
    bits and 5 at 3072; the exact d agrees. The ternary layout fits 7 and 8 values."""
    expected = {("gsm", 2048): 4, ("gsm", 3072): 5, ("ternary", 2048): 7, ("ternary", 3072): 8}
    for (layout, L), n in expected.items():
        params = pk.solve(16, L, 40, 256, layout=layout)
        assert params.n == n and params.level2_bits <= L - 1
        assert params.d <= 16 + math.log2(params.n) + math.log2(math.ceil(256 / params.n)) + 2
    for L in (2048, 3072):  # the paper's own rule, evaluated directly
        rule = [n for n in range(1, 12) if 2**n * (32 + math.log2(n) + math.log2(math.ceil(256 / n)) + 42) <= L]
        assert max(rule) == expected[("gsm", L)]


@pytest.mark.parametrize("layout", pk.LAYOUTS)
def test_solver_returns_the_largest_feasible_n(layout):
    rng = random.Random(5)
    for _ in range(30):
        m, lam, ell, L = rng.randint(1, 24), rng.randint(8, 80), rng.randint(1, 400), rng.choice([1024, 2048, 3072])
        params = pk.solve(m, L, lam, ell, layout=layout)
        assert params.n <= ell
        for n in range(params.n + 1, min(ell, params.n + 40) + 1):  # every larger n overflows L − 1 bits
            pos = pk.positions(layout, n)
            largest = math.ceil(ell / n) * pk.max_terms_per_block(pos) * (2**m - 1) ** 2
            d = max(0, largest.bit_length() - m)
            assert (m + d + lam) * (2 * pos[-1] + 1) > L - 1


def test_solver_options_change_d():
    base = pk.solve(16, 3072, 40, 256)
    assert pk.solve(16, 3072, 40, 256, scalar_bits=40).d >= base.d + 39
    assert pk.solve(16, 3072, 40, 256, add1=4).d >= base.d + 2
    assert pk.solve(16, 3072, 40, 256, add2=1).d < base.d
    with pytest.raises(CryptoError, match="not even one"):
        pk.solve(64, 128, 80, 10)
    with pytest.raises(CryptoError, match="positive"):
        pk.solve(0, 2048, 40, 10)


# ---------------------------------------------------------------- misuse


def test_bad_values_encodings_and_parameters_are_refused():
    params = pk.solve(8, 1024, 40, 32)
    with pytest.raises(CryptoError, match=r"\[0, 2\^8\)"):
        pk.encode1(params, [256])
    with pytest.raises(CryptoError, match=r"\[0, 2\^8\)"):
        pk.encode1(params, [-1])
    with pytest.raises(CryptoError, match="at most n"):
        pk.encode1(params, [1] * (params.n + 1))
    with pytest.raises(CryptoError, match="out of range"):
        pk.decode2(params, -5)
    with pytest.raises(CryptoError, match="out of range"):
        pk.decode2(params, 1 << params.level2_bits)
    with pytest.raises(CryptoError, match="out of range"):
        pk.decode1(params, 1 << (params.k * (params.positions[-1] + 1)))
    with pytest.raises(CryptoError, match="needs"):
        pk.PackingParams(m=16, n=12, d=30, lam=40, L=2048)
    with pytest.raises(CryptoError, match="must be an integer"):
        pk.encode1(params, [1.0])
    with pytest.raises(CryptoError, match="too small"):
        params.check_fits(2**500)
    params.check_fits(2**1023 + 1)


# ---------------------------------------------------------------- under Paillier


@pytest.mark.parametrize("layout", pk.LAYOUTS)
def test_packed_inner_product_under_paillier(layout):
    """Seed 004 Π₁'s arithmetic: Enc(u*) · w* (scalar), ⊞ over chunks, ⊞ Enc(mask), Dec, Decode₂."""
    key, sk = generate_paillier_keypair(1024, insecure_test_params=True)
    ell, m = 40, 8
    params = pk.solve(m, key.bits, 40, ell, layout=layout)
    params.check_fits(key.n)
    rng = random.Random(11)
    u = [rng.randrange(2**m) for _ in range(ell - 1)] + [2**m - 1]
    w = [rng.randrange(2**m) for _ in range(ell - 1)] + [2**m - 1]
    enrolled = [sk.encrypt(x) for x in pk.encode1_vector(params, u)]
    acc = None
    for c, v in zip(enrolled, pk.encode1_vector(params, w)):
        term = c * v
        acc = term if acc is None else acc + term
    masked = (acc + pk.mask_offset(params)).rerandomize()
    slots = pk.decode2(params, sk.decrypt(masked))
    assert sum(slots) == sum(a * b for a, b in zip(u, w))
    assert pk.decode1(params, sk.decrypt(enrolled[0])) == u[: params.n]
