"""CKKS/BFV on SEAL (crypto.lattice): exact BFV distances, CKKS distances within CKKS_DISTANCE_ERROR, slot and
coefficient encodings, masking of the non-constant coefficients, serialization and refusal of malformed or
mismatched blobs, noise flooding, parameter policy. The 128-bit parameter sets are fast enough to test."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto import seal_io
from privface.crypto.lattice import (
    BFV_128,
    CKKS_128,
    CKKS_DISTANCE_ERROR,
    LatticeParams,
    LatticePublicContext,
    LatticeSecretContext,
    flood,
    flood_sigma,
    generate_lattice_keypair,
)
from privface.errors import CryptoError

FAST = settings(max_examples=15, deadline=None)


@pytest.fixture(scope="module")
def bfv():
    return generate_lattice_keypair(BFV_128, relin=True)


@pytest.fixture(scope="module")
def ckks():
    return generate_lattice_keypair(CKKS_128)


def test_parameters_are_128_bit_per_he_standard():
    assert BFV_128.security_bits == 128 and CKKS_128.security_bits == 128
    assert BFV_128.total_bits == 109 and CKKS_128.total_bits == 218
    assert (BFV_128.plain_modulus - 1) % (2 * BFV_128.poly_modulus_degree) == 0


def test_insecure_parameters_need_the_switch():
    toy = LatticeParams("toy", "bfv", 4096, (60, 60, 60), plain_modulus=1 << 20)
    assert toy.security_bits == 0
    with pytest.raises(CryptoError, match="128-bit"):
        generate_lattice_keypair(toy)
    pub, sec = generate_lattice_keypair(toy, insecure_test_params=True)
    blob = pub.to_bytes()
    with pytest.raises(CryptoError, match="128-bit"):
        LatticePublicContext.from_bytes(blob)
    assert LatticePublicContext.from_bytes(blob, insecure_test_params=True).params == toy


@FAST
@given(st.data())
def test_bfv_distance_is_exact(bfv, data):
    pub, sec = bfv
    d = data.draw(st.sampled_from([1, 3, 128, 512]))
    a = np.array(data.draw(st.lists(st.integers(-128, 128), min_size=d, max_size=d)))
    b = np.array(data.draw(st.lists(st.integers(-128, 128), min_size=d, max_size=d)))
    exact = int(((a - b) ** 2).sum())
    t = pub.encrypt_template(a)
    assert sec.decrypt_distance(pub.squared_distance(t, pub.encrypt_probe(b))) == exact
    assert sec.decrypt_distance(pub.squared_distance(t, pub.encode_probe(b))) == exact


def test_bfv_worst_case_512_keeps_noise_budget(bfv):
    pub, sec = bfv
    a, b = np.full(512, 128), np.full(512, -128)
    dist = pub.squared_distance(pub.encrypt_template(a), pub.encrypt_probe(b))
    assert sec.noise_budget(dist) > 0
    assert sec.decrypt_distance(dist) == 512 * 256**2


def test_ckks_distance_within_documented_error(ckks):
    pub, sec = ckks
    rng = np.random.default_rng(7)
    for d in (1, 128, 512, 1024):
        for _ in range(3):
            a, b = rng.normal(size=d), rng.normal(size=d)
            a, b = a / np.linalg.norm(a), 1.5 * b / np.linalg.norm(b)
            exact = float(((a - b) ** 2).sum())
            t = pub.encrypt_template(a)
            for probe in (pub.encrypt_probe(b), pub.encode_probe(b)):
                assert abs(sec.decrypt_distance(pub.squared_distance(t, probe)) - exact) < CKKS_DISTANCE_ERROR


def test_mask_hides_non_constant_coefficients(bfv):
    """Without the mask coefficient 1 of T·P would be −2Σ a_i b_{i−1}…; with it, it is uniform mod t."""
    pub, sec = bfv
    a = np.arange(1, 9)
    t, p = pub.encrypt_template(a), pub.encrypt_probe(a)
    seen = set()
    for _ in range(4):
        dist = pub.squared_distance(t, p)
        pt = sec._decrypt(dist)
        assert pt[0] == 0
        seen.add(tuple(pt[i] for i in range(1, 6)))
    assert len(seen) == 4
    raw = pub.multiply(t, p)
    plain = sec._decrypt(raw)
    assert plain[0] == 0 and plain[1] != 0  # the unmasked product does carry cross-correlations


def test_slot_and_coefficient_encodings_and_products(bfv, ckks):
    pub, sec = bfv
    x = pub.encrypt_slots([1, -2, 3, 4])
    assert list(sec.decrypt_slots(pub.multiply(x, x, relinearize=True))) == [1, 4, 9, 16]
    assert list(sec.decrypt_slots(pub.multiply_plain(x, pub.encode_slots([2, 2, 2, 2])))) == [2, -4, 6, 8]
    assert list(sec.decrypt_slots(pub.add(x, x))) == [2, -4, 6, 8]
    # coefficient encoding: (1 + 2X)·(3 + X) = 3 + 7X + 2X² → constant coefficient 3
    c = pub.encrypt_coefficients([1, 2])
    assert sec.decrypt_constant(pub.multiply(c, pub.encrypt_coefficients([3, 1]))) == 3
    assert sec.decrypt_constant(pub.multiply_plain(c, pub.encode_coefficients([0] * 4095 + [-1]))) == 2  # X^{−1}
    cpub, csec = ckks
    y = cpub.encrypt_slots([0.5, -1.25, 2.0])
    assert np.allclose(csec.decrypt_slots(cpub.multiply_plain(y, cpub.encode_slots([2.0, 2.0, 2.0]))),
                       [1.0, -2.5, 4.0], atol=1e-6)
    z = cpub.encrypt_coefficients([0.25, 1.0])  # (0.25 + X)·(−X^{N−1}) has constant coefficient 1 (X·X^{−1})
    prod = cpub.multiply_plain(z, cpub.encode_coefficients([0.0] * (cpub.n - 1) + [-1.0]))
    assert abs(csec.decrypt_constant(prod) / prod.seal.scale - 1.0) < 1e-9


@pytest.mark.parametrize("which", ["bfv", "ckks"])
def test_serialization_round_trips(which, request):
    pub, sec = request.getfixturevalue(which)
    a = np.arange(16) if which == "bfv" else np.linspace(-0.2, 0.2, 16)
    b = a[::-1].copy()
    pub2 = LatticePublicContext.from_bytes(pub.to_bytes())
    sec2 = LatticeSecretContext.from_bytes(pub2, sec.secret_to_bytes())
    t = pub2.ciphertext_from_bytes(pub.encrypt_template(a).to_bytes(), kind="template")
    p = pub2.ciphertext_from_bytes(pub.encrypt_probe(b).to_bytes(), kind="probe")
    dist = pub2.ciphertext_from_bytes(pub2.squared_distance(t, p).to_bytes(), kind="distance")
    exact = ((a - b) ** 2).sum()
    assert abs(sec2.decrypt_distance(dist) - exact) < CKKS_DISTANCE_ERROR
    assert abs(sec.decrypt_distance(pub.ciphertext_from_bytes(dist.to_bytes())) - exact) < CKKS_DISTANCE_ERROR


def test_serialization_is_seal_compressed(bfv, ckks):
    """Template sizes within seed 002 Tab. 3 (BFV 132 KB, CKKS 516 KB) thanks to SEAL's zstd compression."""
    assert bfv[0].encrypt_template(np.zeros(512, dtype=int)).to_bytes()[26 + 5] == 2  # SEAL header: zstd
    assert len(bfv[0].encrypt_template(np.zeros(512, dtype=int)).to_bytes()) <= 132_000
    assert len(ckks[0].encrypt_template(np.zeros(512)).to_bytes()) <= 516_000


