"""Alg. 3 on Ferret's silent correlated OTs (crypto/ferret.py, native/src/cot.rs): the COTs hashed into random OTs
hold the receiver's key and not the other; comparisons, DReLU, B2A and the whole of Alg. 3 equal the plaintext and
the SoftSpokenOT path on random inputs; malformed setup and refill messages and short pools are refused with clear
errors before anything is used."""
import numpy as np
import pytest

from privface.crypto import ferret
from privface.crypto.exchange import Chan, Part, Party, Wire
from privface.crypto.millionaire import MASK32, b2a, b2a_S, drelu_shares, millionaire, random_bits
from privface.crypto.native import ext
from privface.errors import CryptoError, ProtocolError
from privface.protocols.cryptomask import CryptoMask
from privface.protocols.cryptomask.reveal import ots_needed, refill, reveal, setup_ot


@pytest.fixture(scope="module")
def toy_pair():
    S, R, _ = ferret.setup_pair("toy")
    return S, R


def test_hashed_cots_are_random_ots_and_a_correction_bit_chooses():
    S, R, _ = ferret.setup_pair("toy")
    msg, s = S._core.extend()  # one Ferret iteration, straight from the cores (the pools keep only hashed keys)
    b, r = R._core.extend(bytes(msg))
    s, b, r, first = np.asarray(s), np.asarray(b), np.asarray(r), ferret.TWEAK_BASE
    assert len(s) == len(b) == len(r) == ferret.params("toy")["output"]
    delta = np.frombuffer(S.delta, np.uint8)
    assert np.array_equal(r, s ^ (b[:, None] * delta))  # the COT correlation Ferret hands out
    kr = ext.cot_rot_recv(r, first, 16)
    k0, k1 = ext.cot_rot_send(s, S.delta, np.zeros(0, np.uint8), first, 16)
    assert np.array_equal(np.where(b[:, None] == 1, k1, k0), kr)
    assert not np.any(np.all(np.where(b[:, None] == 1, k0, k1) == kr, axis=1))
    c = random_bits(len(s))
    c0, c1 = ext.cot_rot_send(s, S.delta, np.packbits(c ^ b, bitorder="little"), first, 4)
    assert np.array_equal(np.where(c[:, None] == 1, c1, c0), kr[:, :4])
    with pytest.raises(ValueError, match="corrections"):
        ext.cot_rot_send(s, S.delta, np.zeros(3, np.uint8), first, 4)
    with pytest.raises(ValueError, match="Δ"):
        ext.cot_rot_send(s, S.delta[:15], np.zeros(0, np.uint8), first, 4)


@pytest.mark.parametrize("ell", [1, 3, 4, 5, 9, 13, 17, 19, 31])
def test_comparison_drelu_and_b2a_on_ferret_equal_plaintext(toy_pair, ell):
    S, R = toy_pair
    rng, wire, m = np.random.default_rng(ell), Wire(), 2000
    y, x = rng.integers(0, 1 << ell, m).astype(np.uint64), rng.integers(0, 1 << ell, m).astype(np.uint64)
    x[:50], x[50], y[50], x[51], y[51] = y[:50], 0, 0, (1 << ell) - 1, (1 << ell) - 1
    ferret.ensure(S, R, 4 * m * (ell + 12))
    a, b = millionaire(S, R, y, x, ell, wire, "p")
    assert np.array_equal(a ^ b, (x < y).astype(np.uint8))
    zS = rng.integers(0, 1 << (ell + 1), m).astype(np.uint64)
    zR = rng.integers(0, 1 << (ell + 1), m).astype(np.uint64)
    a, b = drelu_shares(S, R, zS, zR, ell + 1, wire, "p")
    assert np.array_equal(a ^ b, (((zS + zR) % (1 << (ell + 1))) < (1 << ell)).astype(np.uint8))
    bs, br = random_bits(m), random_bits(m)
    A, B = b2a(S, R, bs, br, wire, "p")
    assert np.array_equal((A + B) & MASK32, (bs ^ br).astype(np.uint64))
    # R's first message of a comparison is one correction bit per leaf OT: no extension matrix
    assert wire.bytes["p"] < m * (4 * (1 << 4) + 2 * ell)


def _gallery(rng, n):
    d = rng.integers(-(1 << 16), 1 << 16, n)
    d0 = rng.integers(0, 1 << 20, n)
    return d, d0, np.mod(d - d0, 1 << 20)


