"""Secure comparison, bit triples and B2A from random OTs (``otext``: IKNP or SoftSpokenOT, the same correlation),
vectorised over many inputs, one function per party.

Seed 001 §2.6 / Alg. 3 use the OT-based millionaires' protocol of CrypTFlow2 (Rathee et al., CCS 2020,
ref. [26]): x = x_{q−1}‖…‖x_0 and y likewise in blocks of w bits; per block a 1-out-of-2^w OT gives boolean
shares of lt_j = [x_j < y_j] and eq_j = [x_j = y_j], and the tree lt = lt_hi ⊕ (eq_hi ∧ lt_lo),
eq = eq_hi ∧ eq_lo combines them with AND gates on shares (Beaver bit triples, also from OT).

* 1-out-of-2^w OT: w random OTs on the receiver's bits; the sender masks message v (two bits) with bits 2v,
  2v + 1 of ⊕_t K_{t, v_t} (Naor–Pinkas' 1-out-of-N from 1-out-of-2, the random-OT keys' own bits in place of
  the PRF: for v ≠ x_j the receiver lacks some K_{t, 1 − x_t}, whose bits 2v, 2v + 1 mask message v alone; w ≤ 6).
* Bit triple from two ROTs (both with the CS as OT sender): a_S·b_R = x_0 ⊕ x_{b_R} from the first
  (a_S = x_0 ⊕ x_1), a_R·b_S from the second with one correction bit.
* B2A (Demmler et al., ABY §III-C, ref. [8]): b = b_S ⊕ b_R = b_S + b_R − 2·b_S·b_R; one ROT with the
  receiver's choice b_R and a 32-bit correction gives additive shares of b_S·b_R mod 2^32.

``*_S`` are the steps of the OT sender S (the CS, P_0), ``*_R`` those of the receiver R (the verifier, P_1):
generators over ``exchange.Chan`` (``yield from``), R speaking first. Rounds of a comparison of m values:
R → S the ROT messages u (comparison bits and every tree level's triples); S → R the masked OT messages and
the triples' corrections; then per tree level R's openings (e, f) → S's openings. B2A: R → S u, S → R D.
``millionaire``, ``drelu_shares`` and ``b2a`` run both sides against each other in process (tests).

The generators keep the message order and the random bits; every per-entry step (the
2^w masked leaf messages and their decoding, the triples from the ROT keys, B2A) is one native call over the
whole batch (native/src/millionaire.rs), releasing the GIL. The leaves' OTs are extended inside those calls
(``IKNPSender.reserve``), so their 16-byte keys never reach memory; the triples keep one byte of each key and
B2A four. The AND tree's bits stay packed eight to a byte (``exchange.pack``, as they go on the wire), so a tree level
is a few numpy operations on m/8 bytes; random bits come from ChaCha20 keyed from the OS (``random_bits``). The numpy
steps they replaced are the test oracle
(tests/helpers/millionaire_oracle.py): the same keys and random bits give the same messages, byte for byte.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import CryptoError
from .exchange import Chan, Part, Wire, bits_part, pack, run_pair, unpack
from .ferret import FerretReceiver, FerretSender
from .native import ext
from .otext import KAPPA, IKNPReceiver, IKNPSender

Sender = IKNPSender | FerretSender
Receiver = IKNPReceiver | FerretReceiver

BLOCK_BITS = 4
"""The widest leaf block: 2^(4+1) message bits fit the ``ferret.KEY_BYTES`` = 4 bytes of the keys hashed ahead."""
MASK32 = np.uint64(0xFFFFFFFF)

__all__ = ["BLOCK_BITS", "MASK32", "Wire", "b2a", "b2a_R", "b2a_S", "drelu_R", "drelu_S",
           "drelu_shares", "millionaire", "millionaire_R", "millionaire_S", "ots_for_drelu", "random_bits"]


def random_bits(n: int) -> np.ndarray:
    """n uniform bits (uint8 0/1): ChaCha20 keyed from the OS (native, one pass; ``os.urandom`` for every bit was
    the slowest step of a comparison)."""
    return ext.random_bits(os.urandom(32), n)


def ots_for_drelu(m: int, ell: int) -> int:
    """COTs that ``drelu_*`` on m values of ell bits takes from Ferret's pools: the leaves' m·(ell − 1) and two per
    AND gate of the combining tree."""
    return m * (ell - 1) + 2 * sum(_levels(len(_widths(ell - 1)), m))


def u_part(m: int, rows: int = KAPPA) -> Part:
    """The receiver's extension message u for m random OTs (``rows`` rows of whole 64-bit words: κ for IKNP, κ/k
    for SoftSpokenOT)."""
    return Part(rows * (-(-m // 64) * 8))


def _widths(ell: int) -> list[int]:
    """⌈ell/BLOCK_BITS⌉ blocks of as equal widths as possible, least significant first (17 → 4, 4, 3, 3, 3): as
    few leaves as blocks of BLOCK_BITS would give, with fewer 1-out-of-2^w messages."""
    q = -(-ell // BLOCK_BITS)
    return [ell // q + (i < ell % q) for i in range(q)]


def _levels(blocks: int, m: int) -> list[int]:
    """AND gates per level of the combining tree of ``blocks`` leaves (pairs (hi, lo), least significant first):
    lt of every pair, eq of every pair but the lowest (a node holding the least significant leaf is always the lo
    side of its parent, so its eq is never used; the root needs lt only)."""
    sizes = []
    while blocks > 1:
        pairs = blocks // 2
        sizes.append((2 * pairs - 1) * m)
        blocks = pairs + blocks % 2
    return sizes


def _cat(parts: list, m: int) -> np.ndarray:
    """Packed strings of m bits each (``exchange.pack``), one after another, packed."""
    if m % 8 == 0:
        return np.concatenate(parts)
    return pack(np.concatenate([unpack(p, m) for p in parts]))


def _cut(z: np.ndarray, i: int, m: int) -> np.ndarray:
    """Bits i·m … (i + 1)·m − 1 of the packed string z, packed."""
    if m % 8 == 0:
        return z[i * m // 8:(i + 1) * m // 8]
    return pack(unpack(z, (i + 1) * m)[i * m:])


def _tree_inputs(lt: list, eq: list, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of one level's AND gates: eq_hi ∧ lt_lo for every pair, then eq_hi ∧ eq_lo for all but the lowest
    (packed, m bits per node)."""
    pairs = len(lt) // 2
    eh = [eq[2 * i + 1] for i in range(pairs)]
    return _cat(eh + eh[1:], m), _cat([lt[2 * i] for i in range(pairs)] + [eq[2 * i] for i in range(1, pairs)], m)


