"""The parties of gsm (seed 004 §5–§7): Device, Terminal, ServiceProvider.

Every incoming message is validated (sizes, ranges, group membership under the right key, signature,
expiry, packing parameters) before any state changes, else ``ProtocolError``. A terminal session is
used once: the round-3 answer either decides or aborts (⊥), and a second answer is refused.
"""
from __future__ import annotations

import dataclasses
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import gmpy2
import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ...crypto import packing
from ...crypto.compare import Evaluator, EvaluatorResult, Garbler
from ...crypto.garble import OutputLabelError
from ...crypto.ot import ED25519, OTRequest
from ...crypto.paillier import PaillierCiphertext, PaillierPublicKey, RnPool, generate_paillier_keypair
from ...crypto.parallel import parallel_map, run_chunks
from ...errors import CryptoError, ProtocolError
from ..common import check_subject_id, evaluate_garbled
from . import zk
from .messages import (
    VARIANT_IDS,
    Challenge,
    CompareChallenge,
    CompareFinish,
    CompareRequest,
    Decision,
    EnrolRequest,
    LegacyTemplate,
    Reply,
    Template,
    check_key_width,
    key_width,
    reply_width,
)
from .params import GsmParams, check_variant

PROTOCOL = "gsm"
SIGNATURE_CONTEXT = b"privface/gsm/first-message/v1\x00"
ENROL_CONTEXT = b"privface/gsm/enrol/v1\x00"
OT_GROUP = ED25519
"""Π3's OT group: the Naor–Pinkas OT of ``crypto.ot`` on edwards25519 (128-bit; seed 004 §9 runs Chou–Orlandi
on Curve25519) — 32-byte elements and scalar multiplications instead of MODP exponentiations."""
PROVIDER_PACKING = "pi3"
"""The provider packs for Π3, whose d also covers Π2 and Π1, so one signed m1 serves every variant."""


# ---------------------------------------------------------------- validation helpers


def check_id(subject_id: str) -> None:
    check_subject_id(PROTOCOL, subject_id)


def check_template(u, params: GsmParams) -> list[int]:
    """u as ints: ℓ coordinates with |u_i| ≤ ζ and Σu_i² = ζ² exactly (seed 004 Fig. 1: ‖u‖ = ζ)."""
    arr = np.asarray(u)
    if arr.ndim != 1 or arr.shape[0] != params.ell or arr.dtype.kind not in "iu":
        raise ProtocolError(f"a gsm template must be {params.ell} integers, got shape {arr.shape} dtype {arr.dtype}")
    vals = [int(x) for x in arr]
    if max(abs(x) for x in vals) > params.zeta or sum(x * x for x in vals) != params.zeta**2:
        raise ProtocolError(f"a gsm template must have |u_i| ≤ ζ and Σu_i² = ζ² (ζ = {params.zeta})")
    return vals


def public_key(n: int, params: GsmParams) -> PaillierPublicKey:
    """epk = N from a message, refused below the configured size."""
    try:
        pk = PaillierPublicKey(n, insecure_test_params=params.insecure_test_params)
    except CryptoError as e:
        raise ProtocolError(f"invalid Paillier public key: {e}") from None
    if pk.bits < params.paillier_bits:
        raise ProtocolError(f"a {pk.bits}-bit Paillier key is below the required {params.paillier_bits} bits")
    return pk


def ciphertext(pk: PaillierPublicKey, value: int) -> PaillierCiphertext:
    try:
        return pk.ciphertext(value)
    except CryptoError as e:
        raise ProtocolError(f"invalid ciphertext: {e}") from None


def signed_bytes(m1: Template | LegacyTemplate) -> bytes:
    """What the provider signs (Fig. 4 enrolment; Fig. 4/5 round 2 step 1 verifies): m1 without σ (in its own
    wire version: a ``LegacyTemplate`` was signed in minimal-length integers)."""
    return SIGNATURE_CONTEXT + dataclasses.replace(m1, signature=b"").to_bytes()


def enrol_context(subject_id: str, provider_key: Ed25519PublicKey) -> bytes:
    """Fiat–Shamir context of Π_epk and Fig. 9: the subject and the provider's key, so a transcript made for
    one enrolment cannot be replayed for another subject or to another provider."""
    vk = provider_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return ENROL_CONTEXT + len(subject_id.encode()).to_bytes(2, "big") + subject_id.encode() + vk


WINDOW_BITS = 4


