"""The parties of kolberg (seed 002 §2.2): Client, DBServer, AuthServer.

The client encrypts under the auth server's public key; the DB server stores encrypted references and
computes encrypted distances (it never holds a secret key); the auth server holds the secret key, decrypts
only distances and decides. Decisions flow auth server → DB server → client, so the auth server never learns
which client asked, nor which subject a distance belongs to (``messages`` module docstring).

Every incoming message is validated before any state changes; bad input raises ``ProtocolError``
(``UnknownSubjectError`` for an unenrolled ID).
"""
from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from ...crypto import lattice, ntru
from ...errors import (
    BackendMismatchError,
    CryptoError,
    PrivfaceError,
    ProtocolError,
    SubjectExistsError,
    UnknownSubjectError,
    check_backend,
)
from ...store.base import TemplateStore
from ...templates.lssc import lssc_binarize
from ...templates.quantize import quantize
from ...wire import Message, WireError
from ..common import check_subject_id
from .messages import (
    AuthDecision,
    AuthKeyRecord,
    AuthKeys,
    Challenge,
    ChallengeRequest,
    DistanceBatch,
    EnrolRequest,
    EnrolResponse,
    IdentifyRequest,
    KeyRequest,
    PublicKey,
    ReencryptRequest,
    ReencryptResponse,
    Result,
    RevokeRequest,
    RevokeResponse,
    StoredReference,
    VerifyRequest,
    stored_reference,
)
from .params import BFV, CKKS, NTRU, KolbergParams

PROTOCOL = "kolberg"
CHUNK = 16
"""Distances per ``DistanceBatch`` (16 CKKS/BFV distance ciphertexts ≈ 3.2 MB, under the 4 MiB frame)."""
NONCE_BYTES = 32
"""A verification challenge: 256 random bits from the OS CSPRNG, so a nonce never repeats."""
MAX_PENDING, PENDING_TTL = 1024, 120.0
"""Open multi-chunk requests the auth server keeps at most (a bound on its state), and for how many seconds
after its last chunk an unfinished one is kept (the DB server sends a request's chunks back to back)."""


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


def read_reference(blob: bytes) -> StoredReference:
    """A DB server record (one stored before references named their backend: dlib-resnet128)."""
    try:
        return stored_reference(blob)
    except (WireError, PrivfaceError, ValueError) as e:
        raise ProtocolError(f"malformed {StoredReference.WIRE_NAME}: {e}") from None


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
        return EnrolRequest(subject_id, self.params.backend,
                            self._pub.encrypt(protect(self.params, embedding), "template"))

    def verify(self, subject_id: str, embedding, challenge: Challenge | bytes | None = None) -> VerifyRequest:
        """The encrypted probe for a claim of ``subject_id``, answering the DB server's ``challenge`` (over the
        service every verification needs one; in process, None)."""
        _check_id(subject_id)
        nonce = b""
        if challenge is not None:
            ch = _read(Challenge, challenge)
            if ch.subject_id != subject_id or len(ch.nonce) != NONCE_BYTES:
                raise ProtocolError("the challenge is not one for a verification of this subject")
            nonce = ch.nonce
        return VerifyRequest(subject_id, self.params.backend,
                             self._pub.encrypt(protect(self.params, embedding), "probe"), nonce)

    def identify(self, embedding) -> IdentifyRequest:
        return IdentifyRequest(self.params.backend, self._pub.encrypt(protect(self.params, embedding), "probe"))


AUTH_STORE = "kolberg-auth"
"""The auth server's own store namespace: ``key.<version>`` (AuthKeyRecord) and ``current`` (KeyRequest)."""
REENCRYPT_BATCH = 8
"""References per ``ReencryptRequest`` (8 CKKS templates ≈ 2.6 MB, under the 4 MiB frame)."""


def ring_epoch(current: int, versions: Sequence[int]) -> int:
    """A number that grows with every change of the key ring (begin, activate, retire of a rotation):
    3·newest, minus 2 after begin and 1 after activate. The DB server sends the epoch it knows."""
    newest = max(versions)
    return 3 * newest - (0 if len(versions) == 1 else 1 if current == newest else 2)


def _generate_keypair(params: KolbergParams):
    """(public key bytes, secret key) for the scheme, at its 128-bit parameters."""
    if params.scheme == NTRU:
        pk, sk = ntru.generate_ntru_keypair()
    else:
        pk, sk = lattice.generate_lattice_keypair(lattice.CKKS_128 if params.scheme == CKKS else lattice.BFV_128)
    return pk.to_bytes(), sk


