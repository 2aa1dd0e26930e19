"""kolberg over HTTP: ``HttpAuth`` (the DB server's and ``privface rotate-keys``' link to the auth server) and
``KolbergClient`` (a client of the DB server). Every answer is parsed by the wire codec and validated by the
party before use."""
from __future__ import annotations

from ...errors import ProtocolError
from ...service.client import ServiceClient
from ...wire import Message, WireError
from .messages import (AuthDecision, AuthKeys, EnrolResponse, KeyRequest, PublicKey, ReencryptResponse, Result,
                       RevokeRequest, RevokeResponse)
from .params import KolbergParams
from .parties import PROTOCOL, Client


def _parse(cls: type[Message], body: bytes):
    try:
        return cls.from_bytes(body)
    except WireError as e:
        raise ProtocolError(f"malformed answer from the service: {e}") from None


def _bytes(msg) -> bytes:
    return msg if isinstance(msg, bytes) else msg.to_bytes()


class HttpAuth:
    """The auth server's steps as methods (same names and messages as ``AuthServer``), one HTTP call each."""

    def __init__(self, url: str, *, timeout: float = 120.0, transport=None) -> None:
        self._http = ServiceClient(url, PROTOCOL, timeout=timeout, transport=transport)

    def _call(self, step: str, msg, cls):
        self._http.reset()
        return _parse(cls, self._http.step(step, _bytes(msg)))

    def public_key(self) -> PublicKey:
        return self._call("public-key", KeyRequest(0), PublicKey)

    def keys(self, request=None) -> AuthKeys:
        return self._call("auth/keys", request or KeyRequest(0), AuthKeys)

    def decide(self, batch) -> AuthDecision | None:
        self._http.reset()
        body = self._http.step("auth/decide", _bytes(batch))
        return _parse(AuthDecision, body) if body else None

    def rotate_begin(self, request=None) -> AuthKeys:
        return self._call("auth/rotate/begin", request or KeyRequest(0), AuthKeys)

    def reencrypt(self, request) -> ReencryptResponse:
        return self._call("auth/rotate/reencrypt", request, ReencryptResponse)

    def activate(self, request) -> AuthKeys:
        return self._call("auth/rotate/activate", request, AuthKeys)

    def retire(self, request) -> AuthKeys:
        return self._call("auth/rotate/retire", request, AuthKeys)

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class KolbergClient:
    """A kolberg ``Client`` talking to a DB server: fetches the public key, then ``enrol`` / ``verify`` /
    ``identify`` / ``revoke`` with 128-D (``params.dims``) embeddings."""

    def __init__(self, url: str, params: KolbergParams, *, timeout: float = 120.0, transport=None) -> None:
        self.params = params
        self._http = ServiceClient(url, PROTOCOL, timeout=timeout, transport=transport)
        self.refresh_key()

    def refresh_key(self) -> None:
        """Fetch the DB server's current public key (after a key rotation the old one is refused)."""
        self._http.reset()
        self.client = Client(self.params, _parse(PublicKey, self._http.step("public-key", KeyRequest(0).to_bytes())))

    def _step(self, step: str, msg, cls):
        self._http.reset()
        return _parse(cls, self._http.step(step, msg.to_bytes()))

    def enrol(self, subject_id: str, embedding) -> EnrolResponse:
        return self._step("enrol", self.client.enrol(subject_id, embedding), EnrolResponse)

    def verify(self, subject_id: str, embedding) -> bool:
        return self._step("verify", self.client.verify(subject_id, embedding), Result).accepted

    def identify(self, embedding) -> str | None:
        return self._step("identify", self.client.identify(embedding), Result).subject_id

    def revoke(self, subject_id: str) -> bool:
        return self._step("revoke", RevokeRequest(subject_id), RevokeResponse).revoked

    @property
    def stats(self):
        return self._http.stats

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
