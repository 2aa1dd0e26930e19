"""The parties of im2020 (seed 000 §IV-B, §VII): Client, Server, TrustedParty.

Messages are the dataclasses of ``messages.py``; every incoming one is validated (sizes, ranges, group
membership under the right key, signature) before any state changes, else ``ProtocolError``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ...crypto import catalano_fiore as cf
from ...crypto.compare import Evaluator, EvaluatorResult, Garbler, inverse_square
from ...crypto.joye_libert import JoyeLibertPublicKey, generate_joye_libert_keypair
from ...crypto.ot import ED25519, OTRequest, ReceiverRandomness
from ...errors import (
    BackendMismatchError,
    CryptoError,
    PrivfaceError,
    ProtocolError,
    SubjectExistsError,
    UnknownSubjectError,
    check_backend,
)
from ...faces.thresholds import operating_point
from ...store.base import TemplateStore
from ...templates.quantize import quantize
from ...wire import message_type
from ..common import check_subject_id, evaluate_garbled
from .blind import Decision, Randomizers, blind_esed, decide, unblind
from .messages import (
    LEGACY,
    AuthChallenge,
    AuthFinish,
    AuthResult,
    AuthStart,
    CompareChallenge,
    CompareFinish,
    CompareRequest,
    EnrolRequest,
    EnrolResponse,
    RevokeChallenge,
    Revoked,
    RevokeProof,
    RevokeRequest,
    RevokeResponse,
    RevokeStart,
    SignedEnrolRequest,
    TPImageRequest,
    TPRequest,
    TPResponse,
    upgraded,
)
from .params import Im2020Params

OT_GROUP = ED25519
"""The secure-comparison mode's OT group (§VII Fig. 8 inputs by OT): the Naor–Pinkas OT of ``crypto.ot`` on
edwards25519 (128-bit, as gsm Π3) — scalar multiplications instead of 2048-bit MODP exponentiations, and the
same group at both parameter sets (MODP-2048 would hold the 128-bit set to 112 bits)."""

PROTOCOL = "im2020"
SWAP_TRIES = 16  # compare-and-swap rounds before a write that keeps losing to concurrent ones gives up
SIGNATURE_CONTEXT = b"privface/im2020/tp-registration/v3\x00"
"""Domain separation of the TP's σ over ID‖backend‖C‖pk‖serial‖expires (v3, issue 36); neither the v2 σ (no backend)
nor the v1 σ (over ID‖C‖pk) is accepted."""
REVOKE_CONTEXT = b"privface/im2020/revoke-proof/v1\x00"
"""Domain separation of the server's commitment to the answer of a revocation challenge (``revoke_commitment``)."""
TP_VALIDITY = 600
"""Seconds a TP-signed registration stays valid."""
MAX_CLOCK_SKEW = 60
"""Seconds a server accepts a TP-signed registration past its expiry (TP and server clocks differ)."""
# §VII template check: the L2 norm of Γ/scale within the TP's backend's range (``norm_range``), e.g. dlib-resnet128's
# (1.0, 2.0) — its embeddings of the 400 ORL faces have norms in [1.27, 1.57] (×128-quantized too) — or sface's
# (0.9, 1.1) around its unit embeddings; a zero, tiny, saturated or random-box vector falls outside.


def norm_range(backend: str) -> tuple[float, float]:
    """The §VII template-check range for ``backend``'s templates (``faces.thresholds``)."""
    return operating_point(backend).norm_range


# ---------------------------------------------------------------- validation helpers


def check_template(template, params: Im2020Params) -> list[int]:
    """Γ as a list of ints: ``dims`` integer coordinates in [−max_abs, max_abs]."""
    arr = np.asarray(template)
    if arr.ndim != 1 or arr.shape[0] != params.dims or arr.dtype.kind not in "iu":
        raise ProtocolError(f"a template must be {params.dims} integers, got shape {arr.shape} dtype {arr.dtype}")
    if np.abs(arr).max() > params.max_abs:
        raise ProtocolError(f"template coordinates must lie in [−{params.max_abs}, {params.max_abs}]")
    return [int(x) for x in arr]


