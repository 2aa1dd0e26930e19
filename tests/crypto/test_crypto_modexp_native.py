"""The native exponentiation modulo N (native/src/modexp.rs) against gmpy2 and numbers.py's Pippenger
``multiexp`` (the code esed_scaled ran before, kept as the oracle), at toy sizes and at the JL_112 modulus size."""
import secrets

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto.native import ext
from privface.crypto.numbers import multiexp


def _odd(bits: int, rnd) -> int:
    return rnd.getrandbits(bits) | (1 << (bits - 1)) | 1


def _pack(values, width: int) -> bytes:
    return b"".join(int(v).to_bytes(width, "big") for v in values)


def _unpack(data: bytes, width: int) -> list[int]:
    return [int.from_bytes(data[i:i + width], "big") for i in range(0, len(data), width)]


@settings(max_examples=60, deadline=None)
@given(bits=st.sampled_from([3, 17, 64, 65, 521, 2048, 3072]), data=st.data())
def test_pow_many_and_multiexp_equal_gmpy2(bits, data):
    rnd = data.draw(st.randoms(use_true_random=False))
    n = _odd(bits, rnd)
    mod = ext.MontModulus(n.to_bytes((bits + 7) // 8, "big"))
    size = mod.size
    count = data.draw(st.integers(1, 40))
    bases = [rnd.randrange(n) for _ in range(count)]
    e_bits = data.draw(st.integers(1, 300))
    exps = [rnd.getrandbits(e_bits) for _ in range(count)]
    exps[0] = data.draw(st.sampled_from([0, 1, exps[0]]))
    e_bytes = (e_bits + 7) // 8
    r = exps[-1]
    got = _unpack(mod.pow_many(_pack(bases, size), r.to_bytes(max(1, e_bytes), "big")), size)
    assert got == [int(gmpy2.powmod(b, r, n)) for b in bases]
    window = data.draw(st.sampled_from([0, 1, 4, 5, 8]))
    got = int.from_bytes(mod.multiexp(_pack(bases, size), _pack(exps, e_bytes), e_bytes, window), "big")
    assert got == int(multiexp(bases, exps, n, window=window or None)) == _product(bases, exps, n)


def _product(bases, exps, n) -> int:
    acc = 1
    for b, e in zip(bases, exps):
        acc = acc * pow(b, e, n) % n
    return acc


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="odd"):
        ext.MontModulus((1 << 64).to_bytes(9, "big"))
    n = (1 << 127) - 1
    mod = ext.MontModulus(n.to_bytes(16, "big"))
    with pytest.raises(ValueError, match="below the modulus"):
        mod.pow_many(n.to_bytes(16, "big"), b"\x03")
    with pytest.raises(ValueError, match="16 bytes each"):
        mod.pow_many(b"\x01" * 15, b"\x03")
    with pytest.raises(ValueError, match="as many exponents"):
        mod.multiexp(secrets.token_bytes(15).rjust(16, b"\0"), b"\x01\x02", 1)
