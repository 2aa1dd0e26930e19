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
    n, k, t, h, reserve, output, msg_bytes = ext.ferret_params(name)
    return dict(n=n, k=k, t=t, h=h, reserve=reserve, output=output, msg_bytes=msg_bytes)


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
    lpn_seed, sseed = rng.bytes(16), rng.bytes(16)
    S = ext.FerretSender(name, delta, s, lpn_seed, sseed)
    R = ext.FerretReceiver(name, b, r, lpn_seed)
    return p, (delta, s, b, r), (lpn_seed, sseed), S, R


@pytest.mark.parametrize("seed", [1, 2])
def test_ferret_equals_the_oracle_over_two_iterations(seed):
    p, (delta, s, b, r), (lpn_seed, sseed), S, R = pair("toy", seed)
    assert_cots(delta, s, b, r)  # IKNP's correlation before its hash
    t, h, res = p["t"], p["h"], p["reserve"]
    for it in range(2):
        roots = oracle._ctr(sseed, 16 * t * it, 16 * t).reshape(t, 16)
        msg, s_out = S.extend()
        omsg, ov = oracle.sender(p, delta, s, lpn_seed, roots, ctr=t * h * it)
        assert msg == omsg and len(msg) == p["msg_bytes"] == t * (32 * h + 16)
        assert s_out.tobytes() == ov[res:].tobytes()
        b_out, r_out = R.extend(msg)
        oe, ow = oracle.receiver(p, b, r, lpn_seed, msg, ctr=t * h * it)
        assert sorted(np.flatnonzero(oe ^ oracle.neighbour_bits(p, b, lpn_seed))) == sorted(
            np.arange(t) * (1 << h) + oracle.points(p, b))  # one noise bit per tree, at the point
        assert b_out.tobytes() == oe[res:].tobytes() and r_out.tobytes() == ow[res:].tobytes()
        assert_cots(delta, s_out, b_out, r_out)
        s, b, r = ov[:res], oe[:res], ow[:res]  # the next iteration's reserve


def test_every_output_is_a_cot_and_the_choices_look_uniform():
    p, (delta, *_), _, S, R = pair("toy", 3)
    ones = total = 0
    for _ in range(4):
        msg, s_out = S.extend()
        b_out, r_out = R.extend(msg)
        assert_cots(delta, s_out, b_out, r_out)
        assert len(b_out) == p["output"]
        ones, total = ones + int(b_out.sum()), total + len(b_out)
    assert 0.4 < ones / total < 0.6  # LPN outputs, not the sparse noise
    # the other message is not the receiver's
    assert not (r_out == (s_out ^ ((1 - b_out)[:, None] * np.frombuffer(delta, np.uint8)))).all(axis=1).any()


def test_bad_inputs_are_refused():
    p, (delta, s, b, r), (lpn_seed, sseed), S, R = pair("toy", 4)
    with pytest.raises(ValueError, match="unknown parameter set"):
        ext.FerretSender("huge", delta, s, lpn_seed, sseed)
    with pytest.raises(ValueError, match="base COTs"):
        ext.FerretSender("toy", delta, s[:-1], lpn_seed, sseed)
    with pytest.raises(ValueError, match="base COTs"):
        ext.FerretReceiver("toy", b[:-1], r, lpn_seed)
    with pytest.raises(ValueError, match="16 bytes"):
        ext.FerretSender("toy", delta[:15], s, lpn_seed, sseed)
    with pytest.raises(ValueError, match="message must be"):
        R.extend(b"\0" * 3)


@pytest.mark.slow
def test_regular_set_bytes_per_ot():
    """EMP's regular set: every output a COT, and under 0.06 B both ways per OT (0.45 bits)."""
    p, (delta, *_), _, S, R = pair("regular", 5)
    assert (p["n"], p["k"], p["t"], p["h"]) == (10_608_640, 589_824, 1295, 13)
    sent = 0
    for _ in range(2):
        msg, s_out = S.extend()
        b_out, r_out = R.extend(msg)
        sent += len(msg)
        assert_cots(delta, s_out, b_out, r_out)
    assert sent / (2 * p["output"]) < 0.06


