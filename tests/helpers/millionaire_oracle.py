"""The numpy millionaires' protocol, bit triples and B2A that privface.crypto.millionaire ran before the native
core (native/src/millionaire.rs), frozen as the test oracle of the per-entry steps (the block widths, the AND
tree's shape and the input checks are the library's own, imported; the leaves' masks changed with the library on
2026-11-27, from a TCCR hash per message to the keys' own bits): the same party generators, message
for message, over the oracle IKNP of ``otext_oracle`` (or any object with the same ``extend``). The tests run it
and the library on the same seeds and the same random bits and compare every message byte for byte. Not used by
the library.

Seed 001 §2.6 / Alg. 3 use the OT-based millionaires' protocol of CrypTFlow2 (Rathee et al., CCS 2020,
ref. [26]): x = x_{q−1}‖…‖x_0 and y likewise in blocks of w bits; per block a 1-out-of-2^w OT gives boolean
shares of lt_j = [x_j < y_j] and eq_j = [x_j = y_j], and the tree lt = lt_hi ⊕ (eq_hi ∧ lt_lo),
eq = eq_hi ∧ eq_lo combines them with AND gates on shares (Beaver bit triples, also from OT).

* 1-out-of-2^w OT: w random OTs on the receiver's bits; the sender masks message v (two bits) with bits 2v,
  2v + 1 of ⊕_t K_{t, v_t} (Naor–Pinkas' 1-out-of-N from 1-out-of-2, the keys' bits in place of the PRF).
* Bit triple from two ROTs (both with the CS as OT sender): a_S·b_R = x_0 ⊕ x_{b_R} from the first
  (a_S = x_0 ⊕ x_1), a_R·b_S from the second with one correction bit.
* B2A (Demmler et al., ABY §III-C, ref. [8]): b = b_S ⊕ b_R = b_S + b_R − 2·b_S·b_R; one ROT with the
  receiver's choice b_R and a 32-bit correction gives additive shares of b_S·b_R mod 2^32.

``*_S`` are the steps of the OT sender S (the CS, P_0), ``*_R`` those of the receiver R (the verifier, P_1):
generators over ``exchange.Chan`` (``yield from``), R speaking first. Rounds of a comparison of m values:
R → S the ROT messages u (comparison bits and every tree level's triples); S → R the masked OT messages and
the triples' corrections; then per tree level R's openings (e, f) → S's openings. B2A: R → S u, S → R D.
``millionaire``, ``drelu_shares`` and ``b2a`` run both sides against each other in process (tests).
"""
from __future__ import annotations

import numpy as np

from privface.crypto import millionaire as library
from privface.crypto.exchange import Chan, Part, Wire, bits_part, pack, unpack
from privface.crypto.millionaire import (
    BLOCK_BITS,
    MASK32,
    _check_inputs,
    _levels,
    _run,
    _widths,
    random_bits,
    u_part,
)

from .otext_oracle import KAPPA, IKNPReceiver, IKNPSender

__all__ = ["BLOCK_BITS", "MASK32", "Wire", "b2a", "b2a_R", "b2a_S", "drelu_R", "drelu_S",
           "drelu_shares", "millionaire", "millionaire_R", "millionaire_S", "random_bits"]


def _packed(bits: list) -> list:
    return [None if v is None else pack(v) for v in bits]


