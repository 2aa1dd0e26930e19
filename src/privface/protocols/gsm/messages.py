"""The messages of gsm (seed 004 Fig. 3–5), as wire records. Ciphertexts travel as integers in Z*_{N²}."""
from __future__ import annotations

from dataclasses import dataclass

from ...wire import Message

VARIANT_IDS = {"pi1": 1, "pi2": 2, "pi3": 3}


@dataclass
class EnrolRequest(Message):
    """Device → provider (Fig. 4 enrolment): epk = N and ⟦u_1⟧, …, ⟦u_ℓ⟧ of the signed template
    (u_i mod N), one value per ciphertext; ``proofs``: the §8 zero-knowledge proofs (Π_epk, Fig. 9,
    Fig. 10), verified by the provider's proof hook."""

    WIRE_NAME = "gsm.EnrolRequest"
    subject_id: str
    pk_n: int
    c_u: list[int]
    proofs: bytes | None = None


@dataclass
class Template(Message):
    """The reusable first message m1 (Fig. 3–5 round 1): epk, ⟦u*_1⟧…⟦u*_t⟧ packed with (n, d), ⟦S_u⟧ and,
    for Π2/Π3, the provider's Ed25519 signature σ over everything else (empty for Π1)."""

    WIRE_NAME = "gsm.Template"
    subject_id: str
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
    c_x: int
    c_y: int | None = None


@dataclass
class Reply(Message):
    """Device → terminal, Π2 round 3: X = a·IP + b (decoded, here with the ζ² shift of params.py)."""

    WIRE_NAME = "gsm.Reply"
    x: int


@dataclass
class Decision(Message):
    """The last round: the match bit (Π1: device → terminal; Π2: terminal → device); ``aborted`` is ⊥."""

    WIRE_NAME = "gsm.Decision"
    match: bool
    aborted: bool = False


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