@pytest.mark.parametrize("params", ["toy", pytest.param("regular", marks=pytest.mark.slow)])
def test_alg3_on_ferret_equals_softspoken_and_plaintext(params):
    rng = np.random.default_rng(3)
    ferret_ot, soft_ot = setup_ot(Wire(), "ferret", ferret_params=params), setup_ot(Wire(), "softspoken")
    for n in (1, 63, 700, 2500):
        d, d0, d1 = _gallery(rng, n)
        for ts in (int(d.max()), int(d.max()) + 1, int(np.median(d))):  # match at the edge, none, many
            got = [reveal(*ot, d0, d1, ts, w, None) for ot, w in ((ferret_ot, Wire()), (soft_ot, Wire()))]
            assert got[0] == got[1] == bool((d >= ts).any())
    w = Wire()
    d, d0, d1 = _gallery(rng, 4096)
    assert refill(ferret_ot, 4096, None) >= 0  # between identifications: the run below takes from the pools
    before = ferret_ot[0].available
    reveal(*ferret_ot, d0, d1, 0, w, None)
    assert before - ferret_ot[0].available == ots_needed(4096, None) and "ot_refill" not in w.bytes
    assert w.bytes["compare"] / 4096 < 22 and w.bytes["b2a"] / 4096 < 4.2  # vs ≈ 131 B and 8 B per entry


def test_malformed_ferret_messages_are_refused():
    S, R = ferret.FerretSender("toy"), ferret.FerretReceiver()
    req = S.setup_request()
    with pytest.raises(CryptoError, match="names no Ferret version"):
        R.setup_response(req[3:])
    with pytest.raises(CryptoError, match="version 9"):
        R.setup_response(ferret.FERRET_TAG + bytes([9, 1]) + req[len(ferret.FERRET_TAG) + 2:])
    with pytest.raises(CryptoError, match="no LPN seed"):
        R.setup_response(req[:len(ferret.FERRET_TAG) + 2 + 5])
    resp = R.setup_response(req)
    with pytest.raises(CryptoError, match="bytes of u"):
        S.setup_finish(resp[:len(ferret.FERRET_TAG) + 2 + 10])
    with pytest.raises(CryptoError, match="not 'regular'"):
        ferret.FerretSender("regular").setup_finish(resp)
    with pytest.raises(CryptoError, match="setup first"):
        ferret.FerretSender("toy").refill()
    S.setup_finish(resp)
    msg = S.refill()
    assert len(msg) == ferret.params("toy")["msg_bytes"]
    for bad in (msg[:-1], msg + b"\0", b""):
        with pytest.raises(CryptoError, match="must be .* bytes"):
            R.absorb(bad)
    R.absorb(msg)
    assert R.available == S.available
    with pytest.raises(CryptoError, match="refill first"):
        S.take(S.available + 1)
    with pytest.raises(CryptoError, match="parameter set"):
        ferret.FerretSender("huge")
    # a correction message of the wrong length is refused by the exchange before the pool is touched
    party = Party(b2a_S(S, random_bits(100), Chan(Wire()), "b2a"), "CS")
    party.start()
    assert list(party.expect) == [Part(13, 100)]
    left = S.available
    with pytest.raises(CryptoError):
        party.step([np.zeros(12, np.uint8)])
    assert S.available == left


def test_cryptomask_defaults_to_ferret_and_agrees_with_softspoken():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((400, 128))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    probe = x[5] + 0.3 * rng.standard_normal(128) / np.sqrt(128)
    stranger = rng.standard_normal(128)
    cms = [CryptoMask(128, tau=0.5, insecure_test_params=True, ot=ot) for ot in ("ferret", "softspoken", "iknp")]
    assert cms[0].ot == "ferret" and CryptoMask.__init__.__kwdefaults__["ot"] == "ferret"
    for cm in cms:
        cm.enrol(x)
    for b in (probe / np.linalg.norm(probe), stranger / np.linalg.norm(stranger)):
        runs = [cm.identify(b) for cm in cms]
        assert len({r.match for r in runs}) == 1
        assert runs[0].bytes["compare"] < runs[1].bytes["compare"] / 5 and runs[0].bytes["ot_refill"] > 0
        assert runs[0].rounds == runs[1].rounds
    with pytest.raises(ProtocolError, match="ot must be"):
        CryptoMask(128, insecure_test_params=True, ot="silent")
