"""cryptomask (seed 001) as two parties: Alg. 3 split per party (CS = OT sender, verifier = OT receiver) against
the frozen interleaved version, and the CS role over real loopback HTTP with the verifier as its client."""
import numpy as np
import pytest

import cm_reveal_interleaved as interleaved
from privface.crypto.exchange import Party
from privface.crypto.millionaire import Wire
from privface.errors import CryptoError
from privface.protocols.cryptomask.reveal import reveal, reveal_cs, reveal_verifier, setup_ot


def _shares(rng, d):
    d0 = rng.integers(0, 1 << 20, d.size)
    return d0, np.mod(d - d0, 1 << 20)


@pytest.mark.parametrize("m, batch", [(1, 1 << 15), (777, 1 << 15), (5000, 1 << 12), (5000, 64)])
def test_split_reveal_equals_interleaved_and_plaintext(m, batch):
    """Per-party Alg. 3: the same bit as the interleaved code and as plaintext [max d ≥ ts], and the same bytes
    per phase, for any batch size (a multiple of 64); a true and a false answer, and ts exactly at the maximum."""
    rng = np.random.default_rng(m + batch)
    d = rng.integers(-(1 << 18), 1 << 18, m)
    for ts in (int(d.max()), int(d.max()) + 1, int(np.median(d))):
        d0, d1 = _shares(rng, d)
        w_old, w_new = Wire(), Wire()
        old = interleaved.reveal(*setup_ot(Wire()), d0, d1, ts, w_old)
        new = reveal(*setup_ot(Wire()), d0, d1, ts, w_new, batch=batch)
        assert new == old == bool((d >= ts).any())
        assert dict(w_new.bytes) == dict(w_old.bytes)


def test_split_reveal_messages_are_checked_before_use():
    """A malformed message (wrong part count, wrong length, padding bits set) is refused and changes nothing:
    the same party then completes with the right message."""
    rng = np.random.default_rng(3)
    d = rng.integers(-1000, 1000, 300)
    d0, d1 = _shares(rng, d)
    S, R = setup_ot(Wire())
    v, cs = Party(reveal_verifier(R, d1, 500, Wire(), 64), "verifier"), Party(reveal_cs(S, d0, Wire(), 64), "CS")
    msg = v.start()
    cs.start()
    for bad in (msg[:-1], msg + [b""], [m[:-1] for m in msg]):
        with pytest.raises(CryptoError):
            cs.step(bad)
    while not v.done:
        reply = cs.step(msg)
        if cs.done:  # μ_0: one bit in one byte; a padding bit set is refused, then the real one is taken
            with pytest.raises(CryptoError):
                v.step([bytes([reply[0][0] | 2])])
            with pytest.raises(CryptoError):
                cs.step([])  # the CS has finished: nothing more is accepted
        msg = v.step(reply)
    assert v.result == bool((d >= 500).any()) and cs.done
