"""The MODP groups' fixed-base exponentiations (``OTGroup.base``, ``power_many``) and threaded ``powers``
equal plain powmod, for every exponent size the OT uses and beyond."""
import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto.ot import EXPONENT_BITS, MODP_2048, MODP_3072, OTGroup
from privface.errors import CryptoError

exponents = st.one_of(st.integers(0, 2**EXPONENT_BITS - 1), st.sampled_from([0, 1, 2**EXPONENT_BITS - 1]),
                      st.integers(2**EXPONENT_BITS, 2**(EXPONENT_BITS + 40)))


@settings(max_examples=40, deadline=None)
@given(group=st.sampled_from([MODP_2048, MODP_3072]), ks=st.lists(exponents, min_size=1, max_size=20),
       y_exp=st.integers(1, 2**64))
def test_fixed_base_exponentiation_equals_powmod(group: OTGroup, ks, y_exp):
    p = group.p
    assert [group.base(k) for k in ks] == [gmpy2.powmod(group.g, k, p) for k in ks]
    y = gmpy2.powmod(group.g, y_exp, p)
    assert group.power_many(y, ks) == [gmpy2.powmod(y, k, p) for k in ks]
    ys = [gmpy2.powmod(y, i + 2, p) for i in range(len(ks))]
    assert group.powers(ys, ks[0], "y") == [gmpy2.powmod(v, ks[0], p) for v in ys]


def test_powers_still_checks_membership():
    with pytest.raises(CryptoError, match="y_1"):
        MODP_2048.powers([MODP_2048.g, MODP_2048.p - 1], 3, "y")
