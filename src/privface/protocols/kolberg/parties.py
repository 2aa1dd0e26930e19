"""The parties of kolberg (seed 002 §2.2): Client, DBServer, AuthServer.

The client encrypts under the auth server's public key; the DB server stores encrypted references and
computes encrypted distances (it never holds a secret key); the auth server holds the secret key, decrypts
only distances and decides. Decisions flow auth server → DB server → client, so the auth server never learns
which client asked, nor which subject a distance belongs to (``messages`` module docstring).

Every incoming message is validated before any state changes; bad input raises ``ProtocolError``
(``UnknownSubjectError`` for an unenrolled ID).
"""
from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence

import numpy as np

from ...crypto import lattice, ntru
from .._common import check_subject_id
from ...errors import CryptoError, PrivfaceError, ProtocolError, UnknownSubjectError
from ...store.base import TemplateStore
from ...templates.lssc import lssc_binarize
from ...templates.quantize import quantize
from ...wire import Message, WireError
from .messages import (AuthDecision, DistanceBatch, EnrolRequest, EnrolResponse, IdentifyRequest, PublicKey, Result,
                       VerifyRequest)
from .params import BFV, CKKS, NTRU, KolbergParams

PROTOCOL = "kolberg"
CHUNK = 16
"""Distances per ``DistanceBatch`` (16 CKKS/BFV distance ciphertexts ≈ 3.2 MB, under the 4 MiB frame)."""
MAX_PENDING = 1024
"""Open multi-chunk requests the auth server keeps at most (a bound on its state)."""


def protect(params: KolbergParams, embedding) -> np.ndarray:
    """The template of seed 002 §2.1 for ``params.scheme``: float (CKKS), ⌊128·x⌋ (BFV), LSSC bits (NTRU)."""
    x = np.asarray(embedding, dtype=np.float64)
    if x.ndim != 1 or x.size != params.dims or not np.all(np.isfinite(x)):
        raise ProtocolError(f"an embedding must be {params.dims} finite floats, got shape {x.shape}")
    if params.scheme == CKKS:
        return x
    if params.scheme == BFV:
        return quantize(x, params.scale)
    return lssc_binarize(x, segments=len(params.lssc_edges) + 1, edges=params.lssc_edges, clip=True)


def plaintext_distance(params: KolbergParams, a: np.ndarray, b: np.ndarray) -> float:
    """What the encrypted protocol computes, in the clear: squared Euclidean (CKKS/BFV) or Hamming (NTRU)."""
    if params.scheme == NTRU:
        return int(np.count_nonzero(a != b))
    diff = np.asarray(a) - np.asarray(b)
    return int(diff @ diff) if params.scheme == BFV else float(diff @ diff)


def _read(cls: type[Message], blob: bytes) -> Message:
    if isinstance(blob, Message):
        blob = blob.to_bytes()
    try:
        return cls.from_bytes(blob)
    except (WireError, PrivfaceError, ValueError) as e:
        raise ProtocolError(f"malformed {cls.WIRE_NAME}: {e}") from None


def _check_id(subject_id: str) -> None:
    check_subject_id(PROTOCOL, subject_id)


