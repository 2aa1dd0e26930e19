"""NTRU with XOR-homomorphic addition (crypto.ntru, seed 002 §2.2): exact decryption and Hamming distances,
worst-case noise, bytes round trips and refusal of malformed or foreign blobs, parameter policy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto.ntru import (
    NTRU_1024,
    NTRUCiphertext,
    NTRUParams,
    NTRUPrivateKey,
    NTRUPublicKey,
    _inverse_mod_q,
    _mul,
    core_svp_bits,
    generate_ntru_keypair,
)
from privface.errors import CryptoError

FAST = settings(max_examples=30, deadline=None)


@pytest.fixture(scope="module")
def keys():
    return generate_ntru_keypair()


def test_security_estimate_and_policy():
    assert NTRU_1024.security_bits >= 128
    # the method reproduces the NIST round-3 NTRU-HPS core-SVP figures (≈ 106 and 179 bits) within a few bits
    assert abs(core_svp_bits(509, 2048, 2 / 3, 0.25) - 106) <= 4
    assert abs(core_svp_bits(821, 4096, 2 / 3, 0.25) - 179) <= 8
    toy = NTRUParams("toy", 64, 257)
    assert toy.security_bits < 128
    with pytest.raises(CryptoError, match="below 128"):
        generate_ntru_keypair(toy)
    pk, sk = generate_ntru_keypair(toy, insecure_test_params=True)
    x = np.array([1, 0, 1] * 30)
    assert (sk.decrypt(pk.encrypt(x)) == x).all()
    with pytest.raises(CryptoError, match="below 128"):
        NTRUPublicKey.from_bytes(pk.to_bytes())


def test_ring_arithmetic():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 12289, 8), rng.integers(0, 12289, 8)
    # schoolbook negacyclic product mod X^8 + 1
    want = np.zeros(8, dtype=object)
    for i in range(8):
        for j in range(8):
            k, s = (i + j) % 8, -1 if i + j >= 8 else 1
            want[k] += s * int(a[i]) * int(b[j])
    assert list(_mul(a, b, 12289)) == [int(w) % 12289 for w in want]
    f = 2 * rng.integers(-1, 2, 1024)
    f[0] += 1
    one = np.zeros(1024, dtype=np.int64)
    one[0] = 1
    assert np.array_equal(_mul(f, _inverse_mod_q(f, 12289), 12289), one)
    with pytest.raises(CryptoError, match="not invertible"):
        _inverse_mod_q(np.zeros(1024, dtype=np.int64), 12289)


def test_q_is_an_odd_prime_so_ciphertexts_hide_the_parity_of_the_message(keys):
    """p = 2 and q coprime: with q = 2^k the key h is even and e ≡ m (mod 2) — the template in the clear."""
    for q in (4096, 12288, 12281):  # power of two, even, odd but ≢ 1 (mod 2N)
        with pytest.raises(CryptoError, match="prime"):
            NTRUParams("bad", 1024, q)
    pk, _ = keys
    assert (pk.h % 2).any()
    m = np.random.default_rng(3).integers(0, 2, 4096)
    agree = ((pk.encrypt(m).blocks.reshape(-1) % 2) == m).mean()
    assert 0.45 < agree < 0.55  # 4096 bits: SE 0.008


@FAST
@given(st.data())
def test_xor_and_hamming_are_exact(keys, data):
    pk, sk = keys
    nbits = data.draw(st.sampled_from([1, 384, 1024, 1536, 2049]))
    x = np.array(data.draw(st.lists(st.integers(0, 1), min_size=nbits, max_size=nbits)), dtype=np.uint8)
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=nbits, max_size=nbits)), dtype=np.uint8)
    cx, cy = pk.encrypt(x), pk.encrypt(y)
    assert (sk.decrypt(cx) == x).all()
    assert (sk.decrypt(cx + cy) == (x ^ y)).all()
    assert sk.hamming_distance(cx + cy) == int((x != y).sum())


def test_worst_case_messages_and_fresh_randomness(keys):
    pk, sk = keys
    ones = np.ones(1536, dtype=np.uint8)
    assert sk.hamming_distance(pk.encrypt(ones) + pk.encrypt(ones)) == 0
    assert sk.hamming_distance(pk.encrypt(ones) + pk.encrypt(np.zeros(1536, dtype=np.uint8))) == 1536
    assert pk.encrypt(ones).to_bytes() != pk.encrypt(ones).to_bytes()


def test_bytes_round_trip_and_sizes(keys):
    pk, sk = keys
    x = np.arange(1536) % 2
    c = pk.encrypt(x)
    blob = c.to_bytes()
    assert len(blob) <= 5500  # seed 002 Tab. 3: 5.5 KB for a 512-feature (1536-bit LSSC) template
    pk2 = NTRUPublicKey.from_bytes(pk.to_bytes())
    sk2 = NTRUPrivateKey.from_bytes(pk2, sk.to_bytes())
    assert (sk2.decrypt(NTRUCiphertext.from_bytes(pk2, blob)) == x).all()
    assert repr(sk) == f"NTRUPrivateKey(ntru-1024, {pk.fingerprint.hex()})"
    assert sk.to_bytes()[13:] not in pk.to_bytes()


def test_malformed_and_foreign_blobs_are_refused(keys):
    pk, sk = keys
    other_pk, other_sk = generate_ntru_keypair()
    blob = pk.encrypt(np.ones(100, dtype=np.uint8)).to_bytes()
    too_big = bytearray(blob)
    too_big[-1] = 0xFF
    for bad in (b"", b"PFNC\x01", blob[:-2], blob + b"\0\0", blob[:13] + b"\x00\x10" + blob[15:], bytes(too_big),
                b"XXXX" + blob[4:], "text"):
        with pytest.raises(CryptoError):
            NTRUCiphertext.from_bytes(pk, bad)
    with pytest.raises(CryptoError, match="another public key"):
        NTRUCiphertext.from_bytes(other_pk, blob)
    with pytest.raises(CryptoError, match="different public keys"):
        pk.encrypt([1]) + other_pk.encrypt([1])
    with pytest.raises(CryptoError, match="bits"):
        pk.encrypt([1, 0]) + pk.encrypt([1])
    with pytest.raises(CryptoError, match="not under this key"):
        other_sk.decrypt(pk.encrypt([1]))
    with pytest.raises(CryptoError):
        NTRUPrivateKey.from_bytes(other_pk, sk.to_bytes())
    for bad in (pk.to_bytes()[:-1], b"PFNK\x01" + bytes(9)):
        with pytest.raises(CryptoError):
            NTRUPublicKey.from_bytes(bad)
    for x in ([2, 0], [], [[1]], "0101", [0.5]):
        with pytest.raises(CryptoError):
            pk.encrypt(x)
