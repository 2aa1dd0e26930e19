"""im2020 over HTTP, client side: the ``Client`` party driven through ``ServiceClient`` (seed 000 §IV-B.2
registration, §IV-B.3 authentication), as free functions and as the class ``Im2020Client``, and the client's
key file.

The key file is the wire record ``ClientKey`` (sk = (p, q), y, k, ID, face backend, server URL), created with mode 0600
by ``os.open`` so it is never readable by others, not even briefly. It never holds a template.
"""
from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path
from urllib.parse import urlsplit

from ...crypto.joye_libert import JLParams, JoyeLibertPrivateKey
from ...errors import CryptoError, PrivfaceError
from ...protocols.im2020.messages import (
    LEGACY,
    AuthChallenge,
    AuthResult,
    ClientKey,
    CompareChallenge,
    EnrolResponse,
    RevokeChallenge,
    RevokeRequest,
    RevokeResponse,
    TPResponse,
    upgraded,
)
from ...protocols.im2020.params import Im2020Params
from ...protocols.im2020.parties import PROTOCOL, Client
from ...templates.quantize import quantize
from ...wire import WireError, message_type
from ..client import RemoteAlreadyEnrolledError, RemoteNotEnrolledError, ServiceClient


class ModeMismatchError(PrivfaceError):
    """``verify(mode=…)`` found the server running another im2020 mode."""


class KeyFileError(PrivfaceError):
    """A key file that is missing, unreadable, readable by others, malformed, or already present."""


# ---------------------------------------------------------------- key file


def default_key_path(server: str, subject_id: str) -> Path:
    """``$XDG_CONFIG_HOME/privface/keys/<server host_port>/<id>.key`` (default ~/.config)."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    host = re.sub(r"[^A-Za-z0-9.-]", "_", urlsplit(server).netloc or "server")
    return base / "privface" / "keys" / host / f"{subject_id}.key"


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 (fails if it exists) and write ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


class PendingKey:
    """A key written to a private temporary file next to its destination; ``commit()`` moves it into
    place (replacing an old key only with ``force``), ``discard()`` removes it."""

    def __init__(self, path: Path, record: ClientKey, *, force: bool = False) -> None:
        self.path, self.force = Path(path), force
        if self.path.exists() and not force:
            raise KeyFileError(f"key file {self.path} exists; pass --force to replace it")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.tmp")
        _write_private(self._tmp, record.to_bytes())

    def commit(self) -> Path:
        if self.force:
            os.replace(self._tmp, self.path)
        else:
            try:
                os.link(self._tmp, self.path)  # no overwrite, even if one appeared meanwhile
            except FileExistsError:
                self.discard()
                raise KeyFileError(f"key file {self.path} appeared meanwhile; pass --force to replace it") from None
            os.unlink(self._tmp)
        return self.path

    def discard(self) -> None:
        self._tmp.unlink(missing_ok=True)


def key_record(client: Client, server: str) -> ClientKey:
    sk = client._sk
    return ClientKey(client.subject_id, client.params.backend, server, int(sk.p), int(sk.q), int(client.pk.y),
                     int(client.pk.k), client.params.insecure_test_params)


def read_key(data: bytes) -> ClientKey:
    """A key file's record; one written before key files named their face backend reads as dlib-resnet128."""
    name = message_type(data)
    return upgraded(name, data) if name in LEGACY else ClientKey.from_bytes(data)


def load_client(path: Path, *, workers: int | None = None) -> tuple[Client, ClientKey]:
    """The Client party of a key file; refuses files readable by group or others (like ssh). Its params name the
    face backend the key enrolled with (``record.backend``): its probes say so and a server of another refuses them."""
    path = Path(path)
    try:
        st = path.stat()
        if st.st_mode & 0o077:
            raise KeyFileError(f"key file {path} is readable by others (mode {st.st_mode & 0o777:o}); "
                               f"chmod 600 it")
        record = read_key(path.read_bytes())
    except FileNotFoundError:
        raise KeyFileError(f"no key file at {path}: enroll first (privface enroll) or pass --key") from None
    except OSError as e:
        raise KeyFileError(f"cannot read key file {path}: {e.strerror}") from None
    except WireError as e:
        raise KeyFileError(f"{path} is not a privface im2020 key file: {e}") from None
    try:
        sk = JoyeLibertPrivateKey.from_primes(record.p, record.q, record.k, record.y,
                                              insecure_test_params=record.insecure_test_params)
        params = Im2020Params(jl=JLParams(int(sk.public_key.n).bit_length(), record.k),
                              insecure_test_params=record.insecure_test_params, backend=record.backend)
    except (CryptoError, ValueError) as e:
        raise KeyFileError(f"key file {path} holds an invalid key: {e}") from None
    return Client(record.subject_id, params, keypair=(sk.public_key, sk), workers=workers), record