class _Public:
    """The scheme-neutral view of a public key: encrypt templates/probes, compute and load distances."""

    def __init__(self, params: KolbergParams, msg: PublicKey) -> None:
        if msg.scheme != params.scheme:
            raise ProtocolError(f"public key is for {msg.scheme}, this deployment uses {params.scheme}")
        self.params = params
        try:
            if params.scheme == NTRU:
                self.key = ntru.NTRUPublicKey.from_bytes(msg.key)
            else:
                self.key = lattice.LatticePublicContext.from_bytes(msg.key)
                want = lattice.CKKS if params.scheme == CKKS else lattice.BFV
                if self.key.scheme != want:
                    raise ProtocolError(f"public key is a {self.key.scheme} key, expected {want}")
        except CryptoError as e:
            raise ProtocolError(f"public key rejected: {e}") from None
        self.fingerprint = self.key.fingerprint

    def encrypt(self, template: np.ndarray, kind: str) -> bytes:
        try:
            if self.params.scheme == NTRU:
                return self.key.encrypt(template).to_bytes()
            enc = self.key.encrypt_template if kind == "template" else self.key.encrypt_probe
            return enc(template).to_bytes()
        except CryptoError as e:
            raise ProtocolError(f"template cannot be encrypted: {e}") from None

    def load(self, blob: bytes, kind: str):
        """A validated ciphertext of ``kind`` (template, probe, distance) under this key."""
        try:
            if self.params.scheme == NTRU:
                c = ntru.NTRUCiphertext.from_bytes(self.key, blob)
                if c.nbits != self.params.template_bits:
                    raise ProtocolError(f"NTRU template has {c.nbits} bits, expected {self.params.template_bits}")
                return c
            c = self.key.ciphertext_from_bytes(blob, kind=kind)
        except CryptoError as e:
            raise ProtocolError(f"{kind} ciphertext rejected: {e}") from None
        if c.dim != self.params.dims:
            raise ProtocolError(f"{kind} ciphertext has dimension {c.dim}, expected {self.params.dims}")
        return c

    def distance(self, reference, probe):
        """Enc(‖a − b‖² + mask) (CKKS/BFV, ``lattice.squared_distance``) or Enc(a ⊕ b) (NTRU)."""
        if self.params.scheme == NTRU:
            return reference + probe
        return self.key.squared_distance(reference, probe)


class Client:
    """Holds the auth server's public key; turns embeddings into encrypted templates and probes."""

    def __init__(self, params: KolbergParams, public_key: PublicKey | bytes) -> None:
        self.params = params
        self._pub = _Public(params, _read(PublicKey, public_key))

    def enrol(self, subject_id: str, embedding) -> EnrolRequest:
        _check_id(subject_id)
        return EnrolRequest(subject_id, self._pub.encrypt(protect(self.params, embedding), "template"))

    def verify(self, subject_id: str, embedding) -> VerifyRequest:
        _check_id(subject_id)
        return VerifyRequest(subject_id, self._pub.encrypt(protect(self.params, embedding), "probe"))

    def identify(self, embedding) -> IdentifyRequest:
        return IdentifyRequest(self._pub.encrypt(protect(self.params, embedding), "probe"))


class AuthServer:
    """Holds the secret key; decrypts distances (CKKS: noise-flooded at once, ``lattice.flood``), ranks, decides.

    Sees a random request id and distances in the DB server's random order: no subject id, no client."""

    def __init__(self, params: KolbergParams) -> None:
        self.params = params
        if params.scheme == NTRU:
            pk, self._sk = ntru.generate_ntru_keypair()
        else:
            pk, self._sk = lattice.generate_lattice_keys(lattice.CKKS_128 if params.scheme == CKKS else lattice.BFV_128)
        self._pub = _Public(params, PublicKey(params.scheme, pk.to_bytes()))
        self._pending: dict[bytes, tuple[int, float, int]] = {}  # request id → (count, best distance, best index)
        self._lock = threading.Lock()

    def public_key(self) -> PublicKey:
        return PublicKey(self.params.scheme, self._pub.key.to_bytes())

    def _decrypt(self, c) -> float:
        if self.params.scheme == NTRU:
            return self._sk.hamming_distance(c)
        d = self._sk.decrypt_distance(c)
        return lattice.flood(d) if self.params.scheme == CKKS else d

    def decide(self, batch: DistanceBatch | bytes) -> AuthDecision | None:
        """Fold one chunk into the request's running minimum; after the ``last`` chunk, the decision."""
        msg = _read(DistanceBatch, batch)
        if len(msg.request_id) != 16:
            raise ProtocolError("request id must be 16 bytes")
        if not msg.distances:
            raise ProtocolError("a distance batch must carry at least one distance")
        cts = [self._pub.load(d, "distance") for d in msg.distances]  # validate all before any state change
        with self._lock:
            count, best_d, best_i = self._pending.get(msg.request_id, (0, float("inf"), 0))
            if msg.offset != count:
                raise ProtocolError(f"distance batch offset {msg.offset}, expected {count}")
            if count + len(cts) > self.params.max_gallery:
                raise ProtocolError("request exceeds the gallery limit")
            if count == 0 and not msg.last and len(self._pending) >= MAX_PENDING:
                raise ProtocolError("too many open requests at the auth server")
        values = [self._decrypt(c) for c in cts]
        k = int(np.argmin(values))
        if values[k] < best_d:
            best_d, best_i = values[k], count + k
        with self._lock:
            if self._pending.get(msg.request_id, (0,))[0] != count:
                raise ProtocolError("concurrent batches for one request")
            if not msg.last:
                self._pending[msg.request_id] = (count + len(cts), best_d, best_i)
                return None
            self._pending.pop(msg.request_id, None)
        return AuthDecision(msg.request_id, best_i, bool(best_d <= self.params.tau))