def _tree_outputs(lt: list, eq: list, z: np.ndarray, m: int) -> tuple[list, list]:
    """The next level's (lt, eq): lt_hi ⊕ (eq_hi ∧ lt_lo) and eq_hi ∧ eq_lo (None for the lowest node)."""
    pairs = len(lt) // 2
    nl = [lt[2 * i + 1] ^ _cut(z, i, m) for i in range(pairs)]
    ne = [None] + [_cut(z, pairs + i - 1, m) for i in range(1, pairs)]
    if len(lt) % 2:
        nl.append(lt[-1])
        ne.append(eq[-1])
    return nl, ne


def _check_inputs(v, ell: int, *, bounded: bool = False) -> np.ndarray:
    """``bounded``: the caller masked v to ell bits (``drelu_*``), so the value check is skipped."""
    v = np.asarray(v, dtype=np.uint64)
    if v.ndim != 1 or v.size == 0 or not 1 <= ell <= 63:
        raise CryptoError("millionaire: inputs must be a non-empty vector of ≤ 63 bits")
    if not bounded and np.any(v >> np.uint64(ell)):
        raise CryptoError(f"millionaire: inputs exceed {ell} bits")
    return v


# ------------------------------------------------------------------------------------------ receiver R
def millionaire_R(R: Receiver, x_R, ell: int, ch: Chan, phase: str, *, bounded: bool = False):
    """R's boolean share of [x_R < y_S] (ell-bit unsigned, CrypTFlow2 Π_MILL); ``bounded``: x_R < 2^ell is known."""
    x_R = np.ascontiguousarray(_check_inputs(x_R, ell, bounded=bounded))
    m, widths = x_R.size, _widths(ell)
    sizes = _levels(len(widths), m)
    pending = []
    if isinstance(R, FerretReceiver):  # Ferret: one correction bit per leaf OT, none for the triples; keys hashed ahead
        b_c, k_c, _ = R.take(m * ell)
        d, masks = ext.cot_leaves_recv_keys(b_c, k_c, ell, widths, x_R)
        ch.send(phase, d)
        for n in sizes:
            bits, k_t, _ = R.take(2 * n)
            pending.append((bits[n:], bits[:n], k_t))
    else:
        core, counter = R.reserve(m * ell)  # OT i·ell + t on bit t of x_i
        u, masks = ext.mill_leaves_recv(core, counter, ell, widths, x_R)
        ch.send(phase, u)
        for n in sizes:  # the triples' ROTs (R's random a_R, b_R as choices)
            b, a = random_bits(n), random_bits(n)
            u_t, k_t = R.extend(np.concatenate([b, a]), width=1)
            ch.send(phase, u_t)
            pending.append((a, b, k_t))
    parts = yield from ch.recv(*[bits_part(m * (2 << w)) for w in widths], *[bits_part(n) for n in sizes], phase=phase)
    lt, eq, p = [], [], 0  # the tree's bits packed (``exchange.pack``), as they go on the wire
    for w, ct, mask in zip(widths, parts, masks):  # R's block value selects one message; its key is ⊕_t K_{t, x_t}
        got_lt, got_eq = ext.mill_leaf_open(np.ascontiguousarray(ct), p, w, x_R, mask)
        lt.append(pack(got_lt))
        eq.append(pack(got_eq))
        p += w
    triples = []
    for (a, b, k_t), e, n in zip(pending, parts[len(widths):], sizes):
        triples.append((pack(a), pack(b), pack(ext.triples_recv(k_t, a, b, unpack(e, n)))))
    for (a, b, c), n in zip(triples, sizes):  # one round per level: R's (e, f), then S's
        x, y = _tree_inputs(lt, eq, m)
        e_R, f_R = x ^ a, y ^ b
        ch.send(phase, e_R, f_R)
        e_S, f_S = yield from ch.recv(bits_part(n), bits_part(n), phase=phase)
        e, f = e_R ^ e_S, f_R ^ f_S
        lt, eq = _tree_outputs(lt, eq, c ^ (e & b) ^ (f & a), m)
    return unpack(lt[0], m)