def _secret_bytes(sk) -> bytes:
    return sk.to_bytes() if isinstance(sk, ntru.NTRUPrivateKey) else sk.secret_to_bytes()


class AuthServer:
    """Holds the secret keys; decrypts distances (CKKS: noise-flooded at once, ``lattice.flood``), ranks, decides.

    Sees a random request id and distances in the DB server's random order: no subject id, no client.
    Keys are versioned (renewability, ISO/IEC 24745): one key pair, or two while a rotation runs
    (``rotate_begin`` → ``reencrypt`` … → ``activate`` → ``retire``). With a ``store`` (its own, never the DB
    server's) the key pairs persist there; without one they live in memory.

    Open multi-chunk requests: at most ``max_pending``, each dropped ``pending_ttl`` seconds (of ``clock``) after
    its last chunk, so requests a DB server abandoned (a crash, a timeout) cannot fill the table for good."""

    def __init__(self, params: KolbergParams, store: TemplateStore | None = None, *, max_pending: int = MAX_PENDING,
                 pending_ttl: float = PENDING_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        if max_pending < 1 or not pending_ttl > 0:
            raise ValueError("max_pending ≥ 1 and pending_ttl > 0")
        self.params, self._store = params, store
        self.max_pending, self.pending_ttl, self._clock = max_pending, pending_ttl, clock
        self._keys: dict[int, tuple[_Public, object]] = {}
        self._current = 0
        # request id → (count, best distance, best index, time of the last chunk)
        self._pending: dict[bytes, tuple[int, float, int, float]] = {}
        self._lock = threading.Lock()
        if store is not None:
            self._load()
        if not self._keys:
            self._add_key(1)
            self._set_current(1)

    # ------------------------------------------------------------------ key ring
    def _load(self) -> None:
        for name in self._store.ids(AUTH_STORE):
            if not name.startswith("key."):
                continue
            rec = _read(AuthKeyRecord, self._store.get(AUTH_STORE, name))
            pub = _Public(self.params, PublicKey(self.params.scheme, rec.public_key))
            try:
                sk = (ntru.NTRUPrivateKey.from_bytes(pub.key, rec.secret_key) if self.params.scheme == NTRU
                      else lattice.LatticeSecretContext.from_bytes(pub.key, rec.secret_key))
            except CryptoError as e:
                raise ProtocolError(f"auth key store: key {rec.version} unreadable: {e}") from None
            self._keys[rec.version] = (pub, sk)
        current = self._store.get(AUTH_STORE, "current")
        if self._keys:
            self._current = _read(KeyRequest, current).version if current else max(self._keys)
            if self._current not in self._keys:
                raise ProtocolError("auth key store: the current key version has no key pair")

    def _add_key(self, version: int) -> None:
        pk, sk = _generate_keypair(self.params)
        if self._store is not None:  # the key pair is durable before anyone can encrypt under it
            self._store.put(AUTH_STORE, f"key.{version}", AuthKeyRecord(version, pk, _secret_bytes(sk)).to_bytes())
        self._keys[version] = (_Public(self.params, PublicKey(self.params.scheme, pk)), sk)

    def _set_current(self, version: int) -> None:
        if self._store is not None:
            self._store.put(AUTH_STORE, "current", KeyRequest(version).to_bytes())
        self._current = version

    def public_key(self) -> PublicKey:
        return PublicKey(self.params.scheme, self._keys[self._current][0].key.to_bytes())

    def keys(self, request: KeyRequest | bytes | None = None) -> AuthKeys:
        """The live public keys; empty ``keys`` when the caller's ``version`` is already this ring's epoch."""
        known = 0 if request is None else _read(KeyRequest, request).version
        with self._lock:
            versions = sorted(self._keys)
            keys = [] if known == ring_epoch(self._current, versions) else \
                [self._keys[v][0].key.to_bytes() for v in versions]
            return AuthKeys(self.params.scheme, self._current, versions, keys)

    def rotate_begin(self, request: KeyRequest | bytes | None = None) -> AuthKeys:
        """Start a rotation: a fresh key pair as version newest + 1 — or, when a rotation is already under
        way (two keys), the same ring again, so a crashed rotation resumes."""
        with self._lock:
            if len(self._keys) == 1:
                self._add_key(max(self._keys) + 1)
        return self.keys()

    def _rotation_target(self, version: int) -> int:
        if len(self._keys) != 2 or version != max(self._keys):
            raise ProtocolError(f"no key rotation to version {version} is under way")
        return version

    def reencrypt(self, request: ReencryptRequest | bytes) -> ReencryptResponse:
        """Enc_to(Dec_from(c)) for blinded references c = Enc_from(m + R) (``rotation`` module): what this
        party decrypts is m + R, uniformly random; it never sees m."""
        msg = _read(ReencryptRequest, request)
        with self._lock:
            to = self._rotation_target(msg.to_version)
            if msg.from_version == to or msg.from_version not in self._keys:
                raise ProtocolError(f"cannot re-encrypt from key version {msg.from_version}")
            (src, sk), (dst, _) = self._keys[msg.from_version], self._keys[to]
        if not msg.templates:
            raise ProtocolError("a re-encryption request must carry at least one template")
        cts = [src.load(t, "template") for t in msg.templates]  # validate all first
        if self.params.scheme == NTRU:
            out = [dst.key.encrypt(sk.decrypt(c)).to_bytes() for c in cts]
        else:
            out = [sk.reencrypt(c, dst.key).to_bytes() for c in cts]
        return ReencryptResponse(to, out)

    def activate(self, request: KeyRequest | bytes) -> AuthKeys:
        """Clients get the new key from now on (every reference already has a copy under it)."""
        with self._lock:
            self._set_current(self._rotation_target(_read(KeyRequest, request).version))
        return self.keys()

    def retire(self, request: KeyRequest | bytes) -> AuthKeys:
        """End the rotation: delete every key but the (activated) ``version``. Idempotent."""
        version = _read(KeyRequest, request).version
        with self._lock:
            if version != self._current:
                raise ProtocolError(f"key version {version} is not the current key; activate it first")
            for v in [v for v in self._keys if v != version]:
                if self._store is not None:
                    self._store.delete(AUTH_STORE, f"key.{v}")
                del self._keys[v]
        return self.keys()

    # ------------------------------------------------------------------ decisions
    def _load_distance(self, blob: bytes):
        """The distance ciphertext and the secret key of the live key it was made under."""
        first = None
        for pub, sk in self._keys.values():
            try:
                return pub.load(blob, "distance"), sk
            except ProtocolError as e:
                first = first or e
        raise first

    def _decrypt(self, c, sk) -> float:
        if self.params.scheme == NTRU:
            return sk.hamming_distance(c)
        d = sk.decrypt_distance(c)
        return lattice.flood(d) if self.params.scheme == CKKS else d

    def decide(self, batch: DistanceBatch | bytes) -> AuthDecision | None:
        """Fold one chunk into the request's running minimum; after the ``last`` chunk, the decision."""
        msg = _read(DistanceBatch, batch)
        if len(msg.request_id) != 16:
            raise ProtocolError("request id must be 16 bytes")
        if not msg.distances:
            raise ProtocolError("a distance batch must carry at least one distance")
        cts = [self._load_distance(d) for d in msg.distances]  # validate all before any state change
        with self._lock:
            now = self._clock()
            for rid in [r for r, (*_, t) in self._pending.items() if now - t > self.pending_ttl]:
                del self._pending[rid]
            count, best_d, best_i, _ = self._pending.get(msg.request_id, (0, float("inf"), 0, now))
            if msg.offset != count:
                raise ProtocolError(f"distance batch offset {msg.offset}, expected {count}")
            if count + len(cts) > self.params.max_gallery:
                raise ProtocolError("request exceeds the gallery limit")
            if count == 0 and not msg.last and len(self._pending) >= self.max_pending:
                raise ProtocolError("too many open requests at the auth server")
        values = [self._decrypt(c, sk) for c, sk in cts]
        k = int(np.argmin(values))
        if values[k] < best_d:
            best_d, best_i = values[k], count + k
        with self._lock:
            if self._pending.get(msg.request_id, (0,))[0] != count:
                raise ProtocolError("concurrent batches for one request")
            if not msg.last:
                self._pending[msg.request_id] = (count + len(cts), best_d, best_i, self._clock())
                return None
            self._pending.pop(msg.request_id, None)
        return AuthDecision(msg.request_id, best_i, bool(best_d <= self.params.tau))


class DBServer:
    """Stores encrypted references (TemplateStore records = ``StoredReference``: the reference per key version)
    and computes encrypted distances; talks to the auth server through ``auth`` (a callable DistanceBatch →
    AuthDecision|None, in-process ``AuthServer.decide`` or an HTTP client). Holds no secret key.

    ``public_key`` is the auth server's ``AuthKeys`` (or one ``PublicKey``, taken as version 1); ``keys``, when
    given, is a callable KeyRequest → AuthKeys that refreshes the ring (after a rotation, or before an enrolment
    so that no reference is stored under a retired key)."""

    def __init__(self, params: KolbergParams, store: TemplateStore, public_key, auth, keys=None) -> None:
        self.params, self.store, self.auth, self._fetch = params, store, auth, keys
        self._keys: dict[int, _Public] = {}
        self._current = 0
        if isinstance(public_key, (bytes, Message)) and not isinstance(public_key, AuthKeys):
            try:
                ring = _read(AuthKeys, public_key)
            except ProtocolError:
                key = _read(PublicKey, public_key)
                ring = AuthKeys(key.scheme, 1, [1], [key.key])
        else:
            ring = public_key
        self._use(ring)

    def _use(self, ring: AuthKeys) -> None:
        if ring.scheme != self.params.scheme:
            raise ProtocolError(f"auth server runs {ring.scheme}, this deployment uses {self.params.scheme}")
        if not ring.versions or len(ring.keys) != len(ring.versions) or ring.current not in ring.versions:
            raise ProtocolError("malformed key ring from the auth server")
        self._keys = {v: _Public(self.params, PublicKey(ring.scheme, k)) for v, k in zip(ring.versions, ring.keys)}
        self._current = ring.current

    def refresh(self) -> None:
        """Ask the auth server for its key ring (cheap when unchanged)."""
        if self._fetch is None:
            return
        ring = _read(AuthKeys, self._fetch(KeyRequest(ring_epoch(self._current, sorted(self._keys))).to_bytes()))
        if ring.keys:
            self._use(ring)

    def public_key(self) -> PublicKey:
        """The key clients must encrypt under (refreshed from the auth server)."""
        self.refresh()
        return PublicKey(self.params.scheme, self._keys[self._current].key.to_bytes())

    def _load_any(self, blob: bytes, kind: str, *, retry: bool = True):
        """(key version, validated ciphertext) under one of the live keys."""
        first = None
        for v, pub in self._keys.items():
            try:
                return v, pub.load(blob, kind)
            except ProtocolError as e:
                first = first or e
        if retry and self._fetch is not None:
            self.refresh()
            return self._load_any(blob, kind, retry=False)
        raise first

    def enrol(self, request: EnrolRequest | bytes, *, replace: bool = False) -> EnrolResponse:
        """Store the encrypted reference of a new subject (seed 002 §2.2, enrolment). Creates only: an enrolled
        subject raises ``SubjectExistsError`` unless ``replace`` (the caller may replace subjects); the check and
        the write are one compare-and-swap, so of two concurrent enrolments of one subject at most one wins. A
        template of another face backend than the server's is refused (``BackendMismatchError``, issue 36); the
        record names its backend."""
        msg = _read(EnrolRequest, request)
        _check_id(msg.subject_id)
        check_backend(self.params.backend, msg.backend, "this enrolment")
        self.refresh()  # new references only under the current key: a rotation's last pass must see them
        version, _ = self._load_any(msg.template, "template", retry=False)
        if version != self._current:
            raise ProtocolError("the template is under a key being retired: fetch the public key again")
        record = StoredReference(msg.subject_id, msg.backend, [version], [msg.template]).to_bytes()
        if replace:
            previous = self.store.get(PROTOCOL, msg.subject_id)
            replaced = self.store.put(PROTOCOL, msg.subject_id, record)
        elif self.store.swap(PROTOCOL, msg.subject_id, None, record):
            previous, replaced = None, False
        else:
            raise SubjectExistsError(f"subject {msg.subject_id!r} is already enrolled: revoke it first, or "
                                     "replace it with an admin key")
        # Fence against a rotation (rotation.py): if the key is still current after our write, the rotation's
        # last pass, which starts after ``activate``, lists this record. If a new key became current meanwhile,
        # that pass may have gone by: undo our write unless it was already rewritten, and have the client retry.
        self.refresh()
        if self._current != version and self.store.swap(PROTOCOL, msg.subject_id, record, previous):
            raise ProtocolError("a key rotation started during this enrolment: fetch the public key again and re-enrol")
        return EnrolResponse(msg.subject_id, replaced)

    def revoke(self, request: RevokeRequest | bytes) -> RevokeResponse:
        msg = _read(RevokeRequest, request)
        _check_id(msg.subject_id)
        return RevokeResponse(msg.subject_id, self.store.delete(PROTOCOL, msg.subject_id))

    def record(self, subject_id: str) -> StoredReference | None:
        blob = self.store.get(PROTOCOL, subject_id)
        return None if blob is None else read_reference(blob)

    def _reference(self, subject_id: str, version: int):
        rec = self.record(subject_id)
        if rec is None:
            raise UnknownSubjectError(f"subject {subject_id!r} is not enrolled")
        if rec.backend != self.params.backend:
            raise BackendMismatchError(f"subject {subject_id!r} enrolled with the face backend {rec.backend}, but this "
                                       f"server decides on {self.params.backend} templates: enrol again here, or "
                                       f"serve with --backend {rec.backend}", self.params.backend, rec.backend)
        if version not in rec.versions:
            self._check_live(version)
            raise ProtocolError(f"subject {subject_id!r} has no reference under key version {version} yet "
                                "(key rotation in progress: retry, or fetch the public key again)")
        return self._keys[version].load(rec.templates[rec.versions.index(version)], "template")

    def _check_live(self, version: int) -> None:
        """Refuse a probe under a key a rotation retired (the cached ring may predate the rotation)."""
        self.refresh()
        if version not in self._keys:
            raise ProtocolError("the probe is under a retired key (key rotation): fetch the public key again")

    def challenge(self, request: ChallengeRequest | bytes) -> Challenge:
        """A fresh nonce for one verification of the subject (freshness: the service keeps it in the
        verification's session, single use and expiring, and ``verify`` accepts only a probe that names it)."""
        msg = _read(ChallengeRequest, request)
        _check_id(msg.subject_id)
        return Challenge(msg.subject_id, secrets.token_bytes(NONCE_BYTES))

    def verify(self, request: VerifyRequest | bytes, challenge: Challenge | None = None) -> Result:
        """Seed 002 §2.2 verification: Enc(distance) of the probe to the claimed subject's reference, decided
        by the auth server. With ``challenge`` (always, over the service: the session's) the request must
        carry that challenge's subject and nonce; a replayed request names an older, spent nonce."""
        msg = _read(VerifyRequest, request)
        _check_id(msg.subject_id)
        check_backend(self.params.backend, msg.backend, "this probe")
        if challenge is not None and not (msg.subject_id == challenge.subject_id and len(msg.nonce) == NONCE_BYTES
                                          and hmac.compare_digest(msg.nonce, challenge.nonce)):
            raise ProtocolError("the verification does not answer this session's challenge: ask for a new one")
        version, probe = self._load_any(msg.probe, "probe")
        decision = self._ask([self._keys[version].distance(self._reference(msg.subject_id, version), probe)])
        return Result(decision.accepted, None)

    def identify(self, request: IdentifyRequest | bytes) -> Result:
        """Against every reference that exists under the probe's key (during a rotation's last pass, a subject
        enrolled under the old key after the first pass is skipped until the pass reaches it). A probe of another
        face backend than the server's is refused; references enrolled on another (legacy records of a server that
        changed its --backend) are skipped, never compared."""
        msg = _read(IdentifyRequest, request)
        check_backend(self.params.backend, msg.backend, "this probe")
        version, probe = self._load_any(msg.probe, "probe")
        refs = {}
        for s in self.store.ids(PROTOCOL):
            rec = self.record(s)
            if rec is not None and rec.backend != self.params.backend:
                continue
            if rec is not None and version in rec.versions:
                refs[s] = rec.templates[rec.versions.index(version)]
            elif rec is not None:
                self._check_live(version)
        if not refs:
            raise UnknownSubjectError("nobody is enrolled")
        order = list(refs)
        for i in range(len(order) - 1, 0, -1):  # CSPRNG Fisher–Yates: the auth server sees a random order
            j = secrets.randbelow(i + 1)
            order[i], order[j] = order[j], order[i]
        pub = self._keys[version]
        decision = self._ask([pub.distance(pub.load(refs[s], "template"), probe) for s in order])
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
