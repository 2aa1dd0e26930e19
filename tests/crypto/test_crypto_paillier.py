"""Paillier (seed 004 §2.1): homomorphism, owner encryption, r^N pools, validation, bytes, policy, and
interoperability with python-paillier (phe) in both directions. Toy keys unless marked realsize."""
from __future__ import annotations

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from phe import paillier as phe

from privface.crypto.numbers import crt
from privface.crypto.paillier import (
    PaillierCiphertext,
    PaillierPrivateKey,
    PaillierPublicKey,
    RnPool,
    generate_paillier_keypair,
)
from privface.errors import CryptoError

FAST = settings(max_examples=40, deadline=None)


@pytest.fixture(scope="module")
def keys():
    return generate_paillier_keypair(512, insecure_test_params=True)


@pytest.fixture(scope="module")
def other_keys():
    return generate_paillier_keypair(512, insecure_test_params=True)


def plaintexts(n):
    """Random integers around the message space, with its edges: 0, 1, N − 1, N, ±N/2, negatives."""
    edges = [0, 1, -1, n - 1, n, n // 2, n // 2 + 1, -(n // 2), 2**64]
    return st.one_of(st.sampled_from(edges), st.integers(-2 * n, 2 * n))


@FAST
@given(data=st.data())
def test_homomorphic_add_sub_neg_and_constants(keys, data):
    pk, sk = keys
    n = int(pk.n)
    a, b = data.draw(plaintexts(n)), data.draw(plaintexts(n))
    ca, cb = pk.encrypt(a), sk.encrypt(b)
    assert sk.decrypt(ca) == a % n
    assert sk.decrypt(ca + cb) == (a + b) % n
    assert sk.decrypt(ca - cb) == (a - b) % n
    assert sk.decrypt(-ca) == -a % n
    assert sk.decrypt(ca + b) == (a + b) % n
    assert sk.decrypt(b - ca) == (b - a) % n
    signed = sk.decrypt_signed(ca)
    assert signed % n == a % n and -n // 2 < signed <= n // 2


@FAST
@given(data=st.data())
def test_scalar_multiplication_including_negative_and_large_scalars(keys, data):
    pk, sk = keys
    n = int(pk.n)
    m, s = data.draw(plaintexts(n)), data.draw(plaintexts(n))
    c = pk.encrypt(m)
    assert sk.decrypt(s * c) == m * s % n
    assert sk.decrypt(c * s) == m * s % n


def test_signed_decryption_edges(keys):
    pk, sk = keys
    n = int(pk.n)
    for m in (0, 1, -1, 12345, -12345, n // 2, -(n // 2)):
        assert sk.decrypt_signed(pk.encrypt(m)) == m
    assert sk.decrypt_signed(pk.encrypt(n // 2 + 1)) == n // 2 + 1 - n


def test_encryption_is_randomised_and_rerandomisation_keeps_the_plaintext(keys):
    pk, sk = keys
    c1, c2 = pk.encrypt(7), pk.encrypt(7)
    assert c1 != c2
    r = c1.rerandomize()
    assert r != c1 and sk.decrypt(r) == 7
    assert sk.decrypt(sum([pk.encrypt(i) for i in range(10)])) == 45


def test_owner_rn_is_the_public_rn_of_the_same_residues(keys):
    """CRT of (r^N mod p)^p mod p² and (r^N mod q)^q mod q² equals r^N mod N² (module docstring)."""
    pk, sk = keys
    for r in (2, 3, 65537, int(pk.n) - 2, 123456789123456789):
        public = gmpy2.powmod(r, pk.n, pk.nsquare)
        zp, zq = public % sk.p, public % sk.q
        owner = crt(gmpy2.powmod(zp, sk.p, sk.psquare), gmpy2.powmod(zq, sk.q, sk.qsquare),
                    sk.psquare, sk.qsquare, sk.qsq_inv_psq)
        assert owner == public


def test_owner_and_public_rn_have_the_same_support_exhaustively():
    """On N = 5·7 the owner's {z_p^p, z_q^q} by CRT is exactly the set of N-th residues {r^N mod N²}."""
    sk = PaillierPrivateKey.from_primes(5, 7, insecure_test_params=True)
    pk = sk.public_key
    public = {int(gmpy2.powmod(r, 35, 1225)) for r in range(1, 35) if gmpy2.gcd(r, 35) == 1}
    owner = {int(crt(gmpy2.powmod(zp, 5, 25), gmpy2.powmod(zq, 7, 49), 25, 49, sk.qsq_inv_psq))
             for zp in range(1, 5) for zq in range(1, 7)}
    assert owner == public and len(public) == 24
    for _ in range(200):
        assert int(sk.random_rn()) in public
    # uniform encryption (seed 000 Def. 3): Z_N × Z*_N → Z*_{N²} is a bijection, so |C_m| = φ(N) for every m
    images = [{int(pk.plain_factor(m) * rn % pk.nsquare) for rn in public} for m in range(35)]
    assert all(len(c) == 24 for c in images) and len(set().union(*images)) == 35 * 24
    for m, cs in enumerate(images):
        assert all(sk.decrypt(pk.ciphertext(c)) == m for c in cs)


def test_rn_pool_values_are_used_once_and_tied_to_their_key(keys, other_keys):
    pk, sk = keys
    pool = RnPool(sk, 3)
    assert len(pool) == 3
    values = [pool.take() for _ in range(3)]
    assert len(set(values)) == 3 and len(pool) == 0
    pool.fill(2)
    c = pk.encrypt(42, pool=pool)
    d = sk.encrypt(43, pool=pool)
    assert (sk.decrypt(c), sk.decrypt(d), len(pool)) == (42, 43, 0)
    assert sk.decrypt(pk.encrypt(44, pool=pool)) == 44  # empty pool: computed on the spot
    assert sk.decrypt(c.rerandomize(pool=RnPool(pk, 1))) == 42
    with pytest.raises(CryptoError, match="different Paillier key"):
        other_keys[0].encrypt(1, pool=RnPool(pk, 1))
    assert "secret" not in repr(pool) and str(int(values[0]))[:20] not in repr(pool)


# ---------------------------------------------------------------- validation and bytes


def test_validation_rejects_values_outside_the_group(keys):
    pk, sk = keys
    n2 = int(pk.nsquare)
    for bad in (0, -5, n2, n2 + 1, int(sk.p), int(sk.q) * 12345, int(pk.n)):
        with pytest.raises(CryptoError, match="outside|not a unit"):
            pk.ciphertext(bad)
    for bad in (1.5, "12", b"\x01", True, None):
        with pytest.raises(CryptoError, match="must be an integer"):
            pk.ciphertext(bad)
    assert sk.decrypt(pk.ciphertext(1)) == 0  # 1 = Enc(0; r = 1) is a unit


def test_wrong_keys_and_wrong_operations_are_refused(keys, other_keys):
    (pk, sk), (pk2, sk2) = keys, other_keys
    c, c2 = pk.encrypt(1), pk2.encrypt(1)
    with pytest.raises(CryptoError, match="different public keys"):
        c + c2
    with pytest.raises(CryptoError, match="different public key"):
        sk2.decrypt(c)
    with pytest.raises(CryptoError, match="not by another ciphertext"):
        c * c
    with pytest.raises(CryptoError, match="expected a PaillierCiphertext"):
        sk.decrypt(int(c.value))
    with pytest.raises(CryptoError, match="must be an integer"):
        c * 1.5


def test_bytes_round_trip_and_rejections(keys, other_keys):
    pk, sk = keys
    c = pk.encrypt(-99)
    data = c.to_bytes()
    assert len(data) == 12 + 128 and data[:3] == b"PFP"
    back = PaillierCiphertext.from_bytes(pk, data)
    assert back == c and sk.decrypt_signed(back) == -99
    for bad in (data[:-1], data + b"\x00", b"", data[:12]):
        with pytest.raises(CryptoError, match="bytes for this key"):
            PaillierCiphertext.from_bytes(pk, bad)
    with pytest.raises(CryptoError, match="bad header"):
        PaillierCiphertext.from_bytes(pk, b"XX" + data[2:])
    with pytest.raises(CryptoError, match="version"):
        PaillierCiphertext.from_bytes(pk, data[:3] + b"\x09" + data[4:])
    with pytest.raises(CryptoError, match="different public key"):
        PaillierCiphertext.from_bytes(other_keys[0], data)
    header = data[:12]
    for value in (0, int(pk.nsquare), 2 ** (8 * 128) - 1, int(sk.p)):
        with pytest.raises(CryptoError, match="outside|not a unit"):
            PaillierCiphertext.from_bytes(pk, header + value.to_bytes(128, "big"))
    with pytest.raises(CryptoError, match="must be bytes"):
        PaillierCiphertext.from_bytes(pk, "text")


# ---------------------------------------------------------------- keys and policy


def test_small_keys_need_the_explicit_test_switch():
    with pytest.raises(CryptoError, match="below 112-bit security"):
        generate_paillier_keypair(1024)
    pk, sk = generate_paillier_keypair(1024, insecure_test_params=True)
    assert pk.bits == 1024 and sk.p.bit_length() == sk.q.bit_length() == 512
    with pytest.raises(CryptoError, match="below 112-bit security"):
        PaillierPublicKey(pk.n)
    with pytest.raises(CryptoError, match="below 112-bit security"):
        PaillierPrivateKey.from_primes(sk.p, sk.q)
    with pytest.raises(CryptoError, match="even"):
        generate_paillier_keypair(2047)


def test_bad_moduli_and_primes_are_refused():
    for n in (2**20, 101, 97 * 97, 4):
        with pytest.raises(CryptoError):
            PaillierPublicKey(n, insecure_test_params=True)
    with pytest.raises(CryptoError, match="distinct primes"):
        PaillierPrivateKey.from_primes(15, 7, insecure_test_params=True)
    with pytest.raises(CryptoError, match="gcd"):
        PaillierPrivateKey.from_primes(3, 7, insecure_test_params=True)  # 3 | 7 − 1


def test_reprs_hide_the_secret_key(keys):
    pk, sk = keys
    for text in (repr(sk), str(sk), repr(pk), repr(pk.encrypt(5))):
        for secret in (sk.p, sk.q, sk.hp):
            assert str(int(secret)) not in text and f"{int(secret):x}" not in text
    assert repr(sk).startswith("PaillierPrivateKey(bits=512") and "secret" in repr(sk)


# ---------------------------------------------------------------- python-paillier interoperability


def _phe_keys(sk):
    phe_pk = phe.PaillierPublicKey(int(sk.public_key.n))
    return phe_pk, phe.PaillierPrivateKey(phe_pk, int(sk.p), int(sk.q))


@FAST
@given(data=st.data())
def test_phe_decrypts_ours_and_we_decrypt_phe(keys, data):
    pk, sk = keys
    phe_pk, phe_sk = _phe_keys(sk)
    n = int(pk.n)
    m = data.draw(st.one_of(st.sampled_from([0, 1, n - 1, n // 2]), st.integers(0, n - 1)))
    for ours in (pk.encrypt(m), sk.encrypt(m), pk.encrypt(m) * 3 + sk.encrypt(m)):
        assert phe_sk.raw_decrypt(int(ours.value)) in (m, 4 * m % n)
    assert phe_sk.raw_decrypt(int(pk.encrypt(m).value)) == m
    assert phe_sk.raw_decrypt(int(sk.encrypt(m).value)) == m
    theirs = pk.ciphertext(phe_pk.raw_encrypt(m))
    assert sk.decrypt(theirs) == m
    assert sk.decrypt(theirs + pk.encrypt(5)) == (m + 5) % n


def test_phe_signed_numbers_and_phe_generated_keys():
    phe_pk, phe_sk = phe.generate_paillier_keypair(n_length=512)
    sk = PaillierPrivateKey.from_primes(phe_sk.p, phe_sk.q, insecure_test_params=True)
    pk = sk.public_key
    for m in (-7, 0, 7, -(2**40)):
        theirs = phe_pk.encrypt(m)  # an int encodes at exponent 0: plaintext m mod N
        assert theirs.exponent == 0
        assert sk.decrypt_signed(pk.ciphertext(theirs.ciphertext())) == m
        ours = pk.encrypt(m)
        assert phe_sk.decrypt(phe.EncryptedNumber(phe_pk, int(ours.value))) == m


# ---------------------------------------------------------------- real sizes


@pytest.mark.realsize
def test_real_2048_bit_key_round_trip_and_phe_interop():
    pk, sk = generate_paillier_keypair()
    assert pk.bits == 2048 and pk.security_bits == 112 and sk.p.bit_length() == 1024
    phe_pk, phe_sk = _phe_keys(sk)
    m = 2**2000 + 12345
    c = sk.encrypt(m)
    assert phe_sk.raw_decrypt(int(c.value)) == m % int(pk.n)
    assert sk.decrypt(pk.ciphertext(phe_pk.raw_encrypt(12345))) == 12345
    assert sk.decrypt(pk.encrypt(-3) + c) == (m - 3) % int(pk.n)
    assert len(c.to_bytes()) == 12 + 512
