"""kolberg over HTTP: ``HttpAuth`` (the DB server's and ``privface rotate-keys``' link to the auth server) and
``KolbergClient`` (a client of the DB server). Every answer is parsed by the wire codec and validated by the
party before use."""
from __future__ import annotations

import threading

from ...protocols.common import message_bytes as _bytes
from ...protocols.common import parse_answer as _parse
from ...protocols.kolberg.messages import (
    AuthDecision,
    AuthKeys,
    Challenge,
    ChallengeRequest,
    EnrolResponse,
    KeyRequest,
    PublicKey,
    ReencryptResponse,
    Result,
    RevokeRequest,
    RevokeResponse,
)
from ...protocols.kolberg.params import KolbergParams
from ...protocols.kolberg.parties import PROTOCOL, Client
from ..client import ServiceClient


class _KolbergHttp(ServiceClient):
    """A ServiceClient for the kolberg steps (sessionless: one message in, one out)."""

    def __init__(self, url: str, *, timeout: float = 120.0, transport=None, api_key: str | None = None,
                 tls=None) -> None:
        super().__init__(url, PROTOCOL, timeout=timeout, transport=transport, api_key=api_key, tls=tls)

    def _call(self, step: str, msg, cls):
        self.reset()
        return _parse(cls, self.step(step, _bytes(msg)))


class HttpAuth:
    """The auth server's steps as methods (same names and messages as ``AuthServer``), one HTTP call each.
    Safe to share between threads (the DB server answers its clients on a thread pool): each thread talks to
    the auth server over a connection of its own, so concurrent calls never interleave on one socket."""

    def __init__(self, url: str, **options) -> None:
        self._make = lambda: _KolbergHttp(url, **options)
        self._local, self._lock, self._links = threading.local(), threading.Lock(), []
        self._link()  # a bad URL or TLS option fails here

    def _link(self) -> _KolbergHttp:
        link = getattr(self._local, "link", None)
        if link is None:
            link = self._local.link = self._make()
            with self._lock:
                self._links.append(link)
        return link

    def _call(self, step: str, msg, cls):
        return self._link()._call(step, msg, cls)

    def close(self) -> None:
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def public_key(self) -> PublicKey:
        return self._call("public-key", KeyRequest(0), PublicKey)

    def keys(self, request=None) -> AuthKeys:
        return self._call("auth/keys", request or KeyRequest(0), AuthKeys)

    def decide(self, batch) -> AuthDecision | None:
        link = self._link()
        link.reset()
        body = link.step("auth/decide", _bytes(batch))
        return _parse(AuthDecision, body) if body else None

    def rotate_begin(self, request=None) -> AuthKeys:
        return self._call("auth/rotate/begin", request or KeyRequest(0), AuthKeys)

    def reencrypt(self, request) -> ReencryptResponse:
        return self._call("auth/rotate/reencrypt", request, ReencryptResponse)

    def activate(self, request) -> AuthKeys:
        return self._call("auth/rotate/activate", request, AuthKeys)

    def retire(self, request) -> AuthKeys:
        return self._call("auth/rotate/retire", request, AuthKeys)


class KolbergClient(_KolbergHttp):
    """A kolberg ``Client`` talking to a DB server: fetches the public key, then ``enrol`` / ``verify`` /
    ``identify`` / ``revoke`` with 128-D (``params.dims``) embeddings. ``stats``: every step sent."""

    def __init__(self, url: str, params: KolbergParams, *, timeout: float = 120.0, transport=None,
                 api_key: str | None = None, tls=None) -> None:
        super().__init__(url, timeout=timeout, transport=transport, api_key=api_key, tls=tls)
        self.params = params
        self.refresh_key()

    def refresh_key(self) -> None:
        """Fetch the DB server's current public key (after a key rotation the old one is refused)."""
        self.client = Client(self.params, self._call("public-key", KeyRequest(0), PublicKey))

    def enrol(self, subject_id: str, embedding) -> EnrolResponse:
        return self._call("enrol", self.client.enrol(subject_id, embedding), EnrolResponse)

    def verify(self, subject_id: str, embedding) -> bool:
        """``verify/challenge`` (a fresh nonce, in a new session), then ``verify`` in that session."""
        challenge = self._call("verify/challenge", ChallengeRequest(subject_id), Challenge)
        body = _bytes(self.client.verify(subject_id, embedding, challenge))
        return _parse(Result, self.step("verify", body)).accepted

    def identify(self, embedding) -> str | None:
        return self._call("identify", self.client.identify(embedding), Result).subject_id

    def revoke(self, subject_id: str) -> bool:
        return self._call("revoke", RevokeRequest(subject_id), RevokeResponse).revoked