def test_malformed_and_mismatched_blobs_are_refused(bfv, ckks):
    pub, sec = bfv
    blob = pub.encrypt_template(np.arange(8)).to_bytes()
    bad = [b"", b"junk", blob[:40], blob[:-1], blob + b"\0", blob[:5] + b"\x09" + blob[6:],
           blob[:6] + bytes(8) + blob[14:], blob[:14] + bytes(8) + blob[22:], blob[:26] + b"\x07" + blob[27:],
           blob[:70] + bytes(64) + blob[134:]]
    for b in bad:
        with pytest.raises(CryptoError):
            pub.ciphertext_from_bytes(b)
    with pytest.raises(CryptoError, match="expected a probe"):
        pub.ciphertext_from_bytes(blob, kind="probe")
    with pytest.raises(CryptoError, match="other parameters"):
        ckks[0].ciphertext_from_bytes(blob)  # a BFV ciphertext offered to CKKS
    other, other_sec = generate_lattice_keypair(BFV_128)
    with pytest.raises(CryptoError, match="another public key"):
        other.ciphertext_from_bytes(blob)  # same parameters, other key pair
    with pytest.raises(CryptoError, match="different lattice context"):
        other.squared_distance(pub.encrypt_template(np.arange(8)), other.encrypt_probe(np.arange(8)))
    for ctx in (ckks[0], other):
        with pytest.raises(CryptoError, match="another public key"):
            LatticeSecretContext.from_bytes(ctx, sec.secret_to_bytes())
    for b in (b"", pub.to_bytes()[:-3], sec.secret_to_bytes()):
        with pytest.raises(CryptoError):
            LatticePublicContext.from_bytes(b)
    assert other.to_bytes() != pub.to_bytes()