def public_key(n: int, y: int, k: int, params: Im2020Params) -> JoyeLibertPublicKey:
    """pk = (N, y, k) from a message: N of exactly the configured bits and k exactly the configured k, checked
    first — a larger N or k makes every BlindESED (§IV-B.3) on it costlier, so no other size is accepted."""
    if n.bit_length() != params.jl.bits or k != params.jl.k:
        raise ProtocolError(f"this server accepts only public keys with a {params.jl.bits}-bit N and k = "
                            f"{params.jl.k}, got a {n.bit_length()}-bit N and k = {k}")
    try:
        return JoyeLibertPublicKey(n, y, k, insecure_test_params=params.insecure_test_params)
    except CryptoError as e:
        raise ProtocolError(f"invalid public key: {e}") from None


def level1_vector(pk: JoyeLibertPublicKey, a: Sequence[int], beta: Sequence[int], dims: int, *,
                  group_check: bool = True) -> list[cf.Level1]:
    """C = ((a_i, β_i)) with a_i ∈ M = [0, 2^k) and β_i a valid ciphertext under pk. Without ``group_check``
    only 0 < β_i < N is checked here and the caller must run ``pk.validate`` on each β_i before any result
    leaves (``Server.auth_start`` does so inside BlindESED)."""
    if len(a) != dims or len(beta) != dims:
        raise ProtocolError(f"an encrypted template must have {dims} entries, got {len(a)} a and {len(beta)} β")
    space = pk.message_space
    if any(not 0 <= x < space for x in a):
        raise ProtocolError("an a_i of the encrypted template is outside the message space")
    if group_check:
        return [cf.Level1(x, ciphertext(pk, b)) for x, b in zip(a, beta)]
    try:
        return [cf.Level1(x, b) for x, b in zip(a, pk.in_range(beta))]
    except CryptoError as e:
        raise ProtocolError(f"invalid ciphertext: {e}") from None


def ciphertext(pk: JoyeLibertPublicKey, value: int):
    try:
        return pk.ciphertext(value)
    except CryptoError as e:
        raise ProtocolError(f"invalid ciphertext: {e}") from None


def encrypt_template(key, template: Sequence[int], workers: int | None = None) -> tuple[list[int], list[int]]:
    """(a, β) lists of C = (HE′.Enc(Γ_i)) (§IV-B.2); ``key`` is pk, or sk for the owner's faster batched
    encryption (``JoyeLibertPrivateKey.encrypt_many``) on ``workers`` threads."""
    cs = cf.encrypt_many(key, template, workers)
    return [int(c.a) for c in cs], [int(c.beta.value) for c in cs]


def signed_bytes(req: SignedEnrolRequest) -> bytes:
    """What the TP signs (§VII step 3, with replay protection): ID‖C‖pk‖serial‖expires, as the wire encoding
    of the request with an empty σ."""
    return SIGNATURE_CONTEXT + dataclasses.replace(req, signature=b"").to_bytes()


def enrolment_from_bytes(data: bytes, *, stored: bool = False) -> EnrolRequest | SignedEnrolRequest:
    """A register body: the TP-signed request (§VII) or the plain one (§IV-B.2). A ``stored`` record may be one
    made before enrolments named their face backend (``messages.LEGACY``): read as dlib-resnet128, the only backend
    there was; such a body on the wire is refused (it does not say which backend made Γ)."""
    name = message_type(data)
    if name in LEGACY:
        if not stored:
            raise ProtocolError("this registration does not name its face backend (a privface client older than "
                                "issue 36): upgrade the client")
        return upgraded(name, data)
    if name == SignedEnrolRequest.WIRE_NAME:
        return SignedEnrolRequest.from_bytes(data)
    return EnrolRequest.from_bytes(data)


def revoke_commitment(proof: RevokeProof) -> bytes:
    """SHA-256(REVOKE_CONTEXT ‖ wire encoding of RevokeProof(ID, ρ)): the server's commitment to the only
    answer it accepts. It hides ρ (k ≥ λ uniform bits: 136 at 112-bit, 152 at 128-bit) and binds it."""
    return hashlib.sha256(REVOKE_CONTEXT + proof.to_bytes()).digest()


