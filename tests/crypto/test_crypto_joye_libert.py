"""Joye–Libert LHE (the base scheme of seed 000): homomorphism over Z_{2^k}, windowed decryption against
the paper's bit-by-bit algorithm, uniform encryption (seed 000 Def. 3) exhaustively on toy keys,
validation, bytes and parameter policy. Toy keys unless marked realsize."""
from __future__ import annotations

from collections import Counter

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto.joye_libert import (
    JL_112,
    JL_128,
    JLParams,
    JoyeLibertCiphertext,
    JoyeLibertPrivateKey,
    JoyeLibertPublicKey,
    generate_joye_libert_keypair,
)
from privface.errors import CryptoError

FAST = settings(max_examples=40, deadline=None)


@pytest.fixture(scope="module", params=[64, 61, 5], ids=["k64", "k61", "k5"])
def keys(request):
    """k = 64 (whole 8-bit windows), 61 (a partial last window), 5 (less than one window)."""
    return generate_joye_libert_keypair(JLParams(512, request.param), insecure_test_params=True)


def plaintexts(k):
    two_k = 2**k
    return st.one_of(st.sampled_from([0, 1, two_k - 1, two_k, two_k // 2, -1, -(two_k // 2)]),
                     st.integers(-2 * two_k, 2 * two_k))


@FAST
@given(data=st.data())
def test_homomorphism_mod_2k(keys, data):
    pk, sk = keys
    M = 2**pk.k
    a, b, s = (data.draw(plaintexts(pk.k)) for _ in range(3))
    ca, cb = pk.encrypt(a), sk.encrypt(b)
    assert sk.decrypt(ca) == a % M and sk.decrypt(cb) == b % M
    assert sk.decrypt(ca + cb) == (a + b) % M
    assert sk.decrypt(ca - cb) == (a - b) % M
    assert sk.decrypt(-ca) == -a % M
    assert sk.decrypt(ca + b) == (a + b) % M
    assert sk.decrypt(s * ca) == a * s % M
    assert sk.decrypt(ca.rerandomize()) == a % M


def test_signed_decryption_edges(keys):
    pk, sk = keys
    half = 2 ** (pk.k - 1)
    for m in (0, 1, -1, half, -half + 1, 3, -3):
        assert sk.decrypt_signed(pk.encrypt(m)) == m
    assert sk.decrypt_signed(pk.encrypt(-half)) == half


def _paper_decrypt(sk, c) -> int:
    """Joye–Libert's bit-by-bit decryption (EUROCRYPT 2013, Alg. 1), the reference for the windowed one."""
    p, k, y = sk.p, sk.public_key.k, sk.public_key.y
    p_prime = (p - 1) >> k
    D = gmpy2.powmod(gmpy2.invert(y, p), p_prime, p)
    C = gmpy2.powmod(c.value, p_prime, p)
    m, B = 0, 1
    for j in range(1, k):
        if gmpy2.powmod(C, 1 << (k - j), p) != 1:
            m += B
            C = C * D % p
        B <<= 1
        D = D * D % p
    return m + (B if C != 1 else 0)


@FAST
@given(data=st.data())
def test_windowed_decryption_matches_the_bit_by_bit_algorithm(keys, data):
    pk, sk = keys
    c = pk.encrypt(data.draw(plaintexts(pk.k)))
    assert sk.decrypt(c) == _paper_decrypt(sk, c)


@pytest.mark.parametrize("p, q, k", [(17, 11, 4), (97, 7, 5), (193, 19, 6)])
def test_uniform_encryption_exhaustively(p, q, k):
    """Seed 000 Def. 3: |C_m| is the same for every m. Enumerating every x ∈ Z*_N and m ∈ Z_{2^k}:
    the sets C_m have equal size, are pairwise disjoint, every c ∈ C_m is hit by equally many x,
    and Dec maps all of C_m back to m."""
    sk = JoyeLibertPrivateKey.from_primes(p, q, k, insecure_test_params=True)
    pk = sk.public_key
    n = p * q
    units = [x for x in range(1, n) if gmpy2.gcd(x, n) == 1]
    sets = []
    for m in range(2**k):
        hits = Counter(int(pk.encrypt_with(m, x)) for x in units)
        assert len(set(hits.values())) == 1  # Enc(m; x) uniform on C_m
        sets.append(set(hits))
        assert {sk.decrypt(pk.ciphertext(c)) for c in hits} == {m}
    assert len({len(s) for s in sets}) == 1
    assert len(set().union(*sets)) == 2**k * len(sets[0])  # pairwise disjoint
    assert len(sets[0]) == (p - 1) * (q - 1) // (2**k * 2)  # |H| = |Z*_N| / (2^k on Z*_p · 2 on Z*_q)


def test_a_residue_y_would_break_decryption():
    """The check that y is a non-residue mod p matters: with a square y the sets C_m collide."""
    with pytest.raises(CryptoError, match="non-residue"):
        JoyeLibertPrivateKey.from_primes(17, 11, 4, y=4, insecure_test_params=True)
    pk = JoyeLibertPublicKey(187, 4, 4, insecure_test_params=True)  # the public key alone cannot tell
    c0 = {int(pk.encrypt_with(0, x)) for x in range(1, 187) if gmpy2.gcd(x, 187) == 1}
    c4 = {int(pk.encrypt_with(4, x)) for x in range(1, 187) if gmpy2.gcd(x, 187) == 1}
    assert c0 == c4  # 4 has order 4 mod 17: Enc(0) and Enc(4) are the same set


# ---------------------------------------------------------------- validation and bytes


@pytest.fixture(scope="module")
def toy():
    return generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)


def test_validation_rejects_non_members(toy):
    pk, sk = toy
    n = int(pk.n)
    minus = next(x for x in range(2, 1000) if gmpy2.jacobi(x, n) == -1)
    for bad, why in ((0, "outside"), (n, "outside"), (n + 5, "outside"), (-1, "outside"),
                     (int(sk.p), "not a unit"), (minus, "Jacobi")):
        with pytest.raises(CryptoError, match=why):
            pk.ciphertext(bad)
    for bad in (2.0, "3", None):
        with pytest.raises(CryptoError, match="must be an integer"):
            pk.ciphertext(bad)


def test_wrong_keys_and_bytes(toy):
    pk, sk = toy
    pk2, sk2 = generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)
    c = pk.encrypt(5)
    with pytest.raises(CryptoError, match="different public keys"):
        c + pk2.encrypt(1)
    with pytest.raises(CryptoError, match="different public key"):
        sk2.decrypt(c)
    with pytest.raises(CryptoError, match="not by another ciphertext"):
        c * c
    data = c.to_bytes()
    assert len(data) == 12 + 64 and data[:3] == b"PFJ"
    assert sk.decrypt(JoyeLibertCiphertext.from_bytes(pk, data)) == 5
    for bad in (data[:-1], data + b"\x00"):
        with pytest.raises(CryptoError, match="bytes for this key"):
            JoyeLibertCiphertext.from_bytes(pk, bad)
    with pytest.raises(CryptoError, match="different public key"):
        JoyeLibertCiphertext.from_bytes(pk2, data)
    with pytest.raises(CryptoError, match="Jacobi|not a unit|outside"):
        JoyeLibertCiphertext.from_bytes(pk, data[:12] + (int(pk.n) - 1 if gmpy2.jacobi(int(pk.n) - 1, int(pk.n)) == -1
                                                          else int(pk.n)).to_bytes(64, "big"))
    from privface.crypto.paillier import generate_paillier_keypair

    ppk, psk = generate_paillier_keypair(512, insecure_test_params=True)
    with pytest.raises(CryptoError):
        c + ppk.encrypt(1)
    with pytest.raises(CryptoError, match="expected a JoyeLibertCiphertext"):
        sk.decrypt(ppk.encrypt(1))