def test_pool_buffer_keeps_order_across_takes_rooms_and_growth():
    """``crypto.ferret``'s pool (buffers, views out, ``room`` compacting): every COT's keys come out once, in the order
    the refills put them in, with its own choice bit and consecutive tweaks, whether the buffers were sized first
    (``room``) or grow on ``add``; keys and bits of different lengths and more than it holds are refused."""
    from privface.crypto.ferret import TWEAK_BASE, _Pool
    from privface.errors import CryptoError

    rng = np.random.default_rng(4)
    pool, keys, bits, got_keys, got_bits = _Pool(with_bits=True, keys=1), [], [], [], []
    for step in range(12):
        n = int(rng.integers(1, 50))
        k4 = rng.integers(0, 256, (n, 4), dtype=np.uint8)
        b = rng.integers(0, 2, n, dtype=np.uint8)
        if step % 3 == 0:
            pool.room(pool.available + n)  # sized first (compacts), else ``add`` grows the buffers
        with pytest.raises(CryptoError, match="differ"):
            pool.add((k4[1:],), b)
        pool.add((k4,), b)
        keys.append(k4)
        bits.append(b)
        k = int(rng.integers(0, pool.available + 1))
        first = pool.counter
        (out_k,), out_b, tweak = pool.take(k, "receiver")
        assert tweak == first and pool.counter == first + k
        got_keys.append(out_k.copy())  # views: copied before the next room/add may move them
        got_bits.append(out_b.copy())
    (k4,), b, _ = pool.take(pool.available, "receiver")
    got_keys.append(k4)
    got_bits.append(b)
    assert np.array_equal(np.concatenate(got_keys), np.concatenate(keys))
    assert np.array_equal(np.concatenate(got_bits), np.concatenate(bits))
    assert pool.counter == TWEAK_BASE + sum(len(x) for x in keys) and pool.available == 0
    with pytest.raises(CryptoError, match="refill first"):
        pool.take(1, "receiver")
    with pytest.raises(CryptoError, match="differ"):
        pool.add((keys[0],))  # a receiver's refill without its choice bits


class _Tap:
    """A Ferret core whose outputs the test also keeps (the pools keep only the hashed keys)."""

    def __init__(self, core) -> None:
        self.core, self.out = core, []

    def extend(self, *args):
        res = self.core.extend(*args)
        self.out.append(res)
        return res


def test_keys_hashed_ahead_are_the_random_ots_of_the_cots_refilled():
    """The pools hand out what hashing Ferret's COTs with their tweaks gives (``cot_rot_send``/``recv``, the first
    ``KEY_BYTES``), R holding the key of its choice bit, H(j, r_j) = H(j, s_j ⊕ b_j·Δ), not the other; the COTs
    themselves are Ferret's correlation r_j = s_j ⊕ b_j·Δ."""
    from privface.crypto import ferret
    from privface.crypto.native import ext

    S, R, _ = ferret.setup_pair("toy")
    S._core, R._core = _Tap(S._core), _Tap(R._core)
    first = S.counter
    ferret.ensure(S, R, 3000)
    s = np.concatenate([np.asarray(o[1]) for o in S._core.out])
    b = np.concatenate([np.asarray(o[0]) for o in R._core.out])
    r = np.concatenate([np.asarray(o[1]) for o in R._core.out])
    assert np.array_equal(r, s ^ (b[:, None] * np.frombuffer(S.delta, np.uint8)))
    k0, k1, got = S.take(len(s))
    bits, kr, got_r = R.take(len(s))
    assert got == got_r == first and np.array_equal(bits, b)
    want0, want1 = ext.cot_rot_send(s, S.delta, np.zeros(0, np.uint8), first, ferret.KEY_BYTES)
    assert np.array_equal(k0, want0) and np.array_equal(k1, want1)
    assert np.array_equal(kr, ext.cot_rot_recv(r, first, ferret.KEY_BYTES))
    assert np.array_equal(kr, np.where(b[:, None] == 1, k1, k0))
    assert np.mean(np.all(kr == np.where(b[:, None] == 1, k0, k1), axis=1)) < 0.01