def b2a_R(R: Receiver, b_R: np.ndarray, ch: Chan, phase: str):
    """R's additive share mod 2^32 (uint64) of the bit b_S ⊕ b_R."""
    b_R = np.ascontiguousarray(b_R, dtype=np.uint8)
    if isinstance(R, FerretReceiver):  # one COT per bit, its choice corrected to b_R by one bit
        bits, kr, _ = R.take(b_R.size)
        ch.send(phase, pack(bits ^ b_R))
    else:
        u, kr = R.extend(b_R, width=4)
        ch.send(phase, u)
    (D,) = yield from ch.recv(Part(4 * b_R.size), phase=phase)
    return ext.b2a_recv(kr, b_R, np.ascontiguousarray(D))


def drelu_R(R: Receiver, z_R, ell: int, ch: Chan, phase: str):
    """R's boolean share of [z ≥ 0], z = z_S + z_R mod 2^ell read as signed (CrypTFlow2 DReLU):
    MSB(z) = MSB(z_S) ⊕ MSB(z_R) ⊕ [low(z_S) + low(z_R) ≥ 2^(ell−1)], the carry by the millionaires' protocol."""
    half = np.uint64((1 << (ell - 1)) - 1)
    z_R = np.asarray(z_R, dtype=np.uint64)
    x_R = np.bitwise_and(z_R, half)
    np.bitwise_xor(x_R, half, out=x_R)  # half − low(z_R)
    c_R = yield from millionaire_R(R, x_R, ell - 1, ch, phase, bounded=True)
    return ((z_R >> np.uint64(ell - 1)).astype(np.uint8) & 1) ^ c_R


