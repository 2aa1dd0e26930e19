"""The pre-split, interleaved Alg. 3 (commit 82dc56b: ``crypto/millionaire.py`` and ``reveal.py``; its block widths
and AND tree changed with the library's since), frozen as a test oracle: both parties computed in one function.
``test_cryptomask_http`` checks that the per-party code gives the same bit and the same bytes per phase. Not used by
the library."""
from __future__ import annotations

import os
from collections import defaultdict

import numpy as np

from privface.crypto.otext import IKNPReceiver, IKNPSender, tccr
from privface.errors import CryptoError

BLOCK_BITS = 4
MASK32 = np.uint64(0xFFFFFFFF)


class Wire:
    """Bytes that cross between the two parties, per phase."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = defaultdict(int)

    def send(self, phase: str, nbytes: int) -> None:
        self.bytes[phase] += int(nbytes)


def random_bits(n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(os.urandom((n + 7) // 8), dtype=np.uint8))[:n]


def _bits(k: np.ndarray) -> np.ndarray:
    return k[..., 0] & np.uint8(1)


def _rot(S: IKNPSender, R: IKNPReceiver, choices: np.ndarray, wire: Wire, phase: str):
    u, kr = R.extend(choices)
    wire.send(phase, u.nbytes)
    k0, k1 = S.extend(u, choices.size)
    return k0, k1, kr


def bit_triples(S: IKNPSender, R: IKNPReceiver, n: int, wire: Wire, phase: str):
    """n Beaver bit triples: ((a_S, b_S, c_S), (a_R, b_R, c_R)) with (a_S⊕a_R)(b_S⊕b_R) = c_S⊕c_R."""
    b_R, a_R = random_bits(n), random_bits(n)
    k0, k1, kr = _rot(S, R, np.concatenate([b_R, a_R]), wire, phase)
    x0, x1, xr = _bits(k0[:n]), _bits(k1[:n]), _bits(kr[:n])
    y0, y1, yr = _bits(k0[n:]), _bits(k1[n:]), _bits(kr[n:])
    a_S, b_S = x0 ^ x1, random_bits(n)
    e = y0 ^ y1 ^ b_S  # S → R
    wire.send(phase, (n + 7) // 8)
    c_S = (a_S & b_S) ^ x0 ^ y0
    c_R = (a_R & b_R) ^ xr ^ yr ^ (a_R & e)
    return (a_S, b_S, c_S), (a_R, b_R, c_R)


def and_gates(x_S, y_S, x_R, y_R, S, R, wire: Wire, phase: str):
    """Shares of x ∧ y from shares of x and y (one triple per gate; e, f opened both ways)."""
    (a_S, b_S, c_S), (a_R, b_R, c_R) = bit_triples(S, R, x_S.size, wire, phase)
    e_S, f_S, e_R, f_R = x_S ^ a_S, y_S ^ b_S, x_R ^ a_R, y_R ^ b_R
    wire.send(phase, 2 * 2 * ((x_S.size + 7) // 8))
    e, f = e_S ^ e_R, f_S ^ f_R
    return c_S ^ (e & b_S) ^ (f & a_S) ^ (e & f), c_R ^ (e & b_R) ^ (f & a_R)


class Tweaks:
    """Fresh TCCR tweaks for the 1-out-of-2^w masks (disjoint from the IKNP counters by the top bit)."""

    def __init__(self) -> None:
        self.next = 1 << 63

    def take(self, n: int) -> np.ndarray:
        out = np.arange(self.next, self.next + n, dtype=np.uint64)
        self.next += n
        return out


def millionaire(S: IKNPSender, R: IKNPReceiver, y_S: np.ndarray, x_R: np.ndarray, ell: int, wire: Wire,
                phase: str, tweaks: Tweaks) -> tuple[np.ndarray, np.ndarray]:
    """Boolean shares (of S, of R) of [x_R < y_S] for ell-bit unsigned inputs (CrypTFlow2 Π_MILL)."""
    y_S, x_R = np.asarray(y_S, dtype=np.uint64), np.asarray(x_R, dtype=np.uint64)
    if y_S.shape != x_R.shape or y_S.ndim != 1 or not 1 <= ell <= 63:
        raise CryptoError("millionaire: inputs must be two equal-length vectors of ≤ 63 bits")
    if np.any(y_S >> np.uint64(ell)) or np.any(x_R >> np.uint64(ell)):
        raise CryptoError(f"millionaire: inputs exceed {ell} bits")
    m = y_S.size
    choice = ((x_R[:, None] >> np.arange(ell, dtype=np.uint64)[None]) & np.uint64(1)).astype(np.uint8)
    k0, k1, kr = _rot(S, R, choice.ravel(), wire, phase)
    k0, k1, kr = k0.reshape(m, ell, 16), k1.reshape(m, ell, 16), kr.reshape(m, ell, 16)
    lt_S, eq_S, lt_R, eq_R = [], [], [], []
    rows = np.arange(m)
    q, p = -(-ell // BLOCK_BITS), 0  # ⌈ell/4⌉ blocks of as equal widths as possible, least significant first
    for w in [ell // q + (i < ell % q) for i in range(q)]:
        v = np.arange(1 << w)
        tw = tweaks.take(m << w).reshape(m, 1 << w)
        # S: the 2^w messages (lt ⊕ [v < y_j], eq ⊕ [v = y_j]), masked by TCCR(⊕_t K_{t, v_t})
        key = np.stack([k0[:, p], k1[:, p]], axis=1)  # key[:, v] = ⊕_t K_{t, v_t}, doubled one bit at a time
        for t in range(1, w):
            key = np.concatenate([key ^ k0[:, None, p + t], key ^ k1[:, None, p + t]], axis=1)
        yj = ((y_S >> np.uint64(p)) & np.uint64((1 << w) - 1)).astype(np.int64)
        ls, es = random_bits(m), random_bits(m)
        msg = (ls[:, None] ^ (v[None] < yj[:, None])) | ((es[:, None] ^ (v[None] == yj[:, None])) << 1)
        ct = (msg ^ (tccr(key, tw)[..., 0] & 3)).astype(np.uint8)
        wire.send(phase, (m * (2 << w) + 7) // 8)
        # R: its block value selects one message; its key is ⊕_t K_{t, x_t}
        xj = ((x_R >> np.uint64(p)) & np.uint64((1 << w) - 1)).astype(np.int64)
        kx = np.bitwise_xor.reduce(kr[:, p:p + w], axis=1)
        got = ct[rows, xj] ^ (tccr(kx, tw[rows, xj])[..., 0] & 3)
        lt_S.append(ls), eq_S.append(es), lt_R.append(got & 1), eq_R.append(got >> 1)
        p += w
    while len(lt_S) > 1:  # combine (hi, lo) pairs, least significant first; one AND round per level
        pairs = len(lt_S) // 2
        # lt of every pair; eq of all but the lowest (it is always a lo side: its eq is never used)
        ehS, ehR = [eq_S[2 * i + 1] for i in range(pairs)], [eq_R[2 * i + 1] for i in range(pairs)]
        loS = [lt_S[2 * i] for i in range(pairs)] + [eq_S[2 * i] for i in range(1, pairs)]
        loR = [lt_R[2 * i] for i in range(pairs)] + [eq_R[2 * i] for i in range(1, pairs)]
        zS, zR = and_gates(np.concatenate(ehS + ehS[1:]), np.concatenate(loS),
                           np.concatenate(ehR + ehR[1:]), np.concatenate(loR), S, R, wire, phase)
        nlS = [lt_S[2 * i + 1] ^ zS[i * m:(i + 1) * m] for i in range(pairs)]
        nlR = [lt_R[2 * i + 1] ^ zR[i * m:(i + 1) * m] for i in range(pairs)]
        neS = [None] + [zS[(pairs + i - 1) * m:(pairs + i) * m] for i in range(1, pairs)]
        neR = [None] + [zR[(pairs + i - 1) * m:(pairs + i) * m] for i in range(1, pairs)]
        if len(lt_S) % 2:
            nlS.append(lt_S[-1]), nlR.append(lt_R[-1]), neS.append(eq_S[-1]), neR.append(eq_R[-1])
        lt_S, lt_R, eq_S, eq_R = nlS, nlR, neS, neR
    return lt_S[0].astype(np.uint8), lt_R[0].astype(np.uint8)


def b2a(S: IKNPSender, R: IKNPReceiver, b_S: np.ndarray, b_R: np.ndarray, wire: Wire, phase: str):
    """Boolean shares of bits → additive shares mod 2^32 (uint64 arrays)."""
    k0, k1, kr = _rot(S, R, b_R, wire, phase)
    r0, r1 = k0[:, :4].copy().view("<u4")[:, 0].astype(np.uint64), k1[:, :4].copy().view("<u4")[:, 0].astype(np.uint64)
    rc = kr[:, :4].copy().view("<u4")[:, 0].astype(np.uint64)
    D = (r0 - r1 + b_S.astype(np.uint64)) & MASK32  # S → R
    wire.send(phase, 4 * D.size)
    y = (rc + b_R.astype(np.uint64) * D) & MASK32
    x = (-r0) & MASK32
    return (b_S.astype(np.uint64) - 2 * x) & MASK32, (b_R.astype(np.uint64) - 2 * y) & MASK32


def drelu_shares(S, R, z_S, z_R, ell: int, wire: Wire, phase: str, tweaks: Tweaks):
    """Boolean shares of [z ≥ 0] for z = z_S + z_R mod 2^ell read as signed (CrypTFlow2 DReLU):
    MSB(z) = MSB(z_S) ⊕ MSB(z_R) ⊕ [low(z_S) + low(z_R) ≥ 2^(ell−1)], the carry by ``millionaire``."""
    half = np.uint64((1 << (ell - 1)) - 1)
    z_S, z_R = np.asarray(z_S, dtype=np.uint64), np.asarray(z_R, dtype=np.uint64)
    c_S, c_R = millionaire(S, R, z_S & half, half - (z_R & half), ell - 1, wire, phase, tweaks)
    msb = np.uint64(ell - 1)
    return ((1 ^ ((z_S >> msb) & np.uint64(1)).astype(np.uint8) ^ c_S),
            (((z_R >> msb) & np.uint64(1)).astype(np.uint8) ^ c_R))


def reveal(S, R, d0, d1, ts: int, wire: Wire, batch: int = 1 << 15, ell: int = 20) -> bool:
    """The interleaved ``reveal`` of commit 82dc56b (Alg. 3, both parties in one function), the comparison in the
    ring 2^ell (20 then; ``params.COMPARE_BITS`` now)."""
    t = 1 << 20
    tweaks = Tweaks()
    sum_S = sum_R = np.uint64(0)
    for lo in range(0, d0.size, batch):
        z_S = d0[lo:lo + batch].astype(np.uint64)
        z_R = np.mod(d1[lo:lo + batch] - ts, t).astype(np.uint64)
        b_S, b_R = drelu_shares(S, R, z_S, z_R, ell, wire, "compare", tweaks)
        a_S, a_R = b2a(S, R, b_S, b_R, wire, "b2a")
        sum_S = (sum_S + a_S.sum(dtype=np.uint64)) & MASK32
        sum_R = (sum_R + a_R.sum(dtype=np.uint64)) & MASK32
    mu_S, mu_R = drelu_shares(S, R, np.array([(sum_S - np.uint64(1)) & MASK32]), np.array([sum_R]), 32,
                              wire, "final", tweaks)
    wire.send("final", 1)
    return bool(mu_S[0] ^ mu_R[0])