class DBServer:
    """Stores encrypted references (TemplateStore records = validated ``EnrolRequest`` bytes) and computes
    encrypted distances; talks to the auth server through ``auth`` (a callable DistanceBatch → AuthDecision|None,
    in-process ``AuthServer.decide`` or an HTTP client). Holds no secret key."""

    def __init__(self, params: KolbergParams, store: TemplateStore, public_key: PublicKey | bytes, auth) -> None:
        self.params, self.store, self.auth = params, store, auth
        self._pub = _Public(params, _read(PublicKey, public_key))

    def enrol(self, request: EnrolRequest | bytes) -> EnrolResponse:
        msg = _read(EnrolRequest, request)
        _check_id(msg.subject_id)
        self._pub.load(msg.template, "template")
        replaced = self.store.put(PROTOCOL, msg.subject_id, msg.to_bytes())
        return EnrolResponse(msg.subject_id, replaced)

    def _reference(self, subject_id: str):
        record = self.store.get(PROTOCOL, subject_id)
        if record is None:
            raise UnknownSubjectError(f"subject {subject_id!r} is not enrolled")
        return self._pub.load(_read(EnrolRequest, record).template, "template")

    def verify(self, request: VerifyRequest | bytes) -> Result:
        msg = _read(VerifyRequest, request)
        _check_id(msg.subject_id)
        probe = self._pub.load(msg.probe, "probe")
        decision = self._ask([self._pub.distance(self._reference(msg.subject_id), probe)])
        return Result(decision.accepted, None)

    def identify(self, request: IdentifyRequest | bytes) -> Result:
        msg = _read(IdentifyRequest, request)
        probe = self._pub.load(msg.probe, "probe")
        ids = self.store.ids(PROTOCOL)
        if not ids:
            raise UnknownSubjectError("nobody is enrolled")
        order = list(ids)
        for i in range(len(order) - 1, 0, -1):  # CSPRNG Fisher–Yates: the auth server sees a random order
            j = secrets.randbelow(i + 1)
            order[i], order[j] = order[j], order[i]
        decision = self._ask([self._pub.distance(self._reference(s), probe) for s in order])
        return Result(decision.accepted, order[decision.best] if decision.accepted else None)

    def _ask(self, distances: Sequence) -> AuthDecision:
        rid = secrets.token_bytes(16)
        decision = None
        for start in range(0, len(distances), CHUNK):
            chunk = [c.to_bytes() for c in distances[start:start + CHUNK]]
            reply = self.auth(DistanceBatch(rid, start, chunk, start + CHUNK >= len(distances)).to_bytes())
            decision = None if reply is None else _read(AuthDecision, reply)
        if decision is None or decision.request_id != rid or not 0 <= decision.best < len(distances):
            raise ProtocolError("auth server returned no valid decision")
        return decision
