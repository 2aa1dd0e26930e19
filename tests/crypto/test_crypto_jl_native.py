"""The native Joye–Libert discrete logarithm (native/src/jl.rs) against the pure-Python oracle
(tests/helpers/jl_oracle.py, the code joye_libert.py ran before) on random keys, leaf sizes and messages."""
import functools
import random

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto.joye_libert import JL_112, JLParams, generate_joye_libert_keypair
from privface.errors import CryptoError
from tests.helpers import jl_oracle

SHAPES = [JLParams(64, 8), JLParams(128, 20), JLParams(256, 40), JLParams(512, 64), JLParams(512, 120),
          JLParams(1024, 136, 384), JL_112]


@functools.cache
def key(i: int):
    return generate_joye_libert_keypair(SHAPES[i], insecure_test_params=True)[1]


@settings(max_examples=60, deadline=None)
@given(i=st.integers(0, len(SHAPES) - 1), data=st.data())
def test_native_dlog_equals_the_oracle(i, data):
    sk = key(i)
    k, p = sk.public_key.k, sk.p
    w = data.draw(st.integers(1, min(k, 12)))
    ms = data.draw(st.lists(st.integers(0, 2**k - 1), min_size=1, max_size=6)) + [0, 2**k - 1]
    hs = [gmpy2.powmod(sk._g, m, p) for m in ms]
    assert sk._dlog(hs, sk._build_tables(w)) == ms
    assert jl_oracle.dlog(hs, k, jl_oracle.build_tables(sk._g, p, k, w), p) == ms


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_native_decryption_equals_the_oracle_on_ciphertexts(seed):
    """Dec through c^p' and the native logarithm, at the real JL_112 size, equals the oracle's logarithm."""
    sk = key(len(SHAPES) - 1)
    pk, rng = sk.public_key, random.Random(seed)
    ms = [rng.getrandbits(pk.k) for _ in range(4)]
    cts = [pk.encrypt(m) for m in ms]
    hs = [gmpy2.powmod(sk._own(c), sk.p_prime, sk.p) for c in cts]
    w = sk._tables()[0]
    assert sk.decrypt_many(cts) == jl_oracle.dlog(hs, pk.k, jl_oracle.build_tables(sk._g, sk.p, pk.k, w), sk.p) == ms


def test_a_value_outside_the_group_is_a_crypto_error():
    sk = key(3)
    with pytest.raises(CryptoError):
        sk._dlog([0], sk._tables())
    with pytest.raises(CryptoError):
        sk._dlog([sk.p + 1], sk._tables())