def _tree_inputs(lt: list, eq: list) -> tuple[np.ndarray, np.ndarray]:
    """The library's tree shape (``millionaire._tree_inputs``, on packed bits) on unpacked bits."""
    m, n = lt[0].size, (2 * (len(lt) // 2) - 1) * lt[0].size
    x, y = library._tree_inputs(_packed(lt), _packed(eq), m)
    return unpack(x, n), unpack(y, n)


def _tree_outputs(lt: list, eq: list, z: np.ndarray, m: int) -> tuple[list, list]:
    """``millionaire._tree_outputs`` on unpacked bits."""
    nl, ne = library._tree_outputs(_packed(lt), _packed(eq), pack(z), m)
    return [unpack(v, m) for v in nl], [None if v is None else unpack(v, m) for v in ne]


def _bits(k: np.ndarray) -> np.ndarray:
    return k[..., 0] & np.uint8(1)


def _chunk(k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Bits 2v, 2v + 1 of 16-byte keys k (..., 16), little-endian, for message indices v (...)."""
    byte = np.take_along_axis(k, (v // 4)[..., None], axis=-1)[..., 0]
    return (byte >> (2 * (v % 4)).astype(np.uint8)) & np.uint8(3)


# ------------------------------------------------------------------------------------------ receiver R
def millionaire_R(R: IKNPReceiver, x_R, ell: int, ch: Chan, phase: str):
    """R's boolean share of [x_R < y_S] (ell-bit unsigned, CrypTFlow2 Π_MILL)."""
    x_R = _check_inputs(x_R, ell)
    m, widths = x_R.size, _widths(ell)
    sizes = _levels(len(widths), m)
    choice = ((x_R[:, None] >> np.arange(ell, dtype=np.uint64)[None]) & np.uint64(1)).astype(np.uint8)
    u, kr = R.extend(choice.ravel())
    ch.send(phase, u)
    kr = kr.reshape(m, ell, 16)
    pending = []
    for n in sizes:  # the triples' ROTs (R's random a_R, b_R as choices)
        b, a = random_bits(n), random_bits(n)
        u_t, k_t = R.extend(np.concatenate([b, a]))
        ch.send(phase, u_t)
        pending.append((a, b, k_t))
    parts = yield from ch.recv(*[bits_part(m * (2 << w)) for w in widths], *[bits_part(n) for n in sizes], phase=phase)
    lt, eq, rows, p = [], [], np.arange(m), 0
    for w, ct in zip(widths, parts):
        two = unpack(ct, m * (2 << w)).reshape(m, 1 << w, 2)
        xj = ((x_R >> np.uint64(p)) & np.uint64((1 << w) - 1)).astype(np.int64)
        kx = np.bitwise_xor.reduce(kr[:, p:p + w], axis=1)
        got = (two[rows, xj, 0] | (two[rows, xj, 1] << 1)) ^ _chunk(kx, xj)
        lt.append(got & 1)
        eq.append(got >> 1)
        p += w
    triples = []
    for (a, b, k_t), e, n in zip(pending, parts[len(widths):], sizes):
        c = (a & b) ^ _bits(k_t[:n]) ^ _bits(k_t[n:]) ^ (a & unpack(e, n))
        triples.append((a, b, c))
    for (a, b, c), n in zip(triples, sizes):  # one round per level: R's (e, f), then S's
        x, y = _tree_inputs(lt, eq)
        e_R, f_R = x ^ a, y ^ b
        ch.send(phase, pack(e_R), pack(f_R))
        e_S, f_S = yield from ch.recv(bits_part(n), bits_part(n), phase=phase)
        e, f = e_R ^ unpack(e_S, n), f_R ^ unpack(f_S, n)
        lt, eq = _tree_outputs(lt, eq, c ^ (e & b) ^ (f & a), m)
    return lt[0].astype(np.uint8)


def b2a_R(R: IKNPReceiver, b_R: np.ndarray, ch: Chan, phase: str):
    """R's additive share mod 2^32 (uint64) of the bit b_S ⊕ b_R."""
    u, kr = R.extend(b_R)
    ch.send(phase, u)
    (D,) = yield from ch.recv(Part(4 * b_R.size), phase=phase)
    rc = kr[:, :4].copy().view("<u4")[:, 0].astype(np.uint64)
    y = (rc + b_R.astype(np.uint64) * D.view("<u4").astype(np.uint64)) & MASK32
    return (b_R.astype(np.uint64) - 2 * y) & MASK32


def drelu_R(R: IKNPReceiver, z_R, ell: int, ch: Chan, phase: str):
    """R's boolean share of [z ≥ 0], z = z_S + z_R mod 2^ell read as signed (CrypTFlow2 DReLU):
    MSB(z) = MSB(z_S) ⊕ MSB(z_R) ⊕ [low(z_S) + low(z_R) ≥ 2^(ell−1)], the carry by the millionaires' protocol."""
    half = np.uint64((1 << (ell - 1)) - 1)
    z_R = np.asarray(z_R, dtype=np.uint64)
    c_R = yield from millionaire_R(R, half - (z_R & half), ell - 1, ch, phase)
    return ((z_R >> np.uint64(ell - 1)) & np.uint64(1)).astype(np.uint8) ^ c_R


# -------------------------------------------------------------------------------------------- sender S
def millionaire_S(S: IKNPSender, y_S, ell: int, ch: Chan, phase: str):
    """S's boolean share of [x_R < y_S]."""
    y_S = _check_inputs(y_S, ell)
    m, widths = y_S.size, _widths(ell)
    sizes = _levels(len(widths), m)
    us = yield from ch.recv(u_part(m * ell), *[u_part(2 * n) for n in sizes], phase=phase)
    k0, k1 = S.extend(us[0].reshape(KAPPA, -1), m * ell)
    k0, k1 = k0.reshape(m, ell, 16), k1.reshape(m, ell, 16)
    lt, eq, p = [], [], 0
    for w in widths:  # the 2^w messages (lt ⊕ [v < y_j], eq ⊕ [v = y_j]), masked by bits 2v, 2v + 1 of ⊕_t K_{t, v_t}
        v = np.arange(1 << w)
        pad = np.zeros((m, 1 << w), np.uint8)
        for t in range(w):
            key = np.where(((v >> t) & 1).astype(bool)[None, :, None], k1[:, None, p + t], k0[:, None, p + t])
            pad ^= _chunk(key, np.broadcast_to(v, (m, 1 << w)))
        yj = ((y_S >> np.uint64(p)) & np.uint64((1 << w) - 1)).astype(np.int64)
        ls, es = random_bits(m), random_bits(m)
        msg = (ls[:, None] ^ (v[None] < yj[:, None])) | ((es[:, None] ^ (v[None] == yj[:, None])) << 1)
        ct = (msg ^ pad).astype(np.uint8)
        ch.send(phase, pack(np.stack([ct & 1, ct >> 1], axis=-1)))
        lt.append(ls)
        eq.append(es)
        p += w
    triples = []
    for u_t, n in zip(us[1:], sizes):
        t0, t1 = S.extend(u_t.reshape(KAPPA, -1), 2 * n)
        x0, x1, y0, y1 = _bits(t0[:n]), _bits(t1[:n]), _bits(t0[n:]), _bits(t1[n:])
        a, b = x0 ^ x1, random_bits(n)
        ch.send(phase, pack(y0 ^ y1 ^ b))
        triples.append((a, b, (a & b) ^ x0 ^ y0))
    for (a, b, c), n in zip(triples, sizes):
        e_R, f_R = yield from ch.recv(bits_part(n), bits_part(n), phase=phase)
        x, y = _tree_inputs(lt, eq)
        e_S, f_S = x ^ a, y ^ b
        ch.send(phase, pack(e_S), pack(f_S))
        e, f = e_S ^ unpack(e_R, n), f_S ^ unpack(f_R, n)
        lt, eq = _tree_outputs(lt, eq, c ^ (e & b) ^ (f & a) ^ (e & f), m)
    return lt[0].astype(np.uint8)


def b2a_S(S: IKNPSender, b_S: np.ndarray, ch: Chan, phase: str):
    """S's additive share mod 2^32 (uint64) of the bit b_S ⊕ b_R."""
    (u,) = yield from ch.recv(u_part(b_S.size), phase=phase)
    k0, k1 = S.extend(u.reshape(KAPPA, -1), b_S.size)
    r0 = k0[:, :4].copy().view("<u4")[:, 0].astype(np.uint64)
    r1 = k1[:, :4].copy().view("<u4")[:, 0].astype(np.uint64)
    D = (r0 - r1 + b_S.astype(np.uint64)) & MASK32
    ch.send(phase, D.astype("<u4").view(np.uint8))
    return (b_S.astype(np.uint64) - 2 * ((-r0) & MASK32)) & MASK32


def drelu_S(S: IKNPSender, z_S, ell: int, ch: Chan, phase: str):
    """S's boolean share of [z ≥ 0] (``drelu_R``)."""
    half = np.uint64((1 << (ell - 1)) - 1)
    z_S = np.asarray(z_S, dtype=np.uint64)
    c_S = yield from millionaire_S(S, z_S & half, ell - 1, ch, phase)
    return 1 ^ ((z_S >> np.uint64(ell - 1)) & np.uint64(1)).astype(np.uint8) ^ c_S


# ------------------------------------------------------------------------------- both sides in process
def millionaire(S, R, y_S, x_R, ell: int, wire: Wire, phase: str):
    """Boolean shares (of S, of R) of [x_R < y_S] for ell-bit unsigned inputs, both sides in process."""
    return _run(lambda ch: millionaire_S(S, y_S, ell, ch, phase),
                lambda ch: millionaire_R(R, x_R, ell, ch, phase), wire)


def drelu_shares(S, R, z_S, z_R, ell: int, wire: Wire, phase: str):
    """Boolean shares (of S, of R) of [z_S + z_R ≥ 0 mod 2^ell, signed], both sides in process."""
    return _run(lambda ch: drelu_S(S, z_S, ell, ch, phase),
                lambda ch: drelu_R(R, z_R, ell, ch, phase), wire)


def b2a(S, R, b_S, b_R, wire: Wire, phase: str):
    """Boolean shares of bits → additive shares mod 2^32 (uint64 arrays), both sides in process."""
    return _run(lambda ch: b2a_S(S, np.asarray(b_S, dtype=np.uint8), ch, phase),
                lambda ch: b2a_R(R, np.asarray(b_R, dtype=np.uint8), ch, phase), wire)
