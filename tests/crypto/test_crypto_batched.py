"""Batched group arithmetic (``crypto.numbers``) and the batched Joye–Libert / Catalano–Fiore paths used by
im2020 (seed 000 §IV-B.3): each must equal the one-at-a-time reference exactly."""
from __future__ import annotations

import random
from collections import Counter

import gmpy2
import pytest
from gmpy2 import mpz

from privface.crypto import catalano_fiore as cf
from privface.crypto.joye_libert import JL_112, JLParams, JoyeLibertPrivateKey, generate_joye_libert_keypair
from privface.crypto.numbers import batch_invert, multiexp
from privface.crypto.paillier import generate_paillier_keypair
from privface.crypto.parallel import thread_map
from privface.errors import CryptoError

N = mpz(2**521 - 1) * mpz(2**607 - 1)


@pytest.mark.parametrize("window", [1, 3, 5, 8])
def test_multiexp_equals_the_product_of_powers(window):
    rng = random.Random(window)
    bases = [mpz(rng.randrange(2, int(N))) for _ in range(37)]
    exps = [rng.getrandbits(rng.choice([1, 7, 64, 137])) for _ in bases]
    exps[3] = 0
    ref = mpz(1)
    for b, e in zip(bases, exps):
        ref = ref * gmpy2.powmod(b, e, N) % N
    assert multiexp(bases, exps, N, window) == ref
    assert multiexp([], [], N) == 1 and multiexp(bases[:4], [0] * 4, N) == 1
    with pytest.raises(CryptoError):
        multiexp(bases[:2], [1], N)
    with pytest.raises(CryptoError):
        multiexp(bases[:1], [-1], N)


def test_batch_invert_and_threaded_powmod_keep_order():
    rng = random.Random(1)
    xs = [mpz(rng.randrange(2, int(N))) for _ in range(50)]
    assert all(x * y % N == 1 for x, y in zip(xs, batch_invert(xs, N)))
    with pytest.raises(CryptoError):
        batch_invert([mpz(2**521 - 1)], N)
    pm = thread_map(lambda c: gmpy2.powmod_base_list(c, 65537, N), xs, workers=3, chunk=7)
    assert pm == [gmpy2.powmod(x, 65537, N) for x in xs]
    assert thread_map(lambda c: [v + 1 for v in c], list(range(11)), 4) == list(range(1, 12))
    assert thread_map(lambda c: c, [], 2) == []


@pytest.mark.parametrize("params", [JLParams(256, 8), JLParams(512, 24), JLParams(512, 64), JL_112])
def test_joye_libert_batched_encryption_and_decryption(params):
    pk, sk = generate_joye_libert_keypair(params, insecure_test_params=True)
    rng = random.Random(params.k)
    ms = [0, 1, 2**params.k - 1, 2 ** (params.k - 1)] + [rng.getrandbits(params.k) for _ in range(20)]
    public = [pk.encrypt(m) for m in ms]
    assert sk.decrypt_many(public) == sk.decrypt_many(public, 1) == [sk.decrypt(c) for c in public] == ms
    sk.precompute(background=False)  # the larger tables where they apply: same logarithms
    assert sk._tables()[0] == {136: 17, 8: 8, 24: 8, 64: 8}[params.k]
    assert sk.decrypt_many(public) == ms
    owner = sk.encrypt_many(ms, workers=2)
    assert [sk.decrypt(c) for c in owner] == ms
    for c in owner:  # in J_N: what the receiving side's validation checks
        pk.ciphertext(int(c.value))


@pytest.mark.parametrize("p, q, k", [(17, 11, 4), (97, 7, 5)])
def test_owner_batched_encryption_is_uniform_on_the_ciphertext_coset(p, q, k):
    """encrypt_many replaces x^(2^k) mod q by ±x²: its outputs for m must be exactly C_m = {y^m·x^(2^k)}
    and hit every element of C_m about equally often (Def. 3)."""
    sk = JoyeLibertPrivateKey.from_primes(p, q, k, insecure_test_params=True)
    pk, n = sk.public_key, p * q
    units = [x for x in range(1, n) if gmpy2.gcd(x, n) == 1]
    for m in (0, 1, 3, 2**k - 1):
        coset = {int(pk.encrypt_with(m, x)) for x in units}
        draws = Counter(int(c.value) for c in sk.encrypt_many([m] * 40 * len(coset), workers=1))
        assert set(draws) == coset
        assert min(draws.values()) > 15 and max(draws.values()) < 75  # expected 40 each


@pytest.fixture(scope="module", params=["paillier", "joye-libert"])
def keys(request):
    if request.param == "paillier":
        return generate_paillier_keypair(512, insecure_test_params=True)
    return generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)


