"""Secure result revealing (seed 001 Alg. 3) between the CS (OT sender, P_0) and the verifier (P_1).

Input: additive shares d = d_0 + d_1 (mod t = 2^20) of every inner product, the verifier's threshold ts.

1. Lines 2–3, per entry: [d ≥ ts]. The paper writes SC_lt(ts − d_1, d_0); over Z_{2^20} the two shares wrap,
   so the comparison is the sign of z = d − ts (z_0 = d_0, z_1 = d_1 − ts), as CrypTFlow2's DReLU (ref. [26]),
   read in the ring 2^COMPARE_BITS = 2^19 (the shares' low 19 bits): MSB(z) = MSB(z_0) ⊕ MSB(z_1) ⊕ carry, the
   carry from one 18-bit millionaires' comparison (``crypto.millionaire``). |d − ts| < 2^18 holds for unit
   vectors at 2^8 precision and |ts| ≤ 2^17 (``params.COMPARE_BITS``).
2. Line 4: B2A of the match bits into Z_{2^32}; line 6: each party sums its shares locally (the count of
   matches, < 2^32).
3. Line 7: [count ≥ 1] by the same DReLU on count − 1 over Z_{2^32}; line 8: the CS sends μ_0, the verifier
   outputs μ = μ_0 ⊕ μ_1.

Each party is a generator over ``crypto.exchange`` (``reveal_cs``, ``reveal_verifier``): the verifier speaks
first and every verifier message gets one CS message back, so over HTTP each round is one request
(``service``); ``reveal`` runs the same two generators against each other in process. Entries are processed
in batches of ``batch`` (a multiple of 64, all steps vectorised); only the two 32-bit sums persist. The bytes
per phase do not depend on the batch size (the OT extension pads each batch to 64 entries, a multiple of 64 needs
none). The random OTs (``ot``, ``OT_KINDS``) are Ferret's silent correlated OTs by default (``crypto.ferret``, as
OpenCheetah: one correction bit per chosen OT, none for the triples' random ones), or an OT extension's
(``crypto.otext``: SoftSpokenOT at k = ``SOFTSPOKEN_K``, 128/k bits of u per OT, or IKNP, 128). Ferret's pools are
refilled between identifications (``refill``); an identification only takes from them.
"""
from __future__ import annotations

import numpy as np

from ...crypto import ferret
from ...crypto.exchange import Chan, Wire, bits_part, pack, run_pair, unpack
from ...crypto.millionaire import MASK32, b2a_R, b2a_S, drelu_R, drelu_S, ots_for_drelu
from ...crypto.otext import IKNPReceiver, IKNPSender, SoftSpokenReceiver, SoftSpokenSender
from ...errors import ProtocolError
from .params import COMPARE_BITS, SUM_BITS, T_BITS, TS_BOUND

BATCH = 1 << 15
"""Entries per batch when a caller bounds Alg. 3's memory; ``CryptoMask.identify``, ``identify --gallery`` and the CS
over HTTP use one batch over every entry (messages of ≈ 26 B per entry on Ferret, ≈ 140 B on SoftSpokenOT k = 4,
streamed as frames over HTTP), so
their rounds do not grow with the gallery."""


OT_KINDS = ("ferret", "softspoken", "iknp")
DEFAULT_OT = "ferret"


def setup_ot(wire: Wire, ot: str = "softspoken", *, ferret_params: str = "regular"):
    """The OTs' setup (once per CS–verifier pair), both sides in process: Ferret's (its SoftSpokenOT base OTs and
    bootstrap, ``crypto.ferret``; ``ferret_params`` "toy" for tests only) or an OT extension's base OTs. The default
    stays SoftSpokenOT for one-shot callers (``scale.cryptomask_identify`` sets up per identification, where Ferret's
    first refill would cost more than it saves); ``CryptoMask`` keeps its pair and defaults to ``DEFAULT_OT``."""
    if ot not in OT_KINDS:
        raise ProtocolError(f"--ot must be one of {OT_KINDS}")
    if ot == "ferret":
        S, R, nbytes = ferret.setup_pair(ferret_params)
        wire.send("ot_setup", nbytes)
        return S, R
    S, R = (SoftSpokenSender(), SoftSpokenReceiver()) if ot == "softspoken" else (IKNPSender(), IKNPReceiver())
    req = S.setup_request()
    resp = R.setup_response(req)
    wire.send("ot_setup", len(req) + len(resp))
    S.setup_finish(resp)
    return S, R