def stored_state(record: bytes | None) -> tuple[bool, int]:
    """(enrolled, last TP serial) of a stored record: a registration (serial 0 without a TP), a revocation's
    ``Revoked`` tombstone, or none."""
    if record is None:
        return False, 0
    if message_type(record) == Revoked.WIRE_NAME:
        return False, Revoked.from_bytes(record).last_serial
    reg = enrolment_from_bytes(record, stored=True)
    return True, reg.serial if isinstance(reg, SignedEnrolRequest) else 0


# ---------------------------------------------------------------- parties


class Client:
    """Holds its ID and HE′ key pair over Joye–Libert; templates pass through, none is stored."""

    def __init__(self, subject_id: str, params: Im2020Params = Im2020Params(), *, keypair=None,
                 workers: int | None = None, precompute: bool = False) -> None:
        self.subject_id = subject_id
        self.params = params
        self.workers = workers
        if keypair is None:
            keypair = generate_joye_libert_keypair(params.jl, insecure_test_params=params.insecure_test_params)
        self.pk, self._sk = keypair
        self._ot_pool: ReceiverRandomness | None = None  # ``prepare``: the next comparison's OT randomness
        self._ot_lock = threading.Lock()
        if precompute:  # larger discrete-log tables, made once: a faster C3 for a long-lived client
            self._sk.precompute(background=False)

    def prepare(self) -> int:
        """Precompute the randomness of the next C′ and of the next S*'s decryption blinding
        (``precompute_randomness``: 2k + 1 values x^(2^k) mod p) — for a long-lived client, off the critical
        path, e.g. right after an authentication. The next ``auth_start`` then only multiplies in y^m, and C3
        one blinding factor per base decryption. In the secure-comparison mode
        also the OT receiver's randomness of the next comparison (§VII Fig. 8 inputs by OT: k_j, g^{k_j},
        C/g^{k_j} for each bit of s*, ``prepare_comparison``), which needs no s* yet. Returns how many JL
        values were made."""
        self.prepare_comparison()
        return self._sk.precompute_randomness(2 * self.params.dims + 1, self.workers)

    def prepare_comparison(self) -> bool:
        """In the secure-comparison mode, make the OT receiver's randomness of the next comparison ahead of
        time (``ot.ReceiverRandomness`` for k bits, used by one ``compare_request`` and then dropped) — a
        preprocessing phase, as §VII splits its 2PC into preprocessing and online phases; True if it was
        made now."""
        if self.params.mode != "secure-comparison" or len(self._ot_pool or ()) >= self.params.jl.k:
            return False
        pool = ReceiverRandomness(self.params.jl.k, OT_GROUP)
        with self._ot_lock:
            self._ot_pool = pool
        return True

    def _pk_fields(self) -> dict:
        return {"pk_n": int(self.pk.n), "pk_y": int(self.pk.y), "pk_k": int(self.pk.k)}

    def enrol(self, template) -> EnrolRequest:
        """§IV-B.2: ID, pk and C = Enc(Γ)."""
        a, beta = encrypt_template(self._sk, check_template(template, self.params), self.workers)
        return EnrolRequest(self.subject_id, self.params.backend, **self._pk_fields(), c_a=a, c_beta=beta)

    def tp_request(self, template) -> TPRequest:
        """§VII step 2: pk, Γ and ID to the trusted party."""
        return TPRequest(self.subject_id, **self._pk_fields(), template=check_template(template, self.params))

    def tp_image_request(self, image: bytes) -> TPImageRequest:
        """§VII step 2 with the face image instead of Γ: the TP extracts Γ itself."""
        return TPImageRequest(self.subject_id, **self._pk_fields(), image=bytes(image))

    def enrol_signed(self, resp: TPResponse) -> SignedEnrolRequest:
        """§VII step 5: ID, C, pk, the serial, the expiry and σ from the TP's answer."""
        return SignedEnrolRequest(self.subject_id, self.params.backend, **self._pk_fields(), c_a=resp.c_a,
                                  c_beta=resp.c_beta,
                                     serial=resp.serial, expires=resp.expires, signature=resp.signature)

    def auth_start(self, template) -> AuthStart:
        """§IV-B.3: ID and C′ = Enc(Γ′)."""
        a, beta = encrypt_template(self._sk, check_template(template, self.params), self.workers)
        return AuthStart(self.subject_id, self.params.backend, a, beta)

    def blinded_score(self, challenge: AuthChallenge) -> int:
        """s* = Dec(S*) by eq. (2): k + 1 base decryptions on ``workers`` threads."""
        if len(challenge.beta) != self.params.dims:
            raise ProtocolError(f"S* must have {self.params.dims} columns, got {len(challenge.beta)}")
        try:  # every ciphertext is checked (range, unit, J_N) in the decryption threads
            return cf.decrypt_received(self._sk, challenge.alpha, challenge.beta, workers=self.workers)
        except CryptoError as e:
            raise ProtocolError(f"invalid ciphertext: {e}") from None

    def auth_finish(self, challenge: AuthChallenge) -> AuthFinish:
        """Basic mode: send s* itself."""
        if challenge.compare_bits is not None:
            raise ProtocolError("the server runs the secure-comparison mode; use compare_request")
        return AuthFinish(self.blinded_score(challenge))

    def compare_request(self, challenge: AuthChallenge, s_star: int | None = None) -> tuple[CompareRequest, Evaluator]:
        """Secure-comparison mode (§VII Fig. 8): decrypt s*, then as GC evaluator with input s* mod 2^w
        ask by OT for the labels of its bits (``s_star``: an already decrypted s*), with the OT randomness
        ``prepare_comparison`` made ahead of time when there is one (then used up). Returns the message and
        the evaluator (this attempt's state)."""
        w = challenge.compare_bits
        if w not in (64, int(self.pk.k)):
            raise ProtocolError(f"the comparison width must be 64 or k = {self.pk.k}, got {w}")
        if s_star is None:
            s_star = self.blinded_score(challenge)
        with self._ot_lock:  # single use, whether or not it fits; one caller only
            pool, self._ot_pool = self._ot_pool, None
        evaluator = Evaluator.im2020(w, s_star % (1 << w), group=OT_GROUP,
                                     precomputed=pool if pool is not None and len(pool) >= w else None)
        return CompareRequest(evaluator.request().to_bytes()), evaluator

    def revoke_start(self) -> RevokeStart:
        """Ask for a challenge of key possession before revoking (``Server.revoke_start``)."""
        return RevokeStart(self.subject_id)

    def revoke_proof(self, challenge: RevokeChallenge) -> RevokeProof:
        """ρ = Dec(c) (c checked to be a ciphertext: range, unit, J_N), returned only when RevokeProof(ID, ρ)
        opens the server's commitment: so an answer tells the server only the ρ it already knew, and a server
        that sent some other ciphertext (say one β_i of the stored C) gets no decryption back."""
        if len(challenge.commitment) != hashlib.sha256().digest_size:
            raise ProtocolError("the revocation challenge's commitment is not a SHA-256 digest: nothing was sent")
        try:
            (rho,) = self._sk.decrypt_values([challenge.ciphertext])
        except CryptoError as e:
            raise ProtocolError(f"invalid ciphertext in the revocation challenge (a wrong key for this ID, or a "
                                f"faulty server): {e}; nothing was sent") from None
        proof = RevokeProof(self.subject_id, int(rho))
        if not hmac.compare_digest(revoke_commitment(proof), challenge.commitment):
            raise ProtocolError("the server's revocation challenge does not decrypt to the value it committed to "
                                "(a wrong key for this ID, or a faulty server): nothing was sent")
        return proof

    @staticmethod
    def compare_finish(evaluator: Evaluator, msg: CompareChallenge) -> CompareFinish:
        """Evaluate the garbled circuit; the output label goes back undecoded (only the server decodes it)."""
        return CompareFinish(evaluate_garbled(evaluator, msg.garbler_message, "server"))


