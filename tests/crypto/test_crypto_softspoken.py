"""SoftSpokenOT (native/src/softspoken.rs through privface.crypto.otext), the default OT extension of Alg. 3:
against the numpy oracle written from the paper (tests/helpers/softspoken_oracle.py) byte for byte, at the paper's
parameters (128/k bits of u per OT), through the real base OTs, and in the comparison protocol."""
import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from privface.crypto import millionaire, otext
from privface.crypto.exchange import Wire
from privface.crypto.native import ext
from privface.errors import CryptoError
from tests.helpers import softspoken_oracle as oracle

KAPPA = otext.KAPPA
seeds16 = st.binary(min_size=16, max_size=16)


def bits(data, n: int) -> np.ndarray:
    return np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.uint8)


def native_pair(k: int, roots: list[bytes], delta: bytes):
    """Native (sender, receiver) from the roots and Δ, the sender's base-OT outputs chosen by Δ's bits."""
    core_R, m0, m1 = ext.softspoken_receiver(k, b"".join(roots))
    dbits = np.unpackbits(np.frombuffer(delta, np.uint8), bitorder="little")
    got = b"".join((m1 if dbits[j] else m0)[16 * j:16 * j + 16] for j in range(KAPPA))
    return ext.IknpSender.softspoken(k, delta, got), core_R, (m0, m1)


@settings(max_examples=12, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data(), k=st.sampled_from([1, 2, 4, 8]),
       ms=st.lists(st.integers(1, 2600), min_size=1, max_size=3))
