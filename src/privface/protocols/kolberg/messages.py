"""The messages of kolberg (seed 002 §2.2, protected system with a DB server and an authentication server).

Ciphertexts travel as the bytes of ``crypto.lattice`` / ``crypto.ntru`` serialisations; the receiver
validates them against its public key (scheme, parameters, key fingerprint, sizes, ranges).

Unlinkability towards the auth server: the only messages it receives are ``PublicKeyRequest`` and
``DistanceBatch``, which carry a random request id chosen by the DB server and the distances in a random
order — no subject id, no client identity, no probe.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...faces.registry import LEGACY_BACKEND
from ...wire import Message, message_type


@dataclass
class PublicKey(Message):
    """Auth server → DB server and clients: the scheme and its public key (no secret)."""

    WIRE_NAME = "kolberg.PublicKey"
    scheme: str
    key: bytes


@dataclass
class EnrolRequest(Message):
    """Client → DB server: ID, the face backend of the template (the DB server refuses another than its own, issue 36)
    and the encrypted reference template."""

    WIRE_NAME = "kolberg.EnrolRequest"
    subject_id: str
    backend: str
    template: bytes


@dataclass
class EnrolResponse(Message):
    WIRE_NAME = "kolberg.EnrolResponse"
    subject_id: str
    replaced: bool


@dataclass
class ChallengeRequest(Message):
    """Client → DB server: the ID a verification will claim; opens the verification's session."""

    WIRE_NAME = "kolberg.ChallengeRequest"
    subject_id: str


@dataclass
class Challenge(Message):
    """DB server → client: a fresh random ``nonce`` (32 bytes) for one verification of ``subject_id``; the
    DB server keeps it in the session and accepts it once, before the session expires."""

    WIRE_NAME = "kolberg.Challenge"
    subject_id: str
    nonce: bytes


@dataclass
class VerifyRequest(Message):
    """Client → DB server: claimed ID, the probe's face backend, the encrypted probe and the nonce of the
    ``Challenge`` it answers (verification; empty only in process, where no challenge is asked)."""

    WIRE_NAME = "kolberg.VerifyRequest"
    subject_id: str
    backend: str
    probe: bytes
    nonce: bytes = b""


@dataclass
class IdentifyRequest(Message):
    """Client → DB server: the probe's face backend and the encrypted probe (identification against every enrolled
    reference of that backend)."""

    WIRE_NAME = "kolberg.IdentifyRequest"
    backend: str
    probe: bytes


@dataclass
class DistanceBatch(Message):
    """DB server → auth server: encrypted distances (a chunk of one request; ``last`` closes it).

    ``request_id`` is 16 random bytes per client request; ``offset`` is the index of the first distance."""

    WIRE_NAME = "kolberg.DistanceBatch"
    request_id: bytes
    offset: int
    distances: list[bytes]
    last: bool


@dataclass
class AuthDecision(Message):
    """Auth server → DB server: the index (in the DB server's order) of the smallest distance, and whether
    it is within the threshold. Only after ``last``."""

    WIRE_NAME = "kolberg.AuthDecision"
    request_id: bytes
    best: int
    accepted: bool


@dataclass
class Result(Message):
    """DB server → client: accepted, and for identification the matched ID (None when rejected)."""

    WIRE_NAME = "kolberg.Result"
    accepted: bool
    subject_id: str | None = None


@dataclass
class KeyRequest(Message):
    """Anyone → DB server ``public-key`` / auth server ``public-key``, ``auth/keys``; admin → auth server
    ``auth/rotate/*`` (``version``: the rotation's target key version, 0 for ``begin`` and the key requests)."""

    WIRE_NAME = "kolberg.KeyRequest"
    version: int = 0


@dataclass
class AuthKeys(Message):
    """Auth server → DB server: the live public keys by version (two while a rotation runs) and the one
    clients must use (``current``)."""

    WIRE_NAME = "kolberg.AuthKeys"
    scheme: str
    current: int
    versions: list[int]
    keys: list[bytes]


@dataclass
class ReencryptRequest(Message):
    """DB server → auth server (key rotation): blinded references Enc_from(m + R) to re-encrypt under
    ``to_version``. The auth server sees m + R, uniform, and nothing that names a subject."""

    WIRE_NAME = "kolberg.ReencryptRequest"
    from_version: int
    to_version: int
    templates: list[bytes]


@dataclass
class ReencryptResponse(Message):
    WIRE_NAME = "kolberg.ReencryptResponse"
    to_version: int
    templates: list[bytes]


@dataclass
class StoredReference(Message):
    """The DB server's record of one subject: the face backend it enrolled with and its encrypted reference per key
    version (one, or two while a rotation runs); replaced atomically as a whole."""

    WIRE_NAME = "kolberg.StoredReference"
    subject_id: str
    backend: str
    versions: list[int]
    templates: list[bytes]


@dataclass
class RevokeRequest(Message):
    WIRE_NAME = "kolberg.RevokeRequest"
    subject_id: str


@dataclass
class RevokeResponse(Message):
    WIRE_NAME = "kolberg.RevokeResponse"
    subject_id: str
    revoked: bool


@dataclass
class AuthKeyRecord(Message):
    """The auth server's own store: one key pair (never sent)."""

    WIRE_NAME = "kolberg.AuthKeyRecord"
    version: int
    public_key: bytes
    secret_key: bytes


@dataclass
class LegacyStoredReference(Message):
    """A ``StoredReference`` stored before references named their face backend (issue 36): dlib-resnet128, the only
    one there was. Read, never written."""

    WIRE_NAME = "kolberg.LegacyStoredReference"
    subject_id: str
    versions: list[int]
    templates: list[bytes]


def stored_reference(blob: bytes) -> StoredReference:
    """A DB server record, a legacy one read as dlib-resnet128."""
    if message_type(blob) == LegacyStoredReference.WIRE_NAME:
        old = LegacyStoredReference.from_bytes(blob)
        return StoredReference(old.subject_id, LEGACY_BACKEND, old.versions, old.templates)
    return StoredReference.from_bytes(blob)