class ForgedLabelError(ProtocolError):
    """§VII: an output label that is neither label of the output wire — only a cheating client sends one, so a
    service counts it as a rejected attempt (it decided nothing, but it was a guess)."""


@dataclass(frozen=True)
class AuthSession:
    """Server state between auth/start and auth/finish."""

    subject_id: str
    k: int
    randomizers: Randomizers = field(repr=False)


@dataclass(frozen=True)
class CompareSession:
    """Server state between auth/compare and auth/finish in the secure-comparison mode: the garbler,
    which keeps the output decoding."""

    subject_id: str
    garbler: Garbler = field(repr=False)


@dataclass(frozen=True)
class RevokeSession:
    """Server state between revoke/start and revoke/finish: the ID, the SHA-256 of the record the challenge
    was made for, and ρ (one try: the HTTP session is taken by the first revoke/finish)."""

    subject_id: str
    record_digest: bytes
    rho: int = field(repr=False)
    k: int


class Server:
    """Stores per ID the public key, C and, with a TP, σ with its serial and expiry (as the validated
    EnrolRequest or SignedEnrolRequest); after revoking a TP-signed registration, the ``Revoked``
    tombstone with its serial. Never holds a secret key. With a TP key, a registration is refused when expired
    (``clock`` past ``expires`` + ``max_skew``) or when its serial is not above the last one stored for the ID.

    The parsed and validated form of recently used records is kept in memory (``cache_size`` subjects),
    keyed by the exact stored bytes, so a re-registration or revocation by any process is seen at once;
    BlindESED runs on ``workers`` threads.
    """

    def __init__(self, store: TemplateStore, params: Im2020Params = Im2020Params(), *,
                 tp_public_key: ec.EllipticCurvePublicKey | None = None, workers: int | None = None,
                 cache_size: int = 256, clock=time.time, max_skew: float = MAX_CLOCK_SKEW) -> None:
        self.store = store
        self.clock, self.max_skew = clock, max_skew
        self.params = params
        self.tp_public_key = tp_public_key
        self.workers = workers
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[bytes, JoyeLibertPublicKey, list[cf.Level1], str]] = OrderedDict()
        self._cache_lock = threading.Lock()

    def _validated(self, req: EnrolRequest | SignedEnrolRequest):
        _check_id(req.subject_id)
        pk = public_key(req.pk_n, req.pk_y, req.pk_k, self.params)
        C = level1_vector(pk, req.c_a, req.c_beta, self.params.dims)
        return pk, C

    def enrol(self, req: EnrolRequest | SignedEnrolRequest, *, replace: bool = False) -> EnrolResponse:
        """Validate (and check the TP's σ, expiry and serial when a TP key is configured), then store; nothing
        is stored on error. A registration of another face backend than the server's is refused
        (``BackendMismatchError``, issue 36).

        Registration creates: an enrolled ID raises ``SubjectExistsError`` unless ``replace``. The checks
        against the stored record (enrolled? last serial?) and the write are one compare-and-swap, so of two
        concurrent registrations of a new ID exactly one is stored, and serials only grow."""
        self._validated(req)
        serial = self._check_tp(req)
        check_backend(self.params.backend, req.backend, "this enrolment")
        record = req.to_bytes()
        for _ in range(SWAP_TRIES):
            current = self.store.get(PROTOCOL, req.subject_id)
            enrolled, last = stored_state(current)
            if enrolled and not replace:
                raise SubjectExistsError(f"subject {req.subject_id!r} is already enrolled: revoke it first, or "
                                         f"register with a key allowed to replace (admin)")
            if self.tp_public_key is not None and serial <= last:
                raise ProtocolError(f"replayed or outdated registration: its serial {serial} is not above the "
                                    f"last one stored for this subject ({last}); ask the trusted party for a new one")
            if self.store.swap(PROTOCOL, req.subject_id, current, record):
                self._forget(req.subject_id)
                return EnrolResponse(req.subject_id, enrolled)
        raise SubjectExistsError(f"subject {req.subject_id!r} changed during the registration; try again")

    def _check_tp(self, req: EnrolRequest | SignedEnrolRequest) -> int:
        """The serial of a TP-signed registration after checking σ and the expiry (0 without a TP key)."""
        if self.tp_public_key is None:
            if isinstance(req, SignedEnrolRequest):
                raise ProtocolError("this server has no trusted-party key: send an unsigned EnrolRequest")
            return 0
        if not isinstance(req, SignedEnrolRequest):
            if req.signature is None:
                raise ProtocolError("this server accepts only registrations signed by the trusted party")
            raise ProtocolError("this registration is signed without a serial and an expiry (first trusted-party "
                                "version) and could be replayed: ask the trusted party for a new one")
        try:
            self.tp_public_key.verify(req.signature, signed_bytes(req), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise ProtocolError("the trusted party's signature does not verify") from None
        if self.clock() > req.expires + self.max_skew:
            raise ProtocolError("the trusted party's registration has expired: ask it for a new one")
        return req.serial

    def _forget(self, subject_id: str) -> None:
        with self._cache_lock:
            self._cache.pop(subject_id, None)

    def enrolled(self, subject_id: str) -> tuple[JoyeLibertPublicKey, list[cf.Level1]]:
        return self._enrolled(subject_id)[1:3]

    def enrolled_backend(self, subject_id: str) -> str:
        """The face backend the subject enrolled with (dlib-resnet128 for a record that names none)."""
        return self._enrolled(subject_id)[3]

    def _enrolled(self, subject_id: str) -> tuple[bytes, JoyeLibertPublicKey, list[cf.Level1], str]:
        """The stored record's bytes, pk, C (validated) and face backend; cached."""
        _check_id(subject_id)
        record = self.store.get(PROTOCOL, subject_id)
        if record is None or message_type(record) == Revoked.WIRE_NAME:  # header only: cache hits stay cheap
            raise UnknownSubjectError(f"subject {subject_id!r} is not enrolled")
        with self._cache_lock:
            hit = self._cache.get(subject_id)
            if hit is not None and hit[0] == record:
                self._cache.move_to_end(subject_id)
                return hit
        reg = enrolment_from_bytes(record, stored=True)
        pk, C = self._validated(reg)
        if self.cache_size > 0:
            with self._cache_lock:
                self._cache[subject_id] = (record, pk, C, reg.backend)
                self._cache.move_to_end(subject_id)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return record, pk, C, reg.backend

    def auth_start(self, req: AuthStart) -> tuple[AuthChallenge, AuthSession]:
        """Validate C′ under the stored pk, draw r0, r1 and answer S* = BlindESED(C, C′, r0, r1, pk). A probe, or an
        enrolment, of another face backend than the server's is refused before any of it is used (issue 36)."""
        check_backend(self.params.backend, req.backend, "this probe")
        _, pk, C, enrolled_on = self._enrolled(req.subject_id)
        if enrolled_on != self.params.backend:
            raise BackendMismatchError(f"subject {req.subject_id!r} enrolled with the face backend {enrolled_on}, but "
                                       f"this server decides on {self.params.backend} templates: enrol again here, "
                                       f"or serve with --backend {enrolled_on}", self.params.backend, enrolled_on)
        # C′'s unit and J_N checks run inside BlindESED, overlapped with its exponentiations
        C2 = level1_vector(pk, req.c_a, req.c_beta, self.params.dims, group_check=False)
        rnd = Randomizers.draw(pk.k)
        try:
            s_star = blind_esed(C, C2, rnd, self.workers, check=pk.validate)
        except CryptoError as e:
            raise ProtocolError(f"invalid ciphertext: {e}") from None
        w = self.params.circuit_bits if self.params.mode == "secure-comparison" else None
        challenge = AuthChallenge(int(s_star.alpha.value), [int(b.value) for b, _ in s_star.columns], w)
        return challenge, AuthSession(req.subject_id, int(pk.k), rnd)

    def auth_finish(self, session: AuthSession, msg: AuthFinish) -> tuple[AuthResult, Decision]:
        """Unblind s = (s* − r1)/r0² and decide s < τ (an s above the SED bound fails)."""
        if self.params.mode != "basic":
            raise ProtocolError("this server runs the secure-comparison mode: it does not accept s*")
        if not 0 <= msg.blinded_score < (1 << session.k):
            raise ProtocolError("the blinded score is outside the message space")
        d = decide(unblind(msg.blinded_score, session.randomizers, session.k), self.params.tau, self.params.max_sed)
        return AuthResult(d.accepted), d

    def auth_compare(self, session: AuthSession, msg: CompareRequest) -> tuple[CompareChallenge, CompareSession]:
        """§VII Fig. 8, garbler side: inputs r0_inv = (r0²)⁻¹, r1 and τ mod 2^w; answer the OT request with
        a fresh garbled circuit of s = r0_inv·(s* − r1) mod 2^w → [s < τ]. For w < k this is exact because
        2^w | 2^k and SED < 2^w. (No range check: s < τ ≤ max SED already implies it.)"""
        if self.params.mode != "secure-comparison":
            raise ProtocolError("this server runs the basic mode: there is no comparison step")
        w = self.params.circuit_bits
        garbler = Garbler.im2020(w, inverse_square(session.randomizers.r0, w),
                                 session.randomizers.r1 % (1 << w), self.params.tau, group=OT_GROUP)
        try:
            reply = garbler.respond(OTRequest.from_bytes(msg.ot_request))
        except CryptoError as e:
            raise ProtocolError(f"bad OT request: {e}") from None
        return CompareChallenge(reply.to_bytes()), CompareSession(session.subject_id, garbler)

    def compare_finish(self, session: CompareSession, msg: CompareFinish) -> AuthResult:
        """r = the circuit's output bit; a label that is neither valid one is a cheating client: refused."""
        try:
            accepted = session.garbler.decide(EvaluatorResult.from_bytes(msg.output_labels))
        except CryptoError as e:
            raise ForgedLabelError(f"invalid output label, attempt refused: {e}") from None
        return AuthResult(accepted)

    def revoke(self, req: RevokeRequest) -> RevokeResponse:
        """Delete the record without a proof of key possession (an admin's revocation; the service allows it
        to ``admin`` keys only)."""
        return self._delete(req.subject_id)

    def revoke_start(self, req: RevokeStart) -> tuple[RevokeChallenge, RevokeSession]:
        """A challenge that only the holder of ID's secret key answers: c = Enc(ρ) under the stored pk for a
        fresh ρ ∈_R M = Z_{2^k} (``secrets``), with the commitment ``revoke_commitment(RevokeProof(ID, ρ))``.

        Soundness: Joye–Libert, the LHE under HE′ (seed 000 §II-B, §V-B: [20]), is IND-CPA,
        so without sk = p the value ρ is hidden and a guess is right with probability 2^−k (k ≥ 136 at the
        secure levels); each challenge allows one answer. Privacy: the client answers only when Dec(c) opens
        the commitment, so an answer tells the server only the ρ it chose — a server deviating from the
        honest-but-curious model of §III (HBCS) gets no decryption of another ciphertext back, unlike an
        authentication's S*. The session keeps ρ and the digest of the record the challenge was made for."""
        record, pk, _, _ = self._enrolled(req.subject_id)
        rho = secrets.randbelow(pk.message_space)
        c = pk.encrypt(rho)
        commitment = revoke_commitment(RevokeProof(req.subject_id, rho))
        session = RevokeSession(req.subject_id, hashlib.sha256(record).digest(), rho, int(pk.k))
        return RevokeChallenge(int(c.value), commitment), session

    def revoke_finish(self, session: RevokeSession, proof: RevokeProof) -> RevokeResponse:
        """Delete the record if ρ is right (compared in constant time over k bits) and the record is still the
        one the challenge was made for; a wrong proof, another ID or a changed record changes nothing."""
        if proof.subject_id != session.subject_id:
            raise ProtocolError("the proof names another ID than its challenge: nothing was revoked")
        if not 0 <= proof.plaintext < (1 << session.k):
            raise ProtocolError("the proof is outside the message space: nothing was revoked")
        width = (session.k + 7) // 8
        if not hmac.compare_digest(proof.plaintext.to_bytes(width, "big"), session.rho.to_bytes(width, "big")):
            raise ProtocolError("wrong proof of key possession: nothing was revoked")
        return self._delete(session.subject_id, expect=session.record_digest)

    def _delete(self, subject_id: str, expect: bytes | None = None) -> RevokeResponse:
        """Delete the record (only if its SHA-256 is ``expect``, when given); a TP-signed one leaves the
        ``Revoked`` tombstone with its serial, so that no registration signed before the revocation is accepted
        again (compare-and-swap, as ``enrol``)."""
        _check_id(subject_id)
        for _ in range(SWAP_TRIES):
            current = self.store.get(PROTOCOL, subject_id)
            enrolled, last = stored_state(current)
            if not enrolled:
                raise UnknownSubjectError(f"subject {subject_id!r} is not enrolled")
            if expect is not None and not hmac.compare_digest(hashlib.sha256(current or b"").digest(), expect):
                raise ProtocolError(f"subject {subject_id!r} was enrolled again since the challenge was made: "
                                    "nothing was revoked; start again")
            tombstone = Revoked(subject_id, last).to_bytes() if last else None
            if self.store.swap(PROTOCOL, subject_id, current, tombstone):
                self._forget(subject_id)
                return RevokeResponse(subject_id, True)
        raise SubjectExistsError(f"subject {subject_id!r} changed during the revocation; try again")


def _check_id(subject_id: str) -> None:
    check_subject_id(PROTOCOL, subject_id)


class TrustedParty:
    """§VII: checks that Γ looks like a face template of its backend (``params.backend``; its norms:
    ``norm_range``), encrypts it under the client's pk and signs ID‖backend‖C‖pk‖serial‖expires with ECDSA P-256
    (SHA-256): the serial grows with every registration it signs and the registration expires ``validity`` seconds
    after signing, so that a server refuses a replayed one.

    ``embed`` (image bytes → float embedding, e.g. ``make_backend().embed`` wrapped by the caller) lets the
    TP extract Γ from the face image itself (``enrol_image``); the protocol layer does not import faces/.
    """

    def __init__(self, params: Im2020Params = Im2020Params(), *, signing_key: ec.EllipticCurvePrivateKey | None = None,
                 norm_range: tuple[float, float] | None = None, embed=None, validity: int = TP_VALIDITY,
                 clock=time.time) -> None:
        self.params = params
        self.validity, self._clock = validity, clock
        self._serial, self._serial_lock = 0, threading.Lock()
        self._signing_key = signing_key or ec.generate_private_key(ec.SECP256R1())
        self.norm_range = norm_range or operating_point(params.backend).norm_range  # the TP's backend's
        self._embed = embed

    @property
    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self._signing_key.public_key()

    def public_key_pem(self) -> bytes:
        return self.public_key.public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)

    def check_face_template(self, template: Sequence[int]) -> None:
        """Range (check_template) and L2 norm of Γ/scale within ``norm_range``."""
        gamma = check_template(np.asarray(template, dtype=np.int64), self.params)
        norm = float(np.linalg.norm(np.asarray(gamma, dtype=np.float64) / self.params.scale))
        lo, hi = self.norm_range
        if not lo <= norm <= hi:
            raise ProtocolError("the template does not look like a face embedding (norm out of range)")

    def enrol(self, req: TPRequest) -> TPResponse:
        """§VII step 3: verify Γ, C = Enc(Γ, pk), σ = Sign(ID‖C‖pk‖serial‖expires)."""
        return self._encrypt_and_sign(req, req.template)

    def enrol_image(self, req: TPImageRequest) -> TPResponse:
        """§VII step 3 from the image: Γ = ⌊scale · embed(image)⌋, then as ``enroll``."""
        if self._embed is None:
            raise ProtocolError("this trusted party has no face embedder; send the template (TPRequest)")
        try:
            gamma = quantize(self._embed(req.image), self.params.scale)
        except PrivfaceError as e:
            raise ProtocolError(f"the trusted party found no usable face: {e}") from None
        return self._encrypt_and_sign(req, gamma)

    def next_serial(self) -> int:
        """A serial above every one this TP issued: nanoseconds since the epoch, or the last + 1 — so it also
        grows across restarts of a TP whose clock does not go back."""
        with self._serial_lock:
            self._serial = max(self._serial + 1, time.time_ns())
            return self._serial

    def _encrypt_and_sign(self, req: TPRequest | TPImageRequest, template) -> TPResponse:
        _check_id(req.subject_id)
        pk = public_key(req.pk_n, req.pk_y, req.pk_k, self.params)
        self.check_face_template(template)
        a, beta = encrypt_template(pk, [int(x) for x in template])
        serial, expires = self.next_serial(), int(self._clock()) + self.validity
        unsigned = SignedEnrolRequest(req.subject_id, self.params.backend, req.pk_n, req.pk_y, req.pk_k, a, beta,
                                      serial, expires, b"")
        sig = self._signing_key.sign(signed_bytes(unsigned), ec.ECDSA(hashes.SHA256()))
        return TPResponse(a, beta, serial, expires, sig)