def test_softspoken_equals_the_oracle_across_calls(data, k, ms):
    """Base-OT messages, u and both sides' keys equal the oracle's for every k, over calls whose streams stop
    mid-block and whose m is no multiple of 8 or 64 (several extension tasks past 2048 OTs)."""
    roots = [data.draw(seeds16) for _ in range(KAPPA // k)]
    delta = data.draw(seeds16)
    S, R, (m0, m1) = native_pair(k, roots, delta)
    oR = oracle.SoftSpokenReceiver(k, roots)
    assert b"".join(a for a, _ in oR.pairs) == m0 and b"".join(b for _, b in oR.pairs) == m1
    _, leaves = oracle.base_messages(k, roots)
    oS = oracle.SoftSpokenSender(k, delta, leaves)
    counter = 0
    for m in ms:
        r = bits(data, m)
        u, kr = R.extend(r, counter)
        ou, okr = oR.extend(r)
        assert u.shape == ou.shape == (KAPPA // k, -(-m // 64) * 8)
        assert u.tobytes() == ou.tobytes() and kr.tobytes() == okr.tobytes()
        k0, k1 = S.extend(u, m, counter)
        ok0, ok1 = oS.extend(ou, m)
        assert k0.tobytes() == ok0.tobytes() and k1.tobytes() == ok1.tobytes()
        assert np.array_equal(np.where(r[:, None] == 1, k1, k0), kr)
        if any(delta):  # (Δ = 0, which hypothesis likes to draw, makes both keys equal, as in IKNP)
            assert not (np.where(r[:, None] == 1, k0, k1) == kr).all(axis=1).any()  # the other key is not R's
        counter += m


@pytest.mark.parametrize("k", [2, 4, 8])
def test_the_paper_s_communication_128_over_k_bits_per_ot(k):
    """Roy 2022, §1: κ/k bits of u per OT (IKNP: κ); the setup is κ base OTs either way."""
    S, R = otext.SoftSpokenSender(k), otext.SoftSpokenReceiver()
    I_S, I_R = otext.IKNPSender(), otext.IKNPReceiver()
    req, ireq = S.setup_request(), I_S.setup_request()
    resp, iresp = R.setup_response(req), I_R.setup_response(ireq)
    S.setup_finish(resp)
    I_S.setup_finish(iresp)
    tag = len(otext.SOFTSPOKEN_TAG) + 2
    assert (len(req) - tag, len(resp) - tag) == (len(ireq), len(iresp))
    m = 64 * 1000
    r = np.random.default_rng(k).integers(0, 2, m, dtype=np.uint8)
    u, kr = R.extend(r)
    assert u.nbytes * 8 == m * KAPPA // k == R.extend(r)[0].nbytes * 8
    assert I_R.extend(r)[0].nbytes == k * u.nbytes
    k0, k1 = S.extend(u, m)
    assert np.array_equal(np.where(r[:, None] == 1, k1, k0), kr)


def test_drelu_and_b2a_on_softspoken_are_correct():
    S, R = otext.SoftSpokenSender(), otext.SoftSpokenReceiver()
    S.setup_finish(R.setup_response(S.setup_request()))
    rng = np.random.default_rng(5)
    ell, m = 19, 3000
    z_S, z_R = (rng.integers(0, 1 << ell, m, dtype=np.uint64) for _ in range(2))
    w = Wire()
    b_S, b_R = millionaire.drelu_shares(S, R, z_S, z_R, ell, w, "compare")
    assert np.array_equal(b_S ^ b_R, (((z_S + z_R) % (1 << ell)) < (1 << (ell - 1))).astype(np.uint8))
    a_S, a_R = millionaire.b2a(S, R, b_S, b_R, w, "b2a")
    assert np.array_equal((a_S + a_R) & millionaire.MASK32, (b_S ^ b_R).astype(np.uint64))
    # the same protocol on IKNP: every byte equal but u, a quarter of IKNP's
    S_i, R_i = otext.IKNPSender(), otext.IKNPReceiver()
    S_i.setup_finish(R_i.setup_response(S_i.setup_request()))
    w_i = Wire()
    millionaire.b2a(S_i, R_i, *millionaire.drelu_shares(S_i, R_i, z_S, z_R, ell, w_i, "compare"), w_i, "b2a")
    sizes = millionaire._levels(len(millionaire._widths(ell - 1)), m)
    u_iknp = sum(millionaire.u_part(n).nbytes for n in [m * (ell - 1)] + [2 * n for n in sizes])
    assert w_i.bytes["compare"] - w.bytes["compare"] == u_iknp * 3 // 4
    assert w_i.bytes["b2a"] - w.bytes["b2a"] == millionaire.u_part(m).nbytes * 3 // 4
    assert w.bytes["compare"] / m < 132  # ≈ 131 B per entry (IKNP: 467)


def test_setup_names_the_variant_and_refuses_another():
    """An IKNP request (privface before SoftSpokenOT), another version or k, a mismatched response: clear errors
    at setup, never wrong bits later."""
    S, R = otext.SoftSpokenSender(4), otext.SoftSpokenReceiver()
    req = S.setup_request()
    assert req.startswith(otext.SOFTSPOKEN_TAG + bytes([otext.SOFTSPOKEN_VERSION, 4]))
    with pytest.raises(CryptoError, match="another OT extension"):
        otext.SoftSpokenReceiver().setup_response(otext.IKNPSender().setup_request())
    n = len(otext.SOFTSPOKEN_TAG)
    with pytest.raises(CryptoError, match="version 2"):
        R.setup_response(req[:n] + bytes([2]) + req[n + 1:])
    with pytest.raises(CryptoError, match="k = 3"):
        R.setup_response(req[:n + 1] + bytes([3]) + req[n + 2:])
    resp8 = otext.SoftSpokenReceiver().setup_response(otext.SoftSpokenSender(8).setup_request())
    with pytest.raises(CryptoError, match="k = 8, not 4"):
        S.setup_finish(resp8)
    with pytest.raises(CryptoError):
        otext.SoftSpokenReceiver().extend(np.zeros(8, np.uint8))  # no setup yet
    with pytest.raises(CryptoError):
        otext.SoftSpokenSender(3)
    with pytest.raises(ValueError):
        ext.softspoken_receiver(4, bytes(16))
    with pytest.raises(ValueError):
        ext.IknpSender.softspoken(4, bytes(16), bytes(16 * (KAPPA - 1)))
    S.setup_finish(R.setup_response(req))
    u, _ = R.extend(np.ones(100, np.uint8))
    with pytest.raises(CryptoError):
        S.extend(np.zeros((KAPPA, u.shape[1]), np.uint8), 100)  # an IKNP-sized u