def window_tables(pk: PaillierPublicKey, bases: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """b^0 … b^(2^WINDOW_BITS − 1) mod N² per base: built once per first message (it is reusable), they cut
    the multiplications of ``packed_inner_product`` from ~m/2 to m/WINDOW_BITS per exponent."""
    N2, out = pk.nsquare, []
    for c in bases:
        row = [gmpy2.mpz(1), gmpy2.mpz(c)]
        for _ in range(2, 1 << WINDOW_BITS):
            row.append(row[-1] * c % N2)
        out.append(tuple(row))
    return tuple(out)


def slot_bases(pk: PaillierPublicKey, cts: Sequence[int], pp: packing.PackingParams, count: int) -> list[int]:
    """B_{j,i} = ⟦u*_j⟧^(2^(k·t_i)) = ⟦2^(k·t_i)·u*_j⟧ for the first ``count`` indices jn + i (seed 004 §4
    Encode₁ block positions t_i): then Σ_j u*_j·w*_j = Σ_{j,i} w_{j,i}·2^(k·t_i)·u*_j is one product
    Π B_{j,i}^(w_{j,i}) with m-bit exponents — the squarings of the Horner step move to ``Terminal.receive``."""
    N2, n, k, pos = pk.nsquare, pp.n, pp.k, pp.positions

    def row(c) -> list:
        b, out = gmpy2.powmod(c, 1 << (k * pos[0]), N2), []
        for i in range(n):
            out.append(b)
            if i + 1 < n:
                b = gmpy2.powmod(b, 1 << (k * (pos[i + 1] - pos[i])), N2)
        return [out]

    return [b for r in parallel_map(row, list(cts)) for b in r[0]][:count]


def _windowed_product(pairs: Sequence[tuple[Sequence[int], int]], N2, bits: int):
    """Π b^e mod N² over (window table of b, e) pairs, e < 2^bits: one squaring per window position for
    all pairs together, one multiplication per non-zero window digit."""
    top, digit, acc = -(-bits // WINDOW_BITS) * WINDOW_BITS, (1 << WINDOW_BITS) - 1, gmpy2.mpz(1)
    for shift in range(top - WINDOW_BITS, -1, -WINDOW_BITS):
        if acc != 1:
            acc = gmpy2.powmod(acc, 1 << WINDOW_BITS, N2)
        for table, e in pairs:
            d = e >> shift & digit
            if d:
                acc = acc * table[d] % N2
    return acc


def packed_inner_product(pk: PaillierPublicKey, tables: Sequence[Sequence[int]], w: Sequence[int],
                         pp: packing.PackingParams, *, per_slot: bool = False, workers: int | None = None) -> int:
    """⟦Σ_j u*_j·w*_j⟧ (Fig. 3 round 2 step 2) with w*_j = Encode₁(w_{jn+1..jn+n}), w_i ∈ Z_{2^m}.

    ``per_slot``: ``tables`` = ``window_tables`` of the ``slot_bases`` B_{j,i} (precomputed for a reused
    m1), and the result is the single product Π B_{j,i}^(w_{j,i}), split over ``workers`` threads.
    Otherwise ``tables`` = ``window_tables`` of ⟦u*_1⟧…⟦u*_t⟧: Σ_j u*_j·w*_j = Σ_i 2^(k·t_i)·Σ_j w_{j,i}·u*_j,
    so per slot i one windowed product P_i = Π_j ⟦u*_j⟧^(w_{j,i}), then Horner over the block positions t_i
    — far fewer squarings than raising each ⟦u*_j⟧ to the long integer w*_j.
    """
    N2, n, k, pos, m = pk.nsquare, pp.n, pp.k, pp.positions, pp.m
    if per_slot:
        pairs = [(t, int(e)) for t, e in zip(tables, w) if e]
        acc = gmpy2.mpz(1)
        for part in run_chunks(lambda c: [_windowed_product(c, N2, m)], [pairs[i::2] for i in range(2)], workers):
            acc = acc * part % N2
        return acc
    slots = [_windowed_product([(tables[j], int(w[j * n + i])) for j in range(len(tables))
                                if j * n + i < len(w) and w[j * n + i]], N2, m) for i in range(n)]
    acc = slots[-1]
    for i in range(n - 2, -1, -1):
        acc = gmpy2.powmod(acc, 1 << (k * (pos[i + 1] - pos[i])), N2) * slots[i] % N2
    return gmpy2.powmod(acc, 1 << (k * pos[0]), N2)


def pack_ciphertexts(pk: PaillierPublicKey, cts: Sequence[int], pp: packing.PackingParams) -> list[int]:
    """⟦Encode₁(v_{jn+1..jn+n})⟧ from ⟦v_1⟧…⟦v_ℓ⟧ by Horner over the block positions (the provider's
    conversion in Fig. 4 enrolment)."""
    N2, n, k, pos = pk.nsquare, pp.n, pp.k, pp.positions
    out = []
    for j in range(0, len(cts), n):
        chunk = cts[j:j + n]
        acc = gmpy2.mpz(chunk[-1])
        for i in range(len(chunk) - 2, -1, -1):
            acc = gmpy2.powmod(acc, 1 << (k * (pos[i + 1] - pos[i])), N2) * chunk[i] % N2
        out.append(int(gmpy2.powmod(acc, 1 << (k * pos[0]), N2)))
    return out


# ---------------------------------------------------------------- device


class Device:
    """Holds its Paillier key pair (esk never leaves it) and its first message m1 (§5–§7)."""

    def __init__(self, subject_id: str, params: GsmParams = GsmParams(), *, keypair=None,
                 provider_key: Ed25519PublicKey | None = None, workers: int | None = None) -> None:
        check_id(subject_id)
        self.workers = workers
        self.subject_id = subject_id
        self.params = params
        if keypair is None:  # a Paillier–Blum key, as Π_epk (zk.prove_modulus) requires
            keypair = generate_paillier_keypair(params.paillier_bits, insecure_test_params=params.insecure_test_params,
                                                blum=True)
        self.pk, self._sk = keypair
        self.provider_key = provider_key
        self._m1: Template | LegacyTemplate | None = None

    def _encrypt(self, m: int) -> int:
        return int(self._sk.encrypt(m).value)

    def pi1_enrol(self, u) -> Template:
        """Fig. 3 enrolment: encode u′ = u + c into t level-1 encodings and encrypt them; m1 also carries
        ⟦S_u⟧ (params.py). Π1 is semi-honest: nobody signs, the device itself is trusted."""
        p = self.params
        shifted = [x + p.offset for x in check_template(u, p)]
        pp = p.packing(self.pk.bits, "pi1")
        packed = [self._encrypt(e) for e in packing.encode1_vector(pp, shifted)]
        self._m1 = Template(self.subject_id, key_width(self.pk.n), int(self.pk.n), pp.n, pp.d, packed,
                            self._encrypt(sum(shifted)), 0)
        return self._m1

    def enrol_start(self, u, *, workers: int | None = 1) -> EnrolRequest:
        """Π_en round 1 (§6 enrolment, §8): Π_en-Enc c_i = ⟦u_i; r_i⟧ of the signed values (u_i mod N), then
        Π_epk and the Fig. 9 proof with Fiat–Shamir, bound to this subject and provider (``enrol_context``).

        Signed values and Fig. 10: the statement proven is Σ x̃_i² = ζ² over the integers for the centred
        representatives x̃_i ∈ (−N/2, N/2] of the plaintexts — which for an honest device are the u_i
        themselves. Completeness: with ρ_i uniform in Z_N, α < 2^λ and |u_i| ≤ ζ, the integer α·u_i + ρ_i lies
        in [0, N) except with probability ≤ 2^(λ+m)/N, so F.2's "no wrap-around" chain holds with u_i in place
        of a non-negative x_i. Soundness: the verifier only ever operates on ciphertexts (elements of Z_N), so
        §8.3's argument (a check mod N and one mod a prime N̂ drawn after the c_i are fixed) binds the integer
        Σ x̃_i², and Σ x̃_i² = ζ² forces |x̃_i| ≤ ζ — the bound IP_max = ζ² of Π2/Π3 relies on. Shifting to
        non-negative u_i + c instead would need Σ(u_i + c)² = ζ² + 2c·S_u + ℓc², i.e. reveal S_u."""
        if self.provider_key is None:
            raise ProtocolError("the device needs the provider's verification key to enrol")
        vals = check_template(u, self.params)
        ctx = enrol_context(self.subject_id, self.provider_key)
        try:
            cts, witness = zk.encrypt_with_witness(self._sk, vals, workers=workers)
            modulus = zk.prove_modulus(self._sk, context=ctx, workers=workers)
        except CryptoError as e:
            raise ProtocolError(f"cannot prove this key: {e}") from None
        ptxt = zk.prove_plaintext_knowledge(self.pk, cts, witness, context=ctx)
        return EnrolRequest(self.subject_id, key_width(self.pk.n), int(self.pk.n), [int(c.value) for c in cts],
                            modulus.to_bytes(), ptxt.to_bytes())

    def enrol_respond(self, challenge: zk.NormChallenge, *, workers: int | None = 1) -> zk.NormResponse:
        """Π_en round 2, Fig. 10 prover: answer the provider's norm challenge (validated first)."""
        return zk.norm_response(self._sk, challenge, self.params.ell, workers=workers)

    def unproven_enrol_request(self, u) -> EnrolRequest:
        """⟦u_1⟧…⟦u_ℓ⟧ without the §8 proofs — only a provider built with ``insecure_skip_proofs`` (evaluation
        and benchmarks of the matching protocols) accepts it."""
        vals = check_template(u, self.params)
        return EnrolRequest(self.subject_id, key_width(self.pk.n), int(self.pk.n), [self._encrypt(x) for x in vals])

    def accept_enrolment(self, m1: Template | LegacyTemplate) -> None:
        """Keep the provider's signed m1 after checking it is ours (and σ, when the provider key is known)."""
        if not isinstance(m1, (Template, LegacyTemplate)):
            raise ProtocolError(f"expected a first message, got {type(m1).__name__}")
        if m1.subject_id != self.subject_id or m1.pk_n != self.pk.n:
            raise ProtocolError("the provider's first message is for another device or key")
        if isinstance(m1, Template):
            check_key_width(m1)
        if self.provider_key is not None:
            verify_signature(self.provider_key, m1)
        self._m1 = m1

    def first_message(self) -> Template | LegacyTemplate:
        """Round 1 (all variants): m1, reusable across sessions and sendable ahead of the capture."""
        if self._m1 is None:
            raise ProtocolError("the device is not enrolled")
        return self._m1

    def _packing(self) -> packing.PackingParams:
        m1 = self.first_message()
        return packing.PackingParams(self.params.m, m1.n, m1.d, self.params.lam, self.pk.bits - 1, self.params.layout)

    def _decode(self, value: int) -> int:
        return self._decode_many(value)[0]

    def _decode_many(self, *values: int) -> list[int]:
        """Σ slots of Decode₂(Plr.Dec(esk, c)) mod 2^k per ciphertext (Fig. 3 round 3 step 1); the CRT halves
        of all decryptions run on ``workers`` threads."""
        pp = self._packing()
        plain = self._sk.decrypt_many([ciphertext(self.pk, v) for v in values], workers=self.workers)
        return [packing.decode2_sum(pp, x) for x in plain]

    def _check_challenge(self, ch: Challenge, variant: str) -> None:
        if ch.variant != VARIANT_IDS[variant]:
            raise ProtocolError(f"expected a {variant} challenge, got variant {ch.variant}")
        if (ch.c_y is not None) != (variant == "pi3"):
            raise ProtocolError(f"a {variant} challenge has {'two' if variant == 'pi3' else 'one'} ciphertext(s)")
        if ch.n_bytes != key_width(self.pk.n):
            raise ProtocolError(f"the challenge carries integers of {ch.n_bytes} bytes; this key's are "
                                f"{key_width(self.pk.n)} bytes")

    def pi1_decide(self, ch: Challenge) -> Decision:
        """Fig. 3 round 3: IP = Σ IP_i (here J − ζ²); send [IP ≥ T]. The device learns IP (L_dev)."""
        self._check_challenge(ch, "pi1")
        ip = self._decode(ch.c_x) - self.params.zeta**2
        return Decision(ip >= self.params.threshold)

    def pi2_reply(self, ch: Challenge) -> Reply:
        """Fig. 4 round 3: decode and return X = a·J + b; the device learns nothing (uniform b)."""
        self._check_challenge(ch, "pi2")
        return Reply(reply_width(self._packing().k), self._decode(ch.c_x))

    def pi3_inputs(self, ch: Challenge) -> tuple[int, int]:
        """Fig. 5 round 3 steps 1–2: X = J + pad and Y = a·J + b."""
        self._check_challenge(ch, "pi3")
        X, Y = self._decode_many(ch.c_x, ch.c_y)
        return X, Y

    def pi3_request(self, ch: Challenge) -> tuple[CompareRequest, Evaluator]:
        """Fig. 5 round 3 step 3: ot^rec ← OT.Round₁((X mod 2^x_bits, Y mod 2^w)). Returns the message and
        this session's evaluator (its OT secrets)."""
        X, Y = self.pi3_inputs(ch)
        w, xb = self.params.circuit_bits, self.params.x_bits
        evaluator = Evaluator.gsm_pi3(w, X % (1 << xb), Y % (1 << w), range_check=True, group=OT_GROUP,
                                      a_bits=self.params.a_bits, x_bits=xb)
        return CompareRequest(evaluator.request().to_bytes()), evaluator

    @staticmethod
    def pi3_finish(evaluator: Evaluator, msg: CompareChallenge) -> CompareFinish:
        """Fig. 5 round 5: OT.Output, Eval(C̃, …) and send the output labels (the terminal decodes them and
        tells the device the bit — the crypto.compare evaluator cannot decode labels itself)."""
        return CompareFinish(evaluate_garbled(evaluator, msg.garbler_message, "terminal"))


# ---------------------------------------------------------------- terminal


@dataclass(frozen=True)
class Enrolled:
    """A validated first message at the terminal: key, packed ciphertexts, ⟦S_u⟧, packing. Reusable."""

    subject_id: str
    pk: PaillierPublicKey
    c_packed: tuple[int, ...]
    c_sum: int
    packing: packing.PackingParams
    pool: RnPool = field(repr=False, compare=False)
    tables: tuple = field(repr=False, compare=False, default=())
    fold: int = field(repr=False, compare=False, default=1)
    per_slot: bool = field(repr=False, compare=False, default=False)


@dataclass
class TerminalSession:
    """Terminal state between round 2 and the device's answer: the variant and its secrets (a, b, pad)."""

    variant: str
    a: int = field(default=1, repr=False)
    b: int = field(default=0, repr=False)
    pad: int = field(default=0, repr=False)
    open: bool = True
    extra: object = field(default=None, repr=False)
    x_bytes: int = 0  # Π2: the width of the device's X (``reply_width`` of the packing's k)


def verify_signature(key: Ed25519PublicKey, m1: Template | LegacyTemplate) -> None:
    try:
        key.verify(m1.signature, signed_bytes(m1))
    except InvalidSignature:
        raise ProtocolError("the provider's signature on the first message does not verify") from None


class Terminal:
    """Holds its measurement w only during a session; verifies m1 with the provider's Ed25519 key (every
    variant; without that key, only Π1's self-encoded m1)."""

    def __init__(self, params: GsmParams = GsmParams(), *, provider_key: Ed25519PublicKey | None = None,
                 clock: Callable[[], float] = time.time, workers: int | None = None) -> None:
        self.params = params
        self.provider_key = provider_key
        self.clock = clock
        self.workers = workers

    def receive(self, m1: Template | LegacyTemplate, variant: str, *, reuse: bool = False) -> Enrolled:
        """Round 1, terminal side (Fig. 4/5 round 2 step 1: ⊥ unless Verify(vk, m1, σ) = 1 and m1 has not
        expired). A terminal holding the provider's key checks σ for every variant, Π1 included, so the subject
        an m1 names is the provider's word; only a terminal without a provider key takes Π1's self-encoded,
        unsigned m1 (Fig. 3: the semi-honest device enrols itself — in-process evaluation, never the service).

        ``reuse``: the m1 will serve many sessions (§5: it is reusable), so precompute the ``slot_bases`` and
        their window tables once — about t·k·t_n squarings here instead of per session. The rerandomising
        r^N stay uniform (r ← Z*_N): the device knows the factorisation, so a short-exponent shortcut
        (DJN10 §4.2) would not hide the terminal's secrets from a device that picked p − 1 smooth."""
        p, variant = self.params, check_variant(variant)
        if not isinstance(m1, (Template, LegacyTemplate)):
            raise ProtocolError(f"expected a first message, got {type(m1).__name__}")
        check_id(m1.subject_id)
        if isinstance(m1, Template):
            check_key_width(m1)
        if self.provider_key is not None:  # every variant: an unsigned Π1 m1 would name any subject
            verify_signature(self.provider_key, m1)
            if m1.expires_at <= self.clock():
                raise ProtocolError("the first message has expired; the device must enrol again")
        elif variant != "pi1":
            raise ProtocolError(f"{variant} needs the service provider's verification key")
        pk = public_key(m1.pk_n, p)
        try:
            pp = packing.PackingParams(p.m, m1.n, m1.d, p.lam, pk.bits - 1, p.layout)
        except CryptoError as e:
            raise ProtocolError(f"bad packing parameters in the first message: {e}") from None
        if m1.n > p.ell or m1.d < p.min_d(variant, m1.n):
            raise ProtocolError(f"the first message's packing (n = {m1.n}, d = {m1.d}) is unsafe for {variant}")
        if len(m1.c_packed) != math.ceil(p.ell / m1.n):
            raise ProtocolError(f"the first message must hold ⌈ℓ/n⌉ = {math.ceil(p.ell / m1.n)} ciphertexts")
        cts = tuple(int(ciphertext(pk, c).value) for c in m1.c_packed)
        c_sum = int(ciphertext(pk, m1.c_sum).value)
        N2 = pk.nsquare
        # ⟦B − c·S_u⟧ = ⟦S_u⟧^(−c)·g^B: c = 2^(m−1) is short, so invert once instead of raising to N − c
        fold = gmpy2.powmod(gmpy2.invert(c_sum, N2), p.offset, N2) * pk.plain_factor(p.s_max) % N2
        bases = slot_bases(pk, cts, pp, p.ell) if reuse else cts
        return Enrolled(m1.subject_id, pk, cts, c_sum, pp, RnPool(pk), window_tables(pk, bases), int(fold), reuse)

    def _inner(self, e: Enrolled, w_shifted: list[int]):
        """⟦z̃⟧ = ⟦Σ_j u*_j·w*_j + B − c·S_u⟧ (Fig. 3 round 2 steps 2–3), shared by both ciphertexts of Π3."""
        z = packed_inner_product(e.pk, e.tables, w_shifted, e.packing, per_slot=e.per_slot, workers=self.workers)
        return z * e.fold % e.pk.nsquare

    def _level2(self, e: Enrolled, z, s_w: int, a: int, shift: int) -> PaillierCiphertext:
        """⟦Mask(a·z̃ + ρ̃)⟧ whose slots sum to a·J + shift (mod 2^k), with ⟦z̃⟧ = ``_inner``
        (Fig. 3 round 2 steps 2–4; Fig. 4/5 with a and b or pad folded into the zero-sum shares)."""
        p, pk, pp = self.params, e.pk, e.packing
        N2, c, B = pk.nsquare, p.offset, p.s_max
        if a != 1:
            z = gmpy2.powmod(z, a, N2)
        k0 = -B - c * s_w + p.ell * c * c + p.zeta**2  # Σ slots of z̃ + k0 = ⟨u′, w′⟩ − c·S_u − c·S_w + ℓc² + ζ² = J
        offset = packing.mask_offset(pp) + packing.slot_shares(pp, (a * k0 + shift) % (1 << pp.k))
        return PaillierCiphertext._trusted(pk, z * pk.plain_factor(offset) % N2).rerandomize(pool=e.pool)

    def challenge(self, e: Enrolled, w, variant: str) -> tuple[Challenge, TerminalSession]:
        """Round 2 of Π1 (Fig. 3), Π2 (Fig. 4) or Π3 (Fig. 5) for the measurement w."""
        p, variant = self.params, check_variant(variant)
        if p.min_d(variant, e.packing.n) > e.packing.d:
            raise ProtocolError(f"this first message was validated for a weaker variant than {variant}")
        w_shifted = [x + p.offset for x in check_template(w, p)]
        s_w, z = sum(w_shifted), self._inner(e, w_shifted)
        width = key_width(e.pk.n)
        if variant == "pi1":
            return Challenge(1, width, int(self._level2(e, z, s_w, 1, 0).value)), TerminalSession("pi1")
        a = 1 + secrets.randbelow(2**p.a_bits - 1)
        b = secrets.randbelow(2**p.b_bits)
        cy = self._level2(e, z, s_w, a, b)
        if variant == "pi2":
            return Challenge(2, width, int(cy.value)), TerminalSession("pi2", a, b, x_bytes=reply_width(e.packing.k))
        pad = secrets.randbelow(2**p.pad_bits)
        cx = self._level2(e, z, s_w, 1, pad)
        return Challenge(3, width, int(cx.value), int(cy.value)), TerminalSession("pi3", a, b, pad)

    @staticmethod
    def _take(session: TerminalSession, variant: str) -> None:
        if not isinstance(session, TerminalSession) or session.variant != variant:
            raise ProtocolError(f"not a {variant} session")
        if not session.open:
            raise ProtocolError("this session has already been answered")

    def pi1_finish(self, session: TerminalSession, msg: Decision) -> bool:
        """Fig. 3 output: the device's bit."""
        self._take(session, "pi1")
        if not isinstance(msg, Decision) or msg.aborted:
            raise ProtocolError("the device aborted or sent no decision")
        session.open = False
        return bool(msg.match)

    def pi2_finish(self, session: TerminalSession, msg: Reply) -> Decision:
        """Fig. 4 round 4: IP′ = (X′ − b)/a; ⊥ unless IP′ is an integer within [−IP_max, IP_max]
        (here J′ ∈ [0, 2ζ²]); else [IP ≥ T]. The terminal learns IP (L_term)."""
        self._take(session, "pi2")
        if not isinstance(msg, Reply):
            raise ProtocolError("expected the device's reply X")
        session.open = False
        if msg.x_bytes != session.x_bytes:
            raise ProtocolError(f"the reply X carries {msg.x_bytes} bytes; this session's are {session.x_bytes}")
        j, rem = divmod(msg.x - session.b, session.a)
        if rem or not 0 <= j <= self.params.j_max:
            return Decision(False, aborted=True)
        return Decision(j - self.params.zeta**2 >= self.params.threshold)


    def pi3_compare(self, session: TerminalSession, msg: CompareRequest) -> CompareChallenge:
        """Fig. 5 round 4: garble Fig. 6 (with the range check, ``crypto.compare.gsm_pi3_circuit``) on
        (pad mod 2^x_bits, a, b mod 2^w, T + ζ², J_max) and answer the OT request. A bad request changes no
        state."""
        self._take(session, "pi3")
        if session.extra is not None:
            raise ProtocolError("this Π3 session already sent its garbled circuit")
        p, w, xb = self.params, self.params.circuit_bits, self.params.x_bits
        garbler = Garbler.gsm_pi3(w, session.pad % (1 << xb), session.a, session.b % (1 << w),
                                  p.threshold + p.zeta**2, ip_max=p.j_max, group=OT_GROUP, a_bits=p.a_bits,
                                  x_bits=xb)
        try:
            reply = garbler.respond(OTRequest.from_bytes(msg.ot_request))
        except CryptoError as e:
            raise ProtocolError(f"bad OT request: {e}") from None
        session.extra = garbler
        return CompareChallenge(reply.to_bytes())

    def pi3_finish(self, session: TerminalSession, msg: CompareFinish) -> Decision:
        """Fig. 5 output: decode the labels; ⊥ if a·IP + b ≠ Y, IP > J_max or a label is invalid."""
        self._take(session, "pi3")
        if session.extra is None:
            raise ProtocolError("the Π3 session has no garbled circuit yet")
        try:
            result = EvaluatorResult.from_bytes(msg.output_labels)
        except CryptoError as e:
            raise ProtocolError(f"malformed output labels: {e}") from None
        try:
            consistent, match, in_range = session.extra.decide_bits(result)
        except OutputLabelError:
            session.open = False
            return Decision(False, aborted=True)
        except CryptoError as e:
            raise ProtocolError(f"malformed output labels: {e}") from None
        session.open = False
        if not (consistent and in_range):
            return Decision(False, aborted=True)
        return Decision(match)


# ---------------------------------------------------------------- service provider


@dataclass
class EnrolSession:
    """Provider state between enrol/start and enrol/finish: the validated statement and the Fig. 10
    verifier holding its secret challenge (single use)."""

    subject_id: str
    pk: PaillierPublicKey
    cts: list = field(repr=False)
    verifier: zk.NormVerifier = field(repr=False)


class ServiceProvider:
    """Enrols devices (§6 enrolment Π_en): verifies Π_epk and Fig. 9, runs the Fig. 10 norm check, then
    packs the ciphertexts and signs m1 (Ed25519). Two rounds: ``enrol_start`` → NormChallenge,
    ``enrol_finish`` → signed Template.

    ``insecure_skip_proofs`` enables ``enrol_unproven`` (no proofs: any norm, any key) — for evaluation and
    benchmarks of Π1–Π3 only, never in the service.
    """

    def __init__(self, params: GsmParams = GsmParams(), *, signing_key: Ed25519PrivateKey | None = None,
                 insecure_skip_proofs: bool = False, workers: int | None = 1,
                 clock: Callable[[], float] = time.time) -> None:
        self.params = params
        self._signing_key = signing_key or Ed25519PrivateKey.generate()
        self.insecure_skip_proofs = insecure_skip_proofs
        self.workers = workers
        self.clock = clock

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._signing_key.public_key()

    def _statement(self, req: EnrolRequest) -> tuple[PaillierPublicKey, list[PaillierCiphertext]]:
        p = self.params
        if not isinstance(req, EnrolRequest):
            raise ProtocolError(f"expected an EnrolRequest, got {type(req).__name__}")
        check_id(req.subject_id)
        check_key_width(req)
        pk = public_key(req.pk_n, p)
        if len(req.c_u) != p.ell:
            raise ProtocolError(f"enrolment needs ℓ = {p.ell} ciphertexts, got {len(req.c_u)}")
        return pk, [ciphertext(pk, c) for c in req.c_u]

    def enrol_start(self, req: EnrolRequest, *, pool: RnPool | None = None) -> tuple[zk.NormChallenge, EnrolSession]:
        """Validate epk and ⟦u_i⟧, verify Π_epk (CGGMP20 Π^mod) and Fig. 9 (Fiat–Shamir, ``enrol_context``),
        and issue the Fig. 10 challenge for y = ζ². Nothing is kept unless every check passes. ``pool``: r^N
        values computed ahead of time (uniform r: the device knows the factorisation, so no short-exponent
        shortcut — it could pick p − 1 smooth and solve for α)."""
        pk, cts = self._statement(req)
        if not req.modulus_proof or not req.plaintext_proof:
            raise ProtocolError("enrolment needs the zero-knowledge proofs of §8 (Π_epk, Fig. 9)")
        ctx = enrol_context(req.subject_id, self.public_key)
        modulus = zk.ModulusProof.from_bytes(req.modulus_proof, pk)
        ptxt = zk.PlaintextKnowledgeProof.from_bytes(req.plaintext_proof, pk)
        if not zk.verify_modulus(pk, modulus, context=ctx, workers=self.workers):
            raise ProtocolError("Π_epk does not verify: the Paillier modulus is not proven well formed")
        if not zk.verify_plaintext_knowledge(pk, cts, ptxt, context=ctx):
            raise ProtocolError("the Fig. 9 proof does not verify: plaintext knowledge not shown")
        verifier = zk.NormVerifier(pk, cts, self.params.zeta**2, pool=pool, workers=self.workers)
        return verifier.challenge(), EnrolSession(req.subject_id, pk, cts, verifier)

    def enrol_finish(self, session: EnrolSession, resp: zk.NormResponse) -> Template:
        """Fig. 10 verification (‖u‖² = ζ² over the integers), then pack and sign. The session's challenge is
        used once: a wrong answer ends the enrolment (the device starts again)."""
        if not isinstance(session, EnrolSession):
            raise ProtocolError("enrol/finish needs the session of an enrol/start")
        if not session.verifier.verify(resp):
            raise ProtocolError("the Fig. 10 norm proof does not verify: the template's norm is not "
                                f"ζ = {self.params.zeta}")
        return self._sign(session.subject_id, session.pk, session.cts)

    def enrol_unproven(self, req: EnrolRequest) -> Template:
        """Pack and sign without any proof — refused unless ``insecure_skip_proofs`` (evaluation, benchmarks)."""
        if not self.insecure_skip_proofs:
            raise ProtocolError("enrolment needs the zero-knowledge proofs of §8 (Π_epk, Fig. 9, Fig. 10)")
        return self._sign(req.subject_id, *self._statement(req))

    def _sign(self, subject_id: str, pk: PaillierPublicKey, cts: list[PaillierCiphertext]) -> Template:
        """Convert ⟦u_i⟧ into ⟦u*_j⟧ of u′ = u + c, add ⟦S_u⟧, sign (Fig. 4 enrolment)."""
        p = self.params
        pp = p.packing(pk.bits, PROVIDER_PACKING)
        packed = pack_ciphertexts(pk, [int(c.value) for c in cts], pp)
        shift = [packing.encode1(pp, [p.offset] * len(cts[j:j + pp.n])) for j in range(0, p.ell, pp.n)]
        N2 = pk.nsquare
        packed = [int(v * pk.plain_factor(s) % N2) for v, s in zip(packed, shift)]
        c_sum = sum(cts[1:], cts[0]) + p.ell * p.offset
        m1 = Template(subject_id, key_width(pk.n), int(pk.n), pp.n, pp.d, packed, int(c_sum.value),
                      int(self.clock()) + p.lifetime)
        return dataclasses.replace(m1, signature=self._signing_key.sign(signed_bytes(m1)))
