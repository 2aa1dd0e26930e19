"""Catalano–Fiore transform and HE′ (seed 000 §II-C, §IV-A) over Paillier and Joye–Libert (toy keys):
every operation against plaintext arithmetic, ESED = SED, and the number of base decryptions counted
through an instrumented wrapper around the base private key."""
from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto import catalano_fiore as cf
from privface.crypto.joye_libert import JLParams, generate_joye_libert_keypair
from privface.crypto.lhe import LHECiphertext, LHEPrivateKey, LHEPublicKey
from privface.crypto.paillier import generate_paillier_keypair
from privface.errors import CryptoError

FAST = settings(max_examples=25, deadline=None)


@pytest.fixture(scope="module", params=["paillier", "joye-libert"])
def keys(request):
    if request.param == "paillier":
        return generate_paillier_keypair(512, insecure_test_params=True)
    return generate_joye_libert_keypair(JLParams(512, 64), insecure_test_params=True)


class CountingKey:
    """The base private key, counting its decryptions (thread-safe: level-2 decryption is parallel)."""

    def __init__(self, sk):
        self.sk, self.count, self._lock = sk, 0, threading.Lock()

    @property
    def public_key(self):
        return self.sk.public_key

    @property
    def message_space(self):
        return self.sk.message_space

    def encrypt(self, m):
        return self.sk.encrypt(m)

    def decrypt(self, c):
        with self._lock:
            self.count += 1
        return self.sk.decrypt(c)


values = st.one_of(st.sampled_from([0, 1, -1, 128, -128, 2**62, -(2**62)]), st.integers(-(2**62), 2**62))


def test_both_base_schemes_implement_the_lhe_interface(keys):
    pk, sk = keys
    assert isinstance(pk, LHEPublicKey) and isinstance(sk, LHEPrivateKey)
    assert isinstance(pk.encrypt(1), LHECiphertext) and isinstance(sk.encrypt(1), LHECiphertext)
    assert not isinstance(5, LHECiphertext)


@FAST
@given(data=st.data())
def test_level1_operations(keys, data):
    pk, sk = keys
    M = pk.message_space
    x, y, c = data.draw(values), data.draw(values), data.draw(values)
    cx, cy = cf.encrypt(pk, x), cf.encrypt(sk, y)
    assert cf.decrypt(sk, cx, signed=True) == x and cf.decrypt(sk, cy) == y % M
    assert cf.decrypt(sk, cf.add1(cx, cy)) == (x + y) % M == cf.decrypt(sk, cx + cy)
    assert cf.decrypt(sk, cx - cy) == (x - y) % M
    assert cf.decrypt(sk, -cx) == -x % M
    assert cf.decrypt(sk, cx + c) == (x + c) % M and cf.decrypt(sk, c - cx) == (c - x) % M
    assert cf.decrypt(sk, cf.cmult1(c, cx)) == c * x % M == cf.decrypt(sk, c * cx)