# ---------------------------------------------------------------- flows over HTTP


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _wire_stats(http: ServiceClient, since: int) -> dict:
    """Bytes each way, HTTP wall time, server compute (Server-Timing) and their difference for the steps
    sent since index ``since``."""
    steps = http.stats[since:]
    wall = sum(s.seconds for s in steps)
    server = sum(s.server_seconds or 0.0 for s in steps)
    return {"bytes_sent": sum(s.request_bytes for s in steps),
            "bytes_received": sum(s.response_bytes for s in steps),
            "http_ms": _ms(wall), "server_ms": _ms(server), "network_ms": _ms(max(wall - server, 0.0)),
            "server_ms_by_step": {s.step: _ms(s.server_seconds or 0.0) for s in steps}}


def enrol(http: ServiceClient, client: Client, template) -> tuple[EnrolResponse, dict]:
    """§IV-B.2 over HTTP: C = Enc(Γ) → server. Returns the answer and timings/bytes."""
    since = len(http.stats)
    http.reset()
    t0 = time.perf_counter()
    body = client.enrol(template).to_bytes()
    c2 = time.perf_counter() - t0
    return _enrol(http, client.subject_id, body), {"c2_encrypt_ms": _ms(c2), **_wire_stats(http, since)}


def enrol_signed(http: ServiceClient, client: Client, resp: TPResponse) -> EnrolResponse:
    """§VII step 5 over HTTP: the TP's answer (C, serial, expiry, σ) → server."""
    http.reset()
    return _enrol(http, client.subject_id, client.enrol_signed(resp).to_bytes())


def _enrol(http: ServiceClient, subject_id: str, body: bytes) -> EnrolResponse:
    try:
        return EnrolResponse.from_bytes(http.step("enrol", body))
    except RemoteAlreadyEnrolledError as e:
        raise RemoteAlreadyEnrolledError(f"{subject_id} is already enrolled at this server and was not replaced: "
                                         f"revoke it first, or register with an admin API key", e.status) from None


def verify(http: ServiceClient, client: Client, template, *, mode: str | None = None) -> dict:
    """§IV-B.3 over HTTP: auth/start with C′ = Enc(Γ′), decrypt S*, then auth/finish with s* (basic mode)
    or, when the challenge names a comparison width, the §VII Fig. 8 garbled-circuit comparison
    (auth/compare, auth/finish with the output label). The mode follows the server's challenge unless
    ``mode`` insists on one: then another mode is refused before anything derived from s* is sent.
    Returns the decision and C2/C3 times, bytes and network time (HTTP wall − server compute); in the
    secure-comparison mode also ``mode``, ``compare_bits``, ``s3_compare_ms`` (client + HTTP time of the
    comparison) and ``compare_bytes`` (both ways)."""
    since = len(http.stats)
    http.reset()
    extra = {"mode": "basic"}
    try:
        t0 = time.perf_counter()
        start = client.auth_start(template).to_bytes()
        t1 = time.perf_counter()
        challenge = AuthChallenge.from_bytes(http.step("auth/start", start))
        t2 = time.perf_counter()
        server_mode = "basic" if challenge.compare_bits is None else "secure-comparison"
        if mode is not None and mode != server_mode:
            raise ModeMismatchError(f"the server runs the {server_mode} mode, not {mode}; nothing was sent")
        if challenge.compare_bits is None:
            finish = client.auth_finish(challenge).to_bytes()
            t3 = time.perf_counter()
        else:
            s_star = client.blinded_score(challenge)
            t3 = time.perf_counter()
            n = len(http.stats)
            request, evaluator = client.compare_request(challenge, s_star)
            garbled = CompareChallenge.from_bytes(http.step("auth/compare", request.to_bytes()))
            finish = client.compare_finish(evaluator, garbled).to_bytes()
        result = AuthResult.from_bytes(http.step("auth/finish", finish))
        if challenge.compare_bits is not None:
            extra = {"mode": "secure-comparison", "compare_bits": challenge.compare_bits,
                     "s3_compare_ms": _ms(time.perf_counter() - t3),
                     "compare_bytes": sum(s.request_bytes + s.response_bytes for s in http.stats[n:])}
    except RemoteNotEnrolledError as e:
        raise RemoteNotEnrolledError(f"subject {client.subject_id!r} is not enrolled at this server",
                                     e.status) from None
    return {"decision": "accept" if result.accepted else "reject", "accepted": result.accepted,
            "c2_encrypt_ms": _ms(t1 - t0), "c3_decrypt_ms": _ms(t3 - t2), **extra, **_wire_stats(http, since)}


