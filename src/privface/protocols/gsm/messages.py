"""The messages of gsm (seed 004 Fig. 3–5), as wire records. Ciphertexts travel as integers in Z*_{N²}.

gsm wire v2 (issue 39): every residue mod N and ciphertext mod N² travels in fixed width — ``n_bytes`` = N's byte
width, twice that for N² — so the bytes of a message depend on the key alone; the v1 ids (minimal-length
integers) are refused, except an m1 (``LegacyTemplate``) kept in a key file or a provider's store.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import PrivfaceError, ProtocolError
from ...wire import Message, message_type

VARIANT_IDS = {"pi1": 1, "pi2": 2, "pi3": 3}


def key_width(n: int) -> int:
    """The byte width of residues mod N (ciphertexts mod N² take twice it): ⌈|N|/8⌉, 384 at 3072 bits."""
    return (int(n).bit_length() + 7) // 8


def check_key_width(msg) -> None:
    """A message carrying epk = N states N's own width (``n_bytes``): a wider or narrower encoding is refused."""
    if msg.n_bytes != key_width(msg.pk_n):
        raise ProtocolError(f"{type(msg).__name__} carries integers of {msg.n_bytes} bytes; its key N is "
                            f"{key_width(msg.pk_n)} bytes wide")


@dataclass
class EnrolRequest(Message):
    """Device → provider, Π_en round 1 (§6 enrolment, §8): epk = N, ⟦u_1⟧, …, ⟦u_ℓ⟧ of the signed template
    (u_i mod N, one value per ciphertext), and the non-interactive proofs Π_epk (``zk.ModulusProof``) and
    Fig. 9 (``zk.PlaintextKnowledgeProof``) as their wire bytes (empty only for an insecure unproven run)."""

    WIRE_NAME = "gsm.EnrolRequest"
    subject_id: str
    n_bytes: int
    pk_n: int
    c_u: list[int]
    modulus_proof: bytes = b""
    plaintext_proof: bytes = b""


@dataclass
class Template(Message):
    """The reusable first message m1 (Fig. 3–5 round 1): epk, ⟦u*_1⟧…⟦u*_t⟧ packed with (n, d), ⟦S_u⟧ and,
    for Π2/Π3, the provider's Ed25519 signature σ over everything else (empty for Π1); integers ``n_bytes``
    wide (N's width; ciphertexts twice it)."""

    WIRE_NAME = "gsm.Template"
    subject_id: str
    n_bytes: int
    pk_n: int
    n: int
    d: int
    c_packed: list[int]
    c_sum: int
    expires_at: int
    signature: bytes = b""


@dataclass
class Challenge(Message):
    """Terminal → device, round 2: ⟦IP̃⟧ (Π1), ⟦Mask(z̃ + ρ̃)⟧ of a·IP + b (Π2), or ⟦X̃⟧, ⟦Ỹ⟧ (Π3)."""

    WIRE_NAME = "gsm.Challenge"
    variant: int
    n_bytes: int
    c_x: int
    c_y: int | None = None


@dataclass
class Reply(Message):
    """Device → terminal, Π2 round 3: X = a·IP + b (decoded, here with the ζ² shift of params.py), a value
    mod 2^k sent in ``x_bytes`` = ⌈k/8⌉ bytes (``reply_width``)."""

    WIRE_NAME = "gsm.Reply"
    x_bytes: int
    x: int


def reply_width(k: int) -> int:
    """The byte width of Π2's X, a value mod 2^k (k: the packing's slot bits)."""
    return (k + 7) // 8


@dataclass
class Decision(Message):
    """The last round: the match bit (Π1: device → terminal; Π2: terminal → device); ``aborted`` is ⊥."""

    WIRE_NAME = "gsm.Decision"
    match: bool
    aborted: bool = False


@dataclass
class Claim(Message):
    """Terminal → device over HTTP, Π1's answer to match/finish: the device's own bit echoed — a claim the
    terminal did not check (Π1 trusts the device, seed 004 §5 Thm. 1), never a decision of the terminal."""

    WIRE_NAME = "gsm.Claim"
    device_claims_match: bool


@dataclass
class CompareRequest(Message):
    """Π3 round 3, device → terminal: OT.Round₁ for the bits of (X, Y) (`OTRequest.to_bytes`)."""

    WIRE_NAME = "gsm.CompareRequest"
    ot_request: bytes


@dataclass
class CompareChallenge(Message):
    """Π3 round 4, terminal → device: garbled Fig. 6 circuit, labels of (pad, a, b, T), OT.Round₂."""

    WIRE_NAME = "gsm.CompareChallenge"
    garbler_message: bytes


@dataclass
class CompareFinish(Message):
    """Π3 round 5, device → terminal: the output labels (the terminal decodes them)."""

    WIRE_NAME = "gsm.CompareFinish"
    output_labels: bytes


@dataclass
class MatchStart(Message):
    """Device → terminal over HTTP, round 1: the variant (1–3) and the reusable first message m1's bytes."""

    WIRE_NAME = "gsm.MatchStart"
    variant: int
    first_message: bytes


@dataclass
class ProviderKey(Message):
    """Provider → anyone: its Ed25519 verification key (32 raw bytes) that signs first messages."""

    WIRE_NAME = "gsm.ProviderKey"
    ed25519: bytes


@dataclass
class Presented(Message):
    """Terminal → device over HTTP, answer to ``match/present``: m1 was validated and is kept (with the
    terminal's precomputation for it) until ``expires_at``, so a later ``match/start`` with it skips that work."""

    WIRE_NAME = "gsm.Presented"
    subject_id: str
    expires_at: int


@dataclass
class DeviceKey(Message):
    """The device's key file (seed 004 §5: esk, and the m1 it keeps): the Paillier–Blum primes p, q, the subject,
    the provider's URL and Ed25519 verification key, and the signed first message m1 (empty before enrolment).
    Secret — written mode 0600 by the CLI, kept wrapped by the browser page (web/src/app/keystore.ts)."""

    WIRE_NAME = "gsm.DeviceKey"
    subject_id: str
    provider: str
    provider_key: bytes
    p: int
    q: int
    first_message: bytes = b""
    insecure_test_params: bool = False
    backend: str | None = None  # the face backend of the enrolled template (issue 36); None: not named (a page
    # that does not write it yet)


@dataclass
class LegacyDeviceKey(Message):
    """A device key file of a privface before issue 36 (no backend: dlib-resnet128). Read, never written."""

    WIRE_NAME = "gsm.LegacyDeviceKey"
    subject_id: str
    provider: str
    provider_key: bytes
    p: int
    q: int
    first_message: bytes
    insecure_test_params: bool


@dataclass
class LegacyTemplate(Message):
    """An m1 signed before gsm wire v2 (integers in minimal bytes, id 514): read from key files and stores until it
    expires — its signature covers this encoding, so it is re-sent as is; never made anew."""

    WIRE_NAME = "gsm.LegacyTemplate"
    subject_id: str
    pk_n: int
    n: int
    d: int
    c_packed: list[int]
    c_sum: int
    expires_at: int
    signature: bytes = b""


def read_template(data) -> Template | LegacyTemplate:
    """An m1 from its bytes: ``Template`` (gsm wire v2, its width checked against its N) or an older
    ``LegacyTemplate``; ProtocolError for anything else."""
    try:
        cls = LegacyTemplate if message_type(data) == LegacyTemplate.WIRE_NAME else Template
        m1 = cls.from_bytes(data)
    except PrivfaceError as e:
        raise ProtocolError(f"malformed first message: {e}") from e
    if isinstance(m1, Template):
        check_key_width(m1)
    return m1