def ots_needed(entries: int, batch: int | None = BATCH) -> int:
    """The COTs one Alg. 3 run on ``entries`` shares takes from Ferret's pools (per batch: the comparison and one
    per B2A bit; then the final comparison)."""
    batch = -(-entries // 64) * 64 if batch is None else batch
    sizes = [min(batch, entries - lo) for lo in range(0, entries, batch)]
    return sum(ots_for_drelu(m, COMPARE_BITS) + m for m in sizes) + ots_for_drelu(1, SUM_BITS)


def refill(ot, entries: int, batch: int | None = BATCH) -> int:
    """Between identifications, in process: grow Ferret's pools to hold one Alg. 3 run on ``entries`` shares; the
    bytes of the refill messages (CS → verifier). 0 for an OT extension (nothing to refill)."""
    S, R = ot
    if getattr(S, "kind", "") != "ferret":
        return 0
    return ferret.ensure(S, R, ots_needed(entries, batch))


def _check_batch(batch: int) -> None:
    if batch < 64 or batch % 64:
        raise ProtocolError("the revealing batch must be a positive multiple of 64")


def reveal_cs(S: IKNPSender, d0: np.ndarray, wire: Wire, batch: int = BATCH):
    """The CS's side of Alg. 3 (P_0, OT sender): its shares d_0; it learns nothing (returns None)."""
    _check_batch(batch)
    if d0.ndim != 1 or d0.size == 0:
        raise ProtocolError("result revealing needs a non-empty share vector")
    ch, total = Chan(wire), np.uint64(0)
    for lo in range(0, d0.size, batch):
        z = d0[lo:lo + batch].astype(np.int64, copy=False).view(np.uint64)  # as astype(uint64), without a copy
        b = yield from drelu_S(S, z, COMPARE_BITS, ch, "compare")
        a = yield from b2a_S(S, b, ch, "b2a")
        total = (total + a.sum(dtype=np.uint64)) & MASK32
    mu = yield from drelu_S(S, np.array([(total - np.uint64(1)) & MASK32]), SUM_BITS, ch, "final")
    yield from ch.recv(phase="final")  # the verifier's empty request for μ_0 (line 8)
    ch.send("final", pack(mu))
    yield from ch.close()


def reveal_verifier(R: IKNPReceiver, d1: np.ndarray, ts: int, wire: Wire, batch: int = BATCH, *,
                    count_received: bool = False):
    """The verifier's side of Alg. 3 (P_1, OT receiver): its shares d_1 and ts → the bit μ = [∃ i: d_i ≥ ts].
    ``count_received``: ``wire`` also counts the CS's messages (the CS is remote)."""
    t = 1 << T_BITS
    _check_batch(batch)
    if d1.ndim != 1 or d1.size == 0:
        raise ProtocolError("result revealing needs a non-empty share vector")
    if not -TS_BOUND <= ts <= TS_BOUND:
        raise ProtocolError(f"threshold must lie in [−2^{TS_BOUND.bit_length() - 1}, 2^{TS_BOUND.bit_length() - 1}]")
    ch, total = Chan(wire, count_received=count_received), np.uint64(0)
    for lo in range(0, d1.size, batch):
        z = (d1[lo:lo + batch].astype(np.int64, copy=False) - ts).view(np.uint64) & np.uint64(t - 1)  # mod t
        b = yield from drelu_R(R, z, COMPARE_BITS, ch, "compare")
        a = yield from b2a_R(R, b, ch, "b2a")
        total = (total + a.sum(dtype=np.uint64)) & MASK32
    mu = yield from drelu_R(R, np.array([total]), SUM_BITS, ch, "final")
    (mu0,) = yield from ch.recv(bits_part(1), phase="final")
    return bool(unpack(mu0, 1)[0] ^ mu[0])


def reveal(S: IKNPSender, R: IKNPReceiver, d0: np.ndarray, d1: np.ndarray, ts: int, wire: Wire,
           batch: int | None = BATCH) -> bool:
    """Alg. 3 in process: the verifier's and the CS's generators against each other; the verifier's bit.
    ``batch`` None: every entry in one batch, so the round trips (``wire.rounds``) do not grow with the gallery."""
    if d0.shape != d1.shape or d0.ndim != 1 or d0.size == 0:
        raise ProtocolError("result revealing needs two equal, non-empty share vectors")
    if batch is None:
        batch = -(-d0.size // 64) * 64
    sent = refill((S, R), d0.size, batch)  # nothing when the caller refilled between identifications
    if sent:
        wire.send("ot_refill", sent)
    bit, _ = run_pair(reveal_verifier(R, d1, ts, wire, batch), reveal_cs(S, d0, wire, batch), "Alg. 3", wire)
    return bit
