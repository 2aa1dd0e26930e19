"""The wire messages of the two-server identification of seed 003 §3.2 (protocol ``ident``: hers, idface-ckks,
idface-paillier).

S_local → S_key: ``Attach`` (once, at the local server's start: the gallery's public context and layout, which
S_key checks against the public-key digest in its key store) and ``ScoreChunk`` (the IP_DB ciphertexts of one
query, a run of whole blocks per chunk so that a 2^20 gallery fits the 4 MiB frame). S_key → S_local:
``Attached``, then after the chunk that completes the request ``KeyDecision`` (best index ≥ τ, or none).
Client ↔ S_local: ``Query`` (the plaintext template, as seed 003 lets S_local see it) → ``Result``.

Erasure (hers, ``privface gallery remove | update``): S_local → S_key ``Reencrypt`` (one-time-padded copies of
block ciphertexts, ``crypto.ckks_refresh``) → ``Reencrypted`` (fresh encryptions of the padded plaintexts at q₀·P).
idface-ckks / idface-paillier (``protocols.idface.erase``): ``EraseOpen`` → ``EraseOpened`` (garbled circuits, base
OT), ``EraseChoices`` → ``ErasePads`` (OT extension), ``EraseOutputs`` → ``Erased`` (fresh ciphertexts).

S_key receives no identity and no template: a random request id and ciphertext residues only.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...wire import Message

PROTOCOL = "ident"
"""The service's name of the two-server identification (``/v1/ident/…``)."""


@dataclass
class Attach(Message):
    """S_local → S_key: the gallery's settings, size, block capacity and public context (pk, no secret);
    idface-ckks: the lift (D, seed) that sets α and β (the centring mean stays with S_local: decryption
    does not use it); ``empty``: a bitmap (bit i of byte i // 8, little-endian bit order) of the gallery indices
    that hold no identity — withdrawn or replaced by ``privface gallery remove | update``, or the free positions
    of a sealed block —, which S_key leaves out of its argmax (None: none)."""

    WIRE_NAME = "ident.Attach"
    scheme: str
    dim: int
    beta: int | None
    n: int
    capacity: int
    public_context: bytes
    lift: int | None = None
    lift_seed: int | None = None
    empty: bytes | None = None


@dataclass
class Attached(Message):
    """S_key → S_local: SHA-256 of the public context S_key holds the secret key of, and the gallery size."""

    WIRE_NAME = "ident.Attached"
    pk_sha256: bytes
    n: int


@dataclass
class Query(Message):
    """Client → S_local: one template as little-endian float64 (d values)."""

    WIRE_NAME = "ident.Query"
    template: bytes


@dataclass
class ScoreChunk(Message):
    """S_local → S_key: blocks ``offset`` … ``offset + len(counts) − 1`` of the ``total`` blocks of one IP_DB
    message: ``counts`` templates per block, ``residues`` the ciphertexts as little-endian uint64 of shape
    (len(counts), ciphertexts per block, 2, L, n); idface-paillier: (ct⁺, ct⁻) per block, each big-endian in
    ⌈|N²|/8⌉ bytes."""

    WIRE_NAME = "ident.ScoreChunk"
    request_id: bytes
    offset: int
    total: int
    counts: list[int]
    residues: bytes


@dataclass
class KeyDecision(Message):
    """S_key → S_local after the last chunk: the gallery index of the best score if it is ≥ τ, else None."""

    WIRE_NAME = "ident.KeyDecision"
    request_id: bytes
    index: int | None


@dataclass
class Result(Message):
    """S_local → client: the identified subject (the gallery's id), or not accepted."""

    WIRE_NAME = "ident.Result"
    accepted: bool
    subject_id: str | None = None


@dataclass
class Reencrypt(Message):
    """S_local → S_key: ``copies`` masked copies of g one-prime CKKS ciphertexts (``crypto.ckks_refresh.Masked``),
    NTT form, little-endian uint64: ``columns`` the g c₁ halves (g, n), once; ``padded`` the copies' c₀ + r halves
    (copies, g, n), copy-major. (Type id 1295; 1287, whole copies (k, 2, 1, n), is retired.)"""

    WIRE_NAME = "ident.Reencrypt"
    copies: int
    columns: bytes
    padded: bytes


@dataclass
class Reencrypted(Message):
    """S_key → S_local: fresh encryptions (b, a) of their plaintexts at q₀·P: b as little-endian uint64
    (copies·g, 2, n) in the ``Reencrypt``'s copy order,
    a expanded from ``seed`` (``CKKSRefresh.expand_a``)."""

    WIRE_NAME = "ident.Reencrypted"
    ciphertexts: bytes
    seed: bytes


@dataclass
class EraseOpen(Message):
    """S_local → S_key, digit erasure step 1 (idface, ``protocols.idface.erase``): the masked column ciphertexts —
    idface-ckks little-endian uint64 (k, 2, 1, n) in NTT form, idface-paillier k big-endian values of ⌈|N²|/8⌉
    bytes — and the targets as little-endian uint32 rows (ciphertext, coefficient, digit) / (ciphertext, digit)."""

    WIRE_NAME = "ident.EraseOpen"
    masked: bytes
    targets: bytes


@dataclass
class EraseOpened(Message):
    """S_key → S_local: the erasure's id (S_key's, random), the OT extension's base-OT request, one garbled
    ``digit_circuit`` per target and S_key's active input labels for it (16 bytes each, concatenated)."""

    WIRE_NAME = "ident.EraseOpened"
    erase_id: bytes
    ot_request: bytes
    circuits: list[bytes]
    garbler_labels: list[bytes]


@dataclass
class EraseChoices(Message):
    """S_local → S_key: the base-OT response and the IKNP receiver's u (κ rows, uint8)."""

    WIRE_NAME = "ident.EraseChoices"
    erase_id: bytes
    ot_response: bytes
    u: bytes


@dataclass
class ErasePads(Message):
    """S_key → S_local: per evaluator input wire (label₀ ⊕ k₀, label₁ ⊕ k₁), 32 bytes each."""

    WIRE_NAME = "ident.ErasePads"
    erase_id: bytes
    pads: bytes


@dataclass
class EraseOutputs(Message):
    """S_local → S_key: each circuit's output labels (16 bytes per output wire, concatenated)."""

    WIRE_NAME = "ident.EraseOutputs"
    erase_id: bytes
    outputs: list[bytes]


@dataclass
class Erased(Message):
    """S_key → S_local: the fresh ciphertexts, as in ``EraseOpen``'s ``masked`` (idface-ckks: one per ciphertext
    sent; idface-paillier: Enc(b ⊕ ρ), one per target)."""

    WIRE_NAME = "ident.Erased"
    erase_id: bytes
    ciphertexts: bytes


__all__ = ["Attach", "Attached", "EraseChoices", "EraseOpen", "EraseOpened", "EraseOutputs", "ErasePads", "Erased",
           "KeyDecision", "Query", "Reencrypt", "Reencrypted", "Result", "ScoreChunk"]