def test_esed_scaled_decrypts_like_cmult2_square_of_esed(keys):
    pk, sk = keys
    rng = random.Random(5)
    u = [rng.randrange(-128, 129) for _ in range(16)]
    v = [rng.randrange(-128, 129) for _ in range(16)]
    C, C2 = cf.encrypt_many(sk, u), cf.encrypt_many(pk, v)
    sed = sum((a - b) ** 2 for a, b in zip(u, v))
    for r in (1, 3, 2**61 + 1, rng.getrandbits(60) | 1):
        fast = cf.esed_scaled(C, C2, r, workers=2)
        ref = cf.cmult2_square(r, cf.esed(C, C2))
        assert cf.decrypt(sk, fast) == cf.decrypt(sk, ref) == r * r * sed % sk.message_space
        assert [cf.decrypt(sk, cf.Level1(0, b)) for b, _ in fast.columns] == \
            [cf.decrypt(sk, cf.Level1(0, b)) for b, _ in ref.columns]
        assert all(b2 is None for _, b2 in fast.columns)
        shifted = cf.esed_scaled(C, C2, r, plus=12345)
        assert cf.decrypt(sk, shifted) == (r * r * sed + 12345) % sk.message_space
    other_pk, _ = generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)
    with pytest.raises(CryptoError):
        cf.esed_scaled(C, cf.encrypt_many(other_pk, v), 3)


def test_decrypt_values_checks_every_received_value():
    """The key owner's in-thread checks refuse exactly what public validation refuses."""
    pk, sk = generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)
    ms = list(range(20))
    vals = [int(pk.encrypt(m).value) for m in ms]
    assert sk.decrypt_values(vals, workers=2) == ms
    n = int(pk.n)
    minus = next(x for x in range(2, 1000) if gmpy2.jacobi(x, n) == -1)
    for bad, why in ((0, "outside"), (n, "outside"), (int(sk.p), "not a unit"), (3 * int(sk.q), "not a unit"),
                     (minus, "Jacobi")):
        with pytest.raises(CryptoError, match=why):
            sk.decrypt_values(vals[:9] + [bad] + vals[9:], workers=2)
        with pytest.raises(CryptoError, match=why):
            pk.ciphertext(bad)
    sq = [int(pk.encrypt(m).value) for m in (3, 4)]
    assert cf.decrypt_received(sk, int(pk.encrypt(5).value), sq) == 5 + 9 + 16
    psk = generate_paillier_keypair(512, insecure_test_params=True)[1]  # no decrypt_values: the generic path
    ppk = psk.public_key
    assert cf.decrypt_received(psk, int(ppk.encrypt(5).value), [int(ppk.encrypt(3).value)]) == 14


def test_decryption_exponentiates_blinded_bases_only(monkeypatch):
    """The secret exponent p' never meets a ciphertext as received: every base of c^p' is c·x^(2^k) mod p for a
    fresh x (pooled first), and Legendre symbols mod q are taken of c·x² — yet the plaintexts come out right."""
    import privface.crypto.joye_libert as jl

    pk, sk = generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)
    cs = [int(pk.encrypt(m).value) for m in range(20)]
    seen, legendre = [], []
    real_pow, real_leg, real_powmod = gmpy2.powmod_base_list, gmpy2.legendre, gmpy2.powmod

    def spy_pow(bases, e, m):
        if e == sk.p_prime:
            seen.extend(int(b) for b in bases)
        return real_pow(bases, e, m)

    def spy_leg(a, m):
        legendre.append(int(a))
        return real_leg(a, m)

    monkeypatch.setattr(jl.gmpy2, "powmod_base_list", spy_pow)
    monkeypatch.setattr(jl.gmpy2, "legendre", spy_leg)
    sk.precompute_randomness(5)  # 5 pooled blinding factors, 15 fresh
    assert sk.decrypt_values(cs, workers=2) == list(range(20)) and len(sk._pool) == 0
    assert len(seen) == 20 and not {c % int(sk.p) for c in cs} & set(seen)
    assert len(legendre) == 20 and not {c % int(sk.q) for c in cs} & set(legendre)
    monkeypatch.setattr(jl.gmpy2, "powmod", lambda b, e, m: pytest.fail("unblinded powmod") if e == sk.p_prime
                        and int(b) in {c % int(sk.p) for c in cs} else real_powmod(b, e, m))
    assert sk.decrypt(pk.ciphertext(cs[7])) == 7


def test_precomputed_randomness_is_used_once_and_decrypts():
    pk, sk = generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)
    assert sk.precompute_randomness(10) == 10 and sk.precompute_randomness(10) == 0
    first = sk.encrypt_many([7] * 6)  # 6 from the pool
    second = sk.encrypt_many([7] * 6)  # 4 from the pool, 2 fresh
    assert len(sk._pool) == 0
    assert sk.decrypt_many(first + second) == [7] * 12
    assert len({int(c.value) for c in first + second}) == 12  # no randomness reused
    for p, q, k in [(17, 11, 4)]:  # the pooled path is uniform on C_m too (cf. the exhaustive test above)
        toy = JoyeLibertPrivateKey.from_primes(p, q, k, insecure_test_params=True)
        units = [x for x in range(1, p * q) if gmpy2.gcd(x, p * q) == 1]
        coset = {int(toy.public_key.encrypt_with(5, x)) for x in units}
        toy.precompute_randomness(400)
        draws = Counter(int(c.value) for c in toy.encrypt_many([5] * 400))
        assert set(draws) == coset and min(draws.values()) > 15
