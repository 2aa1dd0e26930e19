"""Secure result revealing (seed 001 Alg. 3) between the CS (OT sender, P_0) and the verifier (P_1).

Input: additive shares d = d_0 + d_1 (mod t = 2^20) of every inner product, the verifier's threshold ts.

1. Lines 2–3, per entry: [d ≥ ts]. The paper writes SC_lt(ts − d_1, d_0); over Z_{2^20} the two shares wrap,
   so the comparison is the sign of z = d − ts (z_0 = d_0, z_1 = d_1 − ts), as CrypTFlow2's DReLU (ref. [26]):
   MSB(z) = MSB(z_0) ⊕ MSB(z_1) ⊕ carry, the carry from one 19-bit millionaires' comparison
   (``crypto.millionaire``). |d − ts| < 2^19 holds for unit vectors at 2^8 precision and |τ| ≤ 1.
2. Line 4: B2A of the match bits into Z_{2^32}; line 6: each party sums its shares locally (the count of
   matches, < 2^32).
3. Line 7: [count ≥ 1] by the same DReLU on count − 1 over Z_{2^32}; line 8: the CS sends μ_0, the verifier
   outputs μ = μ_0 ⊕ μ_1.

Entries are processed in batches of ``BATCH`` (all steps vectorised); only the two 32-bit sums persist.
"""
from __future__ import annotations

import numpy as np

from ...crypto.millionaire import MASK32, Tweaks, Wire, b2a, drelu_shares
from ...crypto.otext import IKNPReceiver, IKNPSender
from ...errors import ProtocolError
from .params import SUM_BITS, T_BITS

BATCH = 1 << 15


def setup_ot(wire: Wire) -> tuple[IKNPSender, IKNPReceiver]:
    """The IKNP base OTs (once per CS–verifier pair)."""
    S, R = IKNPSender(), IKNPReceiver()
    req = S.setup_request()
    resp = R.setup_response(req)
    wire.send("ot_setup", len(req) + len(resp))
    S.setup_finish(resp)
    return S, R


def reveal(S: IKNPSender, R: IKNPReceiver, d0: np.ndarray, d1: np.ndarray, ts: int, wire: Wire) -> bool:
    """Alg. 3: the verifier's 1-bit answer [∃ i: d_i ≥ ts]; the CS's view is OT messages and random shares."""
    t = 1 << T_BITS
    if d0.shape != d1.shape or d0.ndim != 1 or d0.size == 0:
        raise ProtocolError("result revealing needs two equal, non-empty share vectors")
    if not -(t // 2) < ts < t // 2:
        raise ProtocolError(f"threshold must lie in (−2^{T_BITS - 1}, 2^{T_BITS - 1})")
    tweaks = Tweaks()
    sum_S = sum_R = np.uint64(0)
    for lo in range(0, d0.size, BATCH):
        z_S = d0[lo:lo + BATCH].astype(np.uint64)  # CS
        z_R = np.mod(d1[lo:lo + BATCH] - ts, t).astype(np.uint64)  # verifier
        b_S, b_R = drelu_shares(S, R, z_S, z_R, T_BITS, wire, "compare", tweaks)
        a_S, a_R = b2a(S, R, b_S, b_R, wire, "b2a")
        sum_S = (sum_S + a_S.sum(dtype=np.uint64)) & MASK32
        sum_R = (sum_R + a_R.sum(dtype=np.uint64)) & MASK32
    mu_S, mu_R = drelu_shares(S, R, np.array([(sum_S - np.uint64(1)) & MASK32]), np.array([sum_R]), SUM_BITS,
                              wire, "final", tweaks)
    wire.send("final", 1)  # μ_0: CS → verifier
    return bool(mu_S[0] ^ mu_R[0])