def test_reprs_hide_the_secret_key(toy):
    pk, sk = toy
    for text in (repr(sk), str(sk), repr(pk)):
        for secret in (sk.p, sk.q, sk.p_prime):
            assert str(int(secret)) not in text and f"{int(secret):x}" not in text
    assert "secret" in repr(sk) and "k=64" in repr(sk)


# ---------------------------------------------------------------- parameter policy


def test_policy_refuses_small_moduli_and_long_messages():
    with pytest.raises(CryptoError, match="below 112-bit security"):
        generate_joye_libert_keypair(JLParams(1024, 64))
    with pytest.raises(CryptoError, match="too many low bits"):
        generate_joye_libert_keypair(JLParams(2048, 401))
    with pytest.raises(CryptoError, match="too many low bits"):
        JoyeLibertPublicKey(2**2047 + 1, 3, 401)
    assert (JL_112.bits, JL_112.k, JL_112.p_bits, JL_112.security_bits) == (2048, 136, 768, 112)
    assert (JL_128.bits, JL_128.k, JL_128.p_bits, JL_128.security_bits) == (3072, 152, 1152, 128)
    for params in (JL_112, JL_128):  # λ + 24 ≤ k ≤ |p|·|q|/|N| − λ, |p| ≥ |N|/3 (module docstring)
        lam, n, p = params.security_bits, params.bits, params.p_bits
        assert lam + 24 <= params.k <= p * (n - p) // n - lam
        assert 3 * p >= n
    with pytest.raises(CryptoError, match=r"\|p\| = 600 bits"):  # a factor ECM could reach sooner
        generate_joye_libert_keypair(JLParams(2048, 136, p_bits=600))
    with pytest.raises(CryptoError, match="too many low bits"):  # 768·1280/2048 − 112 = 368
        generate_joye_libert_keypair(JLParams(2048, 369, p_bits=768))
    with pytest.raises(CryptoError, match="p ≡ 1"):
        JoyeLibertPrivateKey.from_primes(19, 11, 4, y=2, insecure_test_params=True)


@pytest.mark.realsize
@pytest.mark.parametrize("params", [JL_112, JL_128], ids=["112", "128"])
def test_real_parameter_sets(params):
    pk, sk = generate_joye_libert_keypair(params)
    assert pk.bits == params.bits and sk.p.bit_length() == params.p_bits
    assert sk.q.bit_length() == params.bits - params.p_bits
    assert sk.p % 2**params.k == 1 and sk.q % 4 == 3
    top = 2**params.k - 1
    assert sk.decrypt(pk.encrypt(top) + sk.encrypt(2)) == 1
    assert sk.decrypt_signed(pk.encrypt(-(2**100)) * 3) == -3 * 2**100
    c = pk.encrypt(123456789)
    assert sk.decrypt(c) == _paper_decrypt(sk, c) == 123456789
