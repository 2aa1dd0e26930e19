"""Ferret's semi-honest correlated-OT extension (native/src/ferret.rs): byte for byte against the numpy oracle
written from the paper (tests/helpers/ferret_oracle.py) on the toy set, seeded by the real IKNP extension's
unhashed correlation; every output a COT (r_i = s_i ⊕ b_i·Δ) across iterations; the bytes per OT at EMP's
regular set."""
import numpy as np
import pytest

from privface.crypto.native import ext
from tests.helpers import ferret_oracle as oracle
from tests.helpers.otext_oracle import KAPPA


def params(name: str) -> dict:
    n, k, t, h, reserve, output, d_bytes, msg_bytes = ext.ferret_params(name)
    return dict(n=n, k=k, t=t, h=h, reserve=reserve, output=output, d_bytes=d_bytes, msg_bytes=msg_bytes)


def bootstrap(m: int, rng: np.random.Generator):
    """m COTs from IKNP without its hash: (Δ, s (m, 16); b (m,), r (m, 16))."""
    seeds0, seeds1, delta = rng.bytes(16 * KAPPA), rng.bytes(16 * KAPPA), rng.bytes(16)
    dbits = np.unpackbits(np.frombuffer(delta, np.uint8), bitorder="little")
    chosen = b"".join((seeds1 if dbits[j] else seeds0)[16 * j:16 * j + 16] for j in range(KAPPA))
    R, S = ext.IknpReceiver(seeds0, seeds1), ext.IknpSender(delta, chosen)
    R.correlated()
    S.correlated()
    b = rng.integers(0, 2, m, dtype=np.uint8)
    u, r = R.extend(b, 0)
    s, s1 = S.extend(u, m, 0)
    assert np.array_equal(s ^ s1, np.tile(np.frombuffer(delta, np.uint8), (m, 1)))
    return delta, s, b, r


def assert_cots(delta: bytes, s: np.ndarray, b: np.ndarray, r: np.ndarray) -> None:
    want = s ^ (b[:, None] * np.frombuffer(delta, np.uint8))
    assert s.shape == r.shape and len(b) == len(s)
    assert np.array_equal(r, want)


def pair(name: str, seed: int):
    p = params(name)
    rng = np.random.default_rng(seed)
    delta, s, b, r = bootstrap(p["reserve"], rng)
    lpn_seed, sseed, rseed = rng.bytes(16), rng.bytes(16), rng.bytes(16)
    S = ext.FerretSender(name, delta, s, lpn_seed, sseed)
    R = ext.FerretReceiver(name, b, r, lpn_seed, rseed)
    return p, (delta, s, b, r), (lpn_seed, sseed, rseed), S, R


@pytest.mark.parametrize("seed", [1, 2])
def test_ferret_equals_the_oracle_over_two_iterations(seed):
    p, (delta, s, b, r), (lpn_seed, sseed, rseed), S, R = pair("toy", seed)
    assert_cots(delta, s, b, r)  # IKNP's correlation before its hash
    t, h, k, res = p["t"], p["h"], p["k"], p["reserve"]
    for it in range(2):
        roots = oracle._ctr(sseed, 16 * t * it, 16 * t).reshape(t, 16)
        alpha = (oracle._ctr(rseed, 4 * t * it, 4 * t).view("<u4") & ((1 << h) - 1)).astype(np.int64)
        path_bits = (alpha[:, None] >> (h - 1 - np.arange(h))) & 1
        want_d = np.packbits(b[k:] ^ 1 ^ path_bits.reshape(-1).astype(np.uint8), bitorder="little").tobytes()
        d = R.start()
        assert d == want_d and len(d) == p["d_bytes"]
        msg, s_out = S.extend(d)
        omsg, ov = oracle.sender(p, delta, s, lpn_seed, roots, np.unpackbits(
            np.frombuffer(d, np.uint8), bitorder="little")[:t * h], ctr=t * h * it)
        assert msg == omsg and len(msg) == p["msg_bytes"]
        assert s_out.tobytes() == ov[res:].tobytes()
        b_out, r_out = R.finish(msg)
        oe, ow = oracle.receiver(p, b, r, lpn_seed, alpha, msg, ctr=t * h * it)
        assert b_out.tobytes() == oe[res:].tobytes() and r_out.tobytes() == ow[res:].tobytes()
        assert_cots(delta, s_out, b_out, r_out)
        s, b, r = ov[:res], oe[:res], ow[:res]  # the next iteration's reserve


def test_every_output_is_a_cot_and_the_choices_look_uniform():
    p, (delta, *_), _, S, R = pair("toy", 3)
    ones = total = 0
    for _ in range(4):
        msg, s_out = S.extend(R.start())
        b_out, r_out = R.finish(msg)
        assert_cots(delta, s_out, b_out, r_out)
        assert len(b_out) == p["output"]
        ones, total = ones + int(b_out.sum()), total + len(b_out)
    assert 0.4 < ones / total < 0.6  # LPN outputs, not the sparse noise
    # the other message is not the receiver's
    assert not (r_out == (s_out ^ ((1 - b_out)[:, None] * np.frombuffer(delta, np.uint8)))).all(axis=1).any()


def test_bad_inputs_are_refused():
    p, (delta, s, b, r), (lpn_seed, sseed, rseed), S, R = pair("toy", 4)
    with pytest.raises(ValueError, match="unknown parameter set"):
        ext.FerretSender("huge", delta, s, lpn_seed, sseed)
    with pytest.raises(ValueError, match="base COTs"):
        ext.FerretSender("toy", delta, s[:-1], lpn_seed, sseed)
    with pytest.raises(ValueError, match="base COTs"):
        ext.FerretReceiver("toy", b[:-1], r, lpn_seed, rseed)
    with pytest.raises(ValueError, match="16 bytes"):
        ext.FerretSender("toy", delta[:15], s, lpn_seed, sseed)
    with pytest.raises(ValueError, match="d must be"):
        S.extend(b"\0")
    with pytest.raises(ValueError, match="finish before start"):
        R.finish(bytes(p["msg_bytes"]))
    R.start()
    with pytest.raises(ValueError, match="message must be"):
        R.finish(b"\0" * 3)


@pytest.mark.slow
def test_regular_set_bytes_per_ot():
    """EMP's regular set: every output a COT, and under 0.06 B both ways per OT (0.45 bits)."""
    p, (delta, *_), _, S, R = pair("regular", 5)
    assert (p["n"], p["k"], p["t"], p["h"]) == (10_608_640, 589_824, 1295, 13)
    sent = 0
    for _ in range(2):
        d = R.start()
        msg, s_out = S.extend(d)
        b_out, r_out = R.finish(msg)
        sent += len(d) + len(msg)
        assert_cots(delta, s_out, b_out, r_out)
    assert sent / (2 * p["output"]) < 0.06
