"""The messages of im2020 (seed 000 §IV-B registration/authentication, §VII TP registration), as wire records.

Level-1 HE′ ciphertexts travel as two lists: the a_i ∈ M and the β_i ∈ Ĉ (Joye–Libert values); the
level-2 S* of BlindESED as α* and the β*_1,i of its square columns (the zero second rows are implicit).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...faces.registry import LEGACY_BACKEND
from ...wire import Message


@dataclass
class EnrolRequest(Message):
    """Client → server (§IV-B.2): ID, the face backend of Γ, pk = (N, y, k) and C = Enc(Γ). ``signature`` is the
    TP's σ of the first §VII version (over ID‖C‖pk only): kept so old records decode, refused by a server that
    checks the TP. A server refuses a ``backend`` other than its own (issue 36).

    The server stores this message, validated, as the subject's record."""

    WIRE_NAME = "im2020.EnrolRequest"
    subject_id: str
    backend: str
    pk_n: int
    pk_y: int
    pk_k: int
    c_a: list[int]
    c_beta: list[int]
    signature: bytes | None = None


@dataclass
class SignedEnrolRequest(Message):
    """Client → server (§VII step 5): ID, the face backend, pk, C and the TP's σ over ID‖backend‖C‖pk‖serial‖expires
    (the TP's own backend: it checked and encrypted Γ). ``serial`` grows
    with every registration the TP signs for a subject (the server refuses one not above the last it saw);
    ``expires`` is in Unix seconds. The server stores this message, validated, as the subject's record."""

    WIRE_NAME = "im2020.SignedEnrolRequest"
    subject_id: str
    backend: str
    pk_n: int
    pk_y: int
    pk_k: int
    c_a: list[int]
    c_beta: list[int]
    serial: int
    expires: int
    signature: bytes


@dataclass
class Revoked(Message):
    """Store record left by a revocation of a TP-signed registration: the last serial seen for the subject,
    so that no registration signed before it is accepted again (not sent to anyone)."""

    WIRE_NAME = "im2020.Revoked"
    subject_id: str
    last_serial: int


@dataclass
class EnrolResponse(Message):
    WIRE_NAME = "im2020.EnrolResponse"
    subject_id: str
    replaced: bool


@dataclass
class AuthStart(Message):
    """Client → server: ID, the face backend of Γ′ (the server refuses one other than its own and the
    enrolment's) and C′ = Enc(Γ′) (§IV-B.3)."""

    WIRE_NAME = "im2020.AuthStart"
    subject_id: str
    backend: str
    c_a: list[int]
    c_beta: list[int]


@dataclass
class AuthChallenge(Message):
    """Server → client: S* = (α*, β*) of BlindESED, eq. (4)–(5)."""

    WIRE_NAME = "im2020.AuthChallenge"
    alpha: int
    beta: list[int]
    compare_bits: int | None = None
    """None: basic mode (answer with AuthFinish); else secure-comparison mode with this circuit width."""


@dataclass
class AuthFinish(Message):
    """Client → server: the blinded score s* = Dec(S*)."""

    WIRE_NAME = "im2020.AuthFinish"
    blinded_score: int


@dataclass
class CompareRequest(Message):
    """Client (GC evaluator) → server, secure-comparison mode (§VII Fig. 8): the OT request for the bits
    of s*, as ``crypto.compare`` encodes it (`OTRequest.to_bytes`)."""

    WIRE_NAME = "im2020.CompareRequest"
    ot_request: bytes


@dataclass
class CompareChallenge(Message):
    """Server (garbler) → client: garbled circuit, the garbler's input labels and the OT response
    (`GarblerMessage.to_bytes`)."""

    WIRE_NAME = "im2020.CompareChallenge"
    garbler_message: bytes


@dataclass
class CompareFinish(Message):
    """Client → server: the circuit's output label (`EvaluatorResult.to_bytes`); the server decodes r."""

    WIRE_NAME = "im2020.CompareFinish"
    output_labels: bytes


@dataclass
class AuthResult(Message):
    """Server → client: the result r (T = accepted)."""

    WIRE_NAME = "im2020.AuthResult"
    accepted: bool


@dataclass
class RevokeRequest(Message):
    """Admin → server: delete ID's record without a proof of key possession (an ``admin`` API key only)."""

    WIRE_NAME = "im2020.RevokeRequest"
    subject_id: str


