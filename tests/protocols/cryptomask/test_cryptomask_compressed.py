"""Seed 001 §4.5's compressed ciphertexts at the real parameters (N = 4096): the widths C0_BITS = 21 and C1_BITS = 29
follow the decryption-failure bound (``params.failure_log2``, docs/protocols/cryptomask.md "Compressed distances"),
decryption at those widths is exact on every entry, and the measured phase error is the bound's: c₁ one bit
narrower doubles it, past what the bound allows for this verifier's secret."""
import numpy as np
import pytest

from privface.protocols.cryptomask import CryptoMask, encoding, he
from privface.protocols.cryptomask.params import (
    C0_BITS,
    C1_BITS,
    FAILURE_LOG2,
    MARGIN_BITS,
    T_BITS,
    WIRE_BITS,
    failure_log2,
)


def unit(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_widths_follow_the_bound():
    """c₁ at 29 bits keeps the failure below 2^-40 per entry for any secret of weight ≤ 3 400 (SEAL's uniform
    ternary at N = 4096 has 2 731 ± 30); at 28 bits not even for the typical weight. c₀'s width is the band's."""
    assert C0_BITS == T_BITS + MARGIN_BITS - 1 == 21
    assert failure_log2(C1_BITS, 3400) <= FAILURE_LOG2 < failure_log2(C1_BITS, 3460)
    assert failure_log2(C1_BITS - 1, 2731) > FAILURE_LOG2
    assert failure_log2(C1_BITS - 1, 860) <= FAILURE_LOG2 < failure_log2(C1_BITS - 1, 870)


def test_bit_packing_round_trips():
    rng = np.random.default_rng(3)
    for bits in (C0_BITS, C1_BITS, 32, 1):
        x = rng.integers(0, 1 << bits, (3, 64), dtype=np.uint64)
        raw = he.to_wire(x, bits)
        assert len(raw) == x.size * bits // 8
        assert np.array_equal(he.from_wire(raw, x.shape, bits), x)


@pytest.fixture(scope="module")
def cm():
    """Real parameters, CryptoMask-WO (no OT set-up needed to read the CS's packs), 4 packs of 4 088 templates."""
    c = CryptoMask(128, variant="wo")
    c.enrol(unit(np.random.default_rng(1), 4 * 4088 - 100, 128))
    return c


def test_decryption_at_the_chosen_widths_is_exact(cm):
    """d₀ + d₁ = ⟨a_i, b⟩ mod t on every entry of 4 probes (65 008 entries), masked (Alg. 2 + §4.5 compression) and
    unmasked (CryptoMask-WO)."""
    rng = np.random.default_rng(2)
    gallery = encoding.quantize(unit(np.random.default_rng(1), 4 * 4088 - 100, 128))
    t = 1 << T_BITS
    for _ in range(4):
        b = unit(rng, 1, 128)[0]
        want = gallery @ encoding.quantize(b)
        q = cm.verifier.query(b)
        msg, d0 = cm.cs.distances(q)
        assert int(msg.c0.max()) < 1 << C0_BITS and int(msg.c1.max()) < 1 << C1_BITS
        assert msg.nbytes == he.pack_bytes(4, cm.cs.n) == 4 * 4096 * 50 // 8
        assert np.array_equal((d0 + cm.verifier.shares(msg, cm.cs.count)) % t, want % t)
        wo, _ = cm.cs.distances(q, mask=False)
        assert np.array_equal(cm.verifier.distances(wo, cm.cs.count), want)


def _phase_errors(cm, b, c1_bits: int) -> np.ndarray:
    """The verifier's phase error e = c₀ + c₁·s_v − (q'/t)·⟨a_i, b⟩ mod q' (centred) of every entry, c₀ at 2^32 and
    c₁ switched to 2^c1_bits."""
    cs, v = cm.cs, cm.verifier
    R = cs.prepare(v.query(b))
    parts = list(cs._parts(0, cs.ciphertexts))
    c1, c0 = cs.basis.product.packed_distances(parts, R, cs._galois, cs.group, he.seed(), 0, WIRE_BITS, c1_bits)
    full = (c1 << np.uint64(WIRE_BITS - c1_bits)).astype(np.uint32)
    ph = cs.basis.product.phase(c0.astype(np.uint32), full, v._s_hat, WIRE_BITS).astype(np.int64)
    gallery = encoding.quantize(unit(np.random.default_rng(1), 4 * 4088 - 100, 128))
    want = ((gallery @ encoding.quantize(b)) % (1 << T_BITS)) << (WIRE_BITS - T_BITS)
    e = he.entries(ph, cs.group, cs.delta)[:cs.count] - want
    return (e + (1 << (WIRE_BITS - 1))) % (1 << WIRE_BITS) - (1 << (WIRE_BITS - 1))


def test_phase_error_is_the_bounds(cm):
    """At C1_BITS the error's spread is 2^(32 − C1_BITS)·√(h/12) (h: the weight of s_v) and every |e| stays below
    the band's 2^-MARGIN_BITS of a step (1 024) with room; one bit fewer doubles it, and the bound no longer holds
    for this h."""
    b = unit(np.random.default_rng(4), 1, 128)[0]
    h = int(np.count_nonzero(cm.verifier._sv))
    margin = 1 << (WIRE_BITS - T_BITS - MARGIN_BITS)
    e = _phase_errors(cm, b, C1_BITS)
    sd = (1 << (WIRE_BITS - C1_BITS)) * np.sqrt(h / 12)
    assert abs(e.std() / sd - 1) < 0.1
    assert np.abs(e).max() < margin * 0.75
    assert failure_log2(C1_BITS, h) <= FAILURE_LOG2
    e28 = _phase_errors(cm, b, C1_BITS - 1)
    assert abs(e28.std() / e.std() - 2) < 0.2
    assert failure_log2(C1_BITS - 1, h) > FAILURE_LOG2
    e32 = _phase_errors(cm, b, WIRE_BITS)  # uncompressed: ε₀ + Σ s_i ε_i, spread √((h + 1)/12)
    assert abs(e32.std() / np.sqrt((h + 1) / 12) - 1) < 0.1