def test_bad_inputs_are_refused(bfv, ckks):
    pub, _ = bfv
    cpub, _ = ckks
    t = pub.encrypt_template(np.arange(4))
    for x in ("abc", [[1, 2]], [1.5, 2], np.zeros(0, dtype=int), np.arange(5000), [5000, 0]):
        with pytest.raises(CryptoError):
            pub.encrypt_template(x)
    for x in ([np.nan, 1.0], np.ones(64)):
        with pytest.raises(CryptoError):
            cpub.encrypt_template(x)
    with pytest.raises(CryptoError, match="coordinates"):
        pub.squared_distance(t, pub.encrypt_probe(np.arange(5)))
    with pytest.raises(CryptoError, match="template ciphertext"):
        pub.squared_distance(pub.encrypt_probe(np.arange(4)), t)
    with pytest.raises(CryptoError, match="different lattice context"):
        cpub.squared_distance(t, t)
    with pytest.raises(CryptoError, match="Galois"):
        pub.rotate(t, 1)


def test_secret_key_absent_from_public_serialization(bfv):
    pub, sec = bfv
    blob = pub.to_bytes()
    secret = sec.secret_to_bytes()[13:]  # the SEAL secret-key object
    assert secret[40:200] not in blob
    loaded = LatticePublicContext.from_bytes(blob)
    assert not any("secret" in name for name in loaded.__slots__)
    assert repr(sec) == "LatticeSecretContext(bfv-4096)"


def test_flooding_changes_low_bits_and_keeps_decisions(ckks):
    pub, sec = ckks
    rng = np.random.default_rng(3)
    a = rng.normal(size=128)
    a /= np.linalg.norm(a)
    threshold = 0.6
    sigma = flood_sigma()
    assert 2**-12 < sigma < 2**-7
    for scale in (0.3, 0.5, 0.7, 0.9):  # distances well away from the threshold (≥ 20σ)
        b = a + scale * rng.normal(size=128) / np.sqrt(128)
        value = sec.decrypt_distance(pub.squared_distance(pub.encrypt_template(a), pub.encode_probe(b)))
        if abs(value - threshold) < 20 * sigma:
            continue
        flooded = [flood(value) for _ in range(20)]
        assert all(f != value for f in flooded) and len(set(flooded)) == 20
        assert all(abs(f - value) < 10 * sigma for f in flooded)
        assert all((f <= threshold) == (value <= threshold) for f in flooded)
    with pytest.raises(CryptoError):
        flood(float("nan"))


def test_ckks_coefficient_encoding_matches_seal_slot_order():
    """Slot j holds c(ζ^{3^j}): SEAL's rotation by one slot is X ↦ X³, so Enc(X) rotated is Enc(X³), not X⁵."""
    params = LatticeParams("ckks-4096", "ckks", 4096, (40, 30, 39), scale_bits=30)
    pub, sec = generate_lattice_keypair(params, galois=True)
    rotated = pub.rotate(pub.encrypt_coefficients([0.0, 1.0]), 1)
    for k, want in ((3, 1.0), (5, 0.0), (1, 0.0)):
        x_minus_k = np.zeros(pub.n)
        x_minus_k[pub.n - k] = -1.0  # X^{−k} = −X^{N−k}
        prod = pub.multiply_plain(rotated, pub.encode_coefficients(x_minus_k, scale=2.0**30))
        assert abs(sec.decrypt_constant(prod) / prod.seal.scale - want) < 1e-6


def test_coefficients_read_the_seal_words(bfv, ckks):
    """``coefficients`` (zstd-decoded serialization) equals SEAL's own words, and is additive mod each prime."""
    pub = bfv[0]
    c1, c2 = pub.encrypt_template(np.arange(8)), pub.encrypt_template(np.arange(8) * 3)
    words = c1.coefficients()
    assert words.shape == (2, 2, 4096)
    d = c1.seal.dyn_array()
    assert all(int(words.reshape(-1)[i]) == d.at(i) for i in (0, 1, 4095, 4096, 9000, 16383))
    primes = np.array([m.value() for m in pub.seal_context.first_context_data().parms().coeff_modulus()],
                      dtype=np.uint64)[None, :, None]
    assert np.array_equal(pub.add(c1, c2).coefficients(), (words + c2.coefficients()) % primes)
    assert ckks[0].encrypt_template(np.zeros(4)).coefficients().shape == (2, 3, 8192)
    with pytest.raises(CryptoError):
        seal_io.data_array(seal_io.save(c1.seal), 100, "ciphertext")