@FAST
@given(data=st.data())
def test_level2_operations(keys, data):
    pk, sk = keys
    M = pk.message_space
    x, y, z, c = (data.draw(values) for _ in range(4))
    cx, cy, cz = cf.encrypt(pk, x), cf.encrypt(pk, y), cf.encrypt(sk, z)
    prod, sq = cf.mult(cx, cy), cf.square(cz)
    assert cf.decrypt(sk, prod) == x * y % M
    assert cf.decrypt(sk, sq) == z * z % M
    total = cf.add2(prod, sq)
    assert cf.decrypt(sk, total) == (x * y + z * z) % M == cf.decrypt(sk, prod + sq)
    assert cf.decrypt(sk, cf.cmult2(c, total)) == c * (x * y + z * z) % M == cf.decrypt(sk, c * total)
    assert cf.decrypt(sk, cf.cmult2_square(c, total)) == c * c * (x * y + z * z) % M
    assert cf.decrypt(sk, cf.add2(total, cf.to_level2(cx))) == (x * y + z * z + x) % M
    assert cf.decrypt(sk, cf.mult(cx, cx), signed=True) == x * x % M - (M if x * x % M > M // 2 else 0)


def test_square_columns_keep_one_decryption_and_cmult2_turns_them_into_products(keys):
    pk, sk = keys
    sq = cf.square(cf.encrypt(pk, 5))
    assert sq.columns[0][1] is None and sq.base_decryptions == 2
    assert cf.cmult2(3, sq).base_decryptions == 3 and cf.cmult2_square(3, sq).base_decryptions == 2
    assert cf.mult(cf.encrypt(pk, 5), cf.encrypt(pk, 6)).base_decryptions == 3


def _vectors(pk, sk, k, rng):
    u = [rng.randrange(-128, 129) for _ in range(k)]
    v = [rng.randrange(-128, 129) for _ in range(k)]
    return u, v, [cf.encrypt(sk, a) for a in u], [cf.encrypt(pk, b) for b in v]


@pytest.mark.parametrize("k", [1, 2, 16])
def test_esed_and_original_sed_equal_the_plaintext_sed(keys, k):
    import random

    pk, sk = keys
    u, v, C, C2 = _vectors(pk, sk, k, random.Random(k))
    sed = sum((a - b) ** 2 for a, b in zip(u, v))
    assert cf.decrypt(sk, cf.esed(C, C2)) == sed
    assert cf.decrypt(sk, cf.sed_original(C, C2), workers=1) == sed
    assert cf.decrypt(sk, cf.esed(C, C)) == 0
    worst = [cf.encrypt(pk, 128)] * k, [cf.encrypt(pk, -128)] * k
    assert cf.decrypt(sk, cf.esed(*worst)) == k * 256**2


def test_k128_esed_needs_k_plus_1_base_decryptions_and_the_original_2k_plus_1(keys):
    """Seed 000 §IV-A: eq. (2) decrypts the ESED of 128-D vectors with 129 Dec^, eq. (1) with 257."""
    import random

    pk, sk = keys
    k = 128
    u, v, C, C2 = _vectors(pk, sk, k, random.Random(7))
    sed = sum((a - b) ** 2 for a, b in zip(u, v))
    improved, original = cf.esed(C, C2), cf.sed_original(C, C2)
    for ciphertext, expected in ((improved, k + 1), (original, 2 * k + 1)):
        for workers in (1, 2):
            counter = CountingKey(sk)
            assert cf.decrypt(counter, ciphertext, workers=workers) == sed
            assert counter.count == expected == ciphertext.base_decryptions


def test_parallel_and_serial_decryption_agree(keys):
    import random

    pk, sk = keys
    u, v, C, C2 = _vectors(pk, sk, 40, random.Random(3))
    s = cf.esed(C, C2)
    assert cf.decrypt(sk, s, workers=1) == cf.decrypt(sk, s, workers=4) == cf.decrypt(sk, s)
    with pytest.raises(CryptoError, match="workers"):
        cf.decrypt(sk, s, workers=0)


def test_misuse_is_refused(keys):
    pk, sk = keys
    other_pk, other_sk = generate_paillier_keypair(512, insecure_test_params=True)
    c, d = cf.encrypt(pk, 1), cf.encrypt(other_pk, 1)
    with pytest.raises(CryptoError, match="different public keys|cannot add"):
        c + d
    with pytest.raises(CryptoError, match="same public key"):
        cf.add2(cf.square(c), cf.Level2(cf.square(c).alpha, cf.square(d).columns))
    with pytest.raises(CryptoError, match="equal length"):
        cf.esed([c, c], [c])
    with pytest.raises(CryptoError, match="non-empty"):
        cf.esed([], [])
    with pytest.raises(CryptoError, match="two level-1"):
        cf.mult(c, cf.square(c))
    with pytest.raises(CryptoError, match="to_level2"):
        c + cf.square(c)
    with pytest.raises(CryptoError, match="level-1 or level-2"):
        cf.decrypt(sk, c.beta)
    with pytest.raises(CryptoError, match="base-scheme ciphertext"):
        cf.Level1(3, 5)
    with pytest.raises(CryptoError, match="different public key|expected a"):
        cf.decrypt(other_sk, c)