def revoke(http: ServiceClient, client: Client) -> tuple[RevokeResponse, dict]:
    """Revoke the client's own enrolment by proving possession of its key (``Server.revoke_start``):
    revoke/start → c = Enc(ρ) and a commitment, ρ = Dec(c) sent in revoke/finish only if it opens the
    commitment. Any API key that may enrol (or admin) may do this. Returns the answer and bytes/times."""
    since = len(http.stats)
    http.reset()
    try:
        challenge = RevokeChallenge.from_bytes(http.step("revoke/start", client.revoke_start().to_bytes()))
        resp = RevokeResponse.from_bytes(http.step("revoke/finish", client.revoke_proof(challenge).to_bytes()))
    except RemoteNotEnrolledError as e:
        raise RemoteNotEnrolledError(f"subject {client.subject_id!r} is not enrolled at this server",
                                     e.status) from None
    finally:
        http.reset()  # the session served its one try
    return resp, _wire_stats(http, since)


def admin_revoke(http: ServiceClient, subject_id: str) -> tuple[RevokeResponse, dict]:
    """Revoke any ID without its key (``revoke``): needs an ``admin`` API key; refused by a server without API
    keys, where the key's proof (``revoke``) is the only way."""
    since = len(http.stats)
    http.reset()
    try:
        resp = RevokeResponse.from_bytes(http.step("revoke", RevokeRequest(subject_id).to_bytes()))
    except RemoteNotEnrolledError as e:
        raise RemoteNotEnrolledError(f"subject {subject_id!r} is not enrolled at this server", e.status) from None
    return resp, _wire_stats(http, since)


def service_client(server: str, **kw) -> ServiceClient:
    return ServiceClient(server, PROTOCOL, **kw)


class Im2020Client:
    """An im2020 ``Client`` party talking to one server: ``enrol`` / ``verify`` / ``revoke`` with face embeddings
    (quantized ×``params.scale`` here, as C1 of §IV-B.2 does), by way of ``register``, ``verify`` and ``revoke``
    above. ``Im2020Client(url, subject_id)`` makes a fresh key pair; ``from_key_file`` reloads one saved by
    ``enrol(…, key_file=…)``; ``key_file`` is then that file, which ``revoke`` deletes. ``report``: the figures
    (times, bytes) of the last call. ``options``: see ServiceClient (``api_key``, ``tls``, ``timeout``,
    ``transport``)."""

    def __init__(self, server: str, subject_id: str | None = None, params: Im2020Params | None = None, *,
                 client: Client | None = None, workers: int | None = None, **options) -> None:
        if client is None:
            if subject_id is None:
                raise TypeError("Im2020Client needs a subject_id (or a client)")
            client = Client(subject_id, params or Im2020Params(), workers=workers)
        self.server, self.client, self.report = server, client, {}
        self.key_file: Path | None = None
        self.http = service_client(server, **options)

    @classmethod
    def from_key_file(cls, path: str | os.PathLike, *, server: str | None = None, workers: int | None = None,
                      **options) -> Im2020Client:
        """The client of a key file (``load_client``); ``server`` defaults to the one recorded in it."""
        client, record = load_client(Path(path), workers=workers)
        made = cls(server or record.server, client=client, **options)
        made.key_file = Path(path)
        return made

    @property
    def subject_id(self) -> str:
        return self.client.subject_id

    def enrol(self, embedding, *, key_file: str | os.PathLike | None = None, force: bool = False) -> EnrolResponse:
        """§IV-B.2: register Enc(⌊scale·x⌋). With ``key_file`` the key is written privately first and moved into
        place only once the server has accepted (replacing an existing file only with ``force``)."""
        pending = PendingKey(Path(key_file), key_record(self.client, self.server), force=force) if key_file else None
        try:
            resp, self.report = enrol(self.http, self.client, quantize(embedding, self.client.params.scale))
        except BaseException:
            if pending is not None:
                pending.discard()
            raise
        if pending is not None:
            self.key_file = pending.commit()
            self.report["key_file"] = str(self.key_file)
        return resp

    def verify(self, embedding, *, mode: str | None = None) -> bool:
        """§IV-B.3 (or §VII Fig. 8 when the server runs secure comparison): True if the server accepted."""
        self.report = verify(self.http, self.client, quantize(embedding, self.client.params.scale), mode=mode)
        return bool(self.report["accepted"])

    def revoke(self) -> RevokeResponse:
        """Revoke this client's enrolment by proving possession of its key (``revoke``), then delete the key
        file it was loaded from or saved to (``key_file``; ``report["key_file_removed"]``): the key opens
        nothing any more. Nothing is deleted when the server refuses (e.g. not enrolled: perhaps the wrong
        server)."""
        resp, self.report = revoke(self.http, self.client)
        removed = None
        if resp.revoked and self.key_file is not None:
            self.key_file.unlink(missing_ok=True)
            removed, self.key_file = str(self.key_file), None
        self.report["key_file_removed"] = removed
        return resp

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Im2020Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