# -------------------------------------------------------------------------------------------- sender S
def millionaire_S(S: Sender, y_S, ell: int, ch: Chan, phase: str, *, bounded: bool = False):
    """S's boolean share of [x_R < y_S]."""
    y_S = _check_inputs(y_S, ell, bounded=bounded)
    m, widths = y_S.size, _widths(ell)
    sizes = _levels(len(widths), m)
    if isinstance(S, FerretSender):
        (d,) = yield from ch.recv(bits_part(m * ell), phase=phase)
    else:
        us = yield from ch.recv(u_part(m * ell, S.rows), *[u_part(2 * n, S.rows) for n in sizes], phase=phase)
    # the 2^w messages (lt ⊕ [v < y_j], eq ⊕ [v = y_j]) of every block, masked by bits 2v, 2v + 1 of ⊕_t K_{t, v_t}
    rand = [(random_bits(m), random_bits(m)) for _ in widths]
    ls, es = [x for x, _ in rand], [x for _, x in rand]
    y_S = np.ascontiguousarray(y_S)
    if isinstance(S, FerretSender):
        k0, k1, _ = S.take(m * ell)
        cts = ext.cot_leaves_send_keys(k0, k1, np.ascontiguousarray(d), ell, widths, y_S, ls, es)
    else:
        u = us[0].reshape(S.rows, -1)
        core, counter = S.reserve(u, m * ell)
        cts = ext.mill_leaves_send(core, np.ascontiguousarray(u), counter, ell, widths, y_S, ls, es)
    lt, eq = [pack(x) for x in ls], [pack(x) for x in es]  # the tree's bits packed, as on the wire
    for ct in cts:
        ch.send(phase, ct)
    triples = []
    for k, n in enumerate(sizes):  # a_S = x0 ⊕ x1 from the first n ROTs, the correction from the second n
        if isinstance(S, FerretSender):
            t0, t1, _ = S.take(2 * n)  # random choices: no correction
        else:
            t0, t1 = S.extend(us[1 + k].reshape(S.rows, -1), 2 * n, width=1)
        b = random_bits(n)
        a, c, corr = ext.triples_send(t0, t1, b)
        ch.send(phase, pack(corr))
        triples.append((pack(a), pack(b), pack(c)))
    for (a, b, c), n in zip(triples, sizes):
        e_R, f_R = yield from ch.recv(bits_part(n), bits_part(n), phase=phase)
        x, y = _tree_inputs(lt, eq, m)
        e_S, f_S = x ^ a, y ^ b
        ch.send(phase, e_S, f_S)
        e, f = e_S ^ e_R, f_S ^ f_R
        lt, eq = _tree_outputs(lt, eq, c ^ (e & b) ^ (f & a) ^ (e & f), m)
    return unpack(lt[0], m)


def b2a_S(S: Sender, b_S: np.ndarray, ch: Chan, phase: str):
    """S's additive share mod 2^32 (uint64) of the bit b_S ⊕ b_R."""
    b_S = np.ascontiguousarray(b_S, dtype=np.uint8)
    swap = None
    if isinstance(S, FerretSender):
        (d,) = yield from ch.recv(bits_part(b_S.size), phase=phase)
        k0, k1, _ = S.take(b_S.size)
        swap = np.ascontiguousarray(d)  # R's correction d_j: key c is H(j, s_j ⊕ (c ⊕ d_j)·Δ)
    else:
        (u,) = yield from ch.recv(u_part(b_S.size, S.rows), phase=phase)
        k0, k1 = S.extend(u.reshape(S.rows, -1), b_S.size, width=4)
    D, share = ext.b2a_send(k0, k1, b_S, swap)  # D = r0 − r1 + b_S, S's share b_S − 2·(−r0) (mod 2^32)
    ch.send(phase, D)
    return share


def drelu_S(S: Sender, z_S, ell: int, ch: Chan, phase: str):
    """S's boolean share of [z ≥ 0] (``drelu_R``)."""
    half = np.uint64((1 << (ell - 1)) - 1)
    z_S = np.asarray(z_S, dtype=np.uint64)
    c_S = yield from millionaire_S(S, z_S & half, ell - 1, ch, phase, bounded=True)
    return 1 ^ ((z_S >> np.uint64(ell - 1)).astype(np.uint8) & 1) ^ c_S


# ------------------------------------------------------------------------------- both sides in process
def _run(side_S, side_R, wire: Wire):
    """Both sides in process over one ``wire`` (R speaks first): (S's output, R's output)."""
    box = {}

    def s():
        ch = Chan(wire)
        box["S"] = yield from side_S(ch)
        yield from ch.close()

    def r():
        return (yield from side_R(Chan(wire)))

    got_R, _ = run_pair(r(), s(), "two-party comparison")
    return box["S"], got_R


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