@dataclass
class RevokeStart(Message):
    """Client → server: ID, asking for a challenge that only the holder of ID's secret key can answer."""

    WIRE_NAME = "im2020.RevokeStart"
    subject_id: str


@dataclass
class RevokeChallenge(Message):
    """Server → client: c = Enc(ρ) under the stored pk for a fresh ρ ∈_R M, and the server's commitment
    SHA-256(context ‖ RevokeProof(ID, ρ)) to the one answer it will accept (``parties.revoke_commitment``)."""

    WIRE_NAME = "im2020.RevokeChallenge"
    ciphertext: int
    commitment: bytes


@dataclass
class RevokeProof(Message):
    """Client → server: ID and ρ = Dec(c), sent only when it opens the server's commitment."""

    WIRE_NAME = "im2020.RevokeProof"
    subject_id: str
    plaintext: int


@dataclass
class RevokeResponse(Message):
    WIRE_NAME = "im2020.RevokeResponse"
    subject_id: str
    revoked: bool


@dataclass
class TPRequest(Message):
    """Client → trusted party (§VII step 2): ID, pk and the plaintext quantized template Γ."""

    WIRE_NAME = "im2020.TPRequest"
    subject_id: str
    pk_n: int
    pk_y: int
    pk_k: int
    template: list[int]


@dataclass
class TPImageRequest(Message):
    """Client → trusted party (§VII step 2, stronger variant): ID, pk and the face image; the TP embeds it."""

    WIRE_NAME = "im2020.TPImageRequest"
    subject_id: str
    pk_n: int
    pk_y: int
    pk_k: int
    image: bytes


@dataclass
class TPResponse(Message):
    """Trusted party → client (§VII step 4): C = Enc(Γ) under pk, the registration's serial and expiry (Unix
    seconds) and σ = Sign(ID‖C‖pk‖serial‖expires)."""

    WIRE_NAME = "im2020.TPResponse"
    c_a: list[int]
    c_beta: list[int]
    serial: int
    expires: int
    signature: bytes


@dataclass
class ClientKey(Message):
    """The client's key file (not sent to anyone): its ID, the face backend it enrolled with, the server it
    enrolled at, and the HE′ secret key sk = (p, q) with pk = (N = pq, y, k). Never holds a template."""

    WIRE_NAME = "im2020.ClientKey"
    subject_id: str
    backend: str
    server: str
    p: int
    q: int
    y: int
    k: int
    insecure_test_params: bool


# ---------------------------------------------------------------- records made before backends were recorded


@dataclass
class LegacyEnrolRequest(Message):
    """A stored ``EnrolRequest`` of a privface before issue 36 (no backend: dlib-resnet128). Read, never written."""

    WIRE_NAME = "im2020.LegacyEnrolRequest"
    subject_id: str
    pk_n: int
    pk_y: int
    pk_k: int
    c_a: list[int]
    c_beta: list[int]
    signature: bytes | None = None


@dataclass
class LegacySignedEnrolRequest(Message):
    """A stored ``SignedEnrolRequest`` of a privface before issue 36 (no backend: dlib-resnet128)."""

    WIRE_NAME = "im2020.LegacySignedEnrolRequest"
    subject_id: str
    pk_n: int
    pk_y: int
    pk_k: int
    c_a: list[int]
    c_beta: list[int]
    serial: int
    expires: int
    signature: bytes


@dataclass
class LegacyClientKey(Message):
    """A key file of a privface before issue 36 (no backend: dlib-resnet128). Read, never written."""

    WIRE_NAME = "im2020.LegacyClientKey"
    subject_id: str
    server: str
    p: int
    q: int
    y: int
    k: int
    insecure_test_params: bool


LEGACY = {LegacyEnrolRequest.WIRE_NAME: EnrolRequest, LegacySignedEnrolRequest.WIRE_NAME: SignedEnrolRequest,
          LegacyClientKey.WIRE_NAME: ClientKey}
LEGACY_CLASSES = {c.WIRE_NAME: c for c in (LegacyEnrolRequest, LegacySignedEnrolRequest, LegacyClientKey)}


def upgraded(name: str, data: bytes):
    """The current message of a legacy record ``name`` (decoded from ``data``), with ``backend`` = dlib-resnet128."""
    old = LEGACY_CLASSES[name].from_bytes(data)
    return LEGACY[name](backend=LEGACY_BACKEND, **dataclasses.asdict(old))
