"""ident over HTTP: ``HttpKeyServer`` (the local server's link to the key server) and ``IdentClient`` (a client
of the local server). Every answer is parsed by the wire codec and validated by the party before use."""
from __future__ import annotations

import numpy as np

from ...errors import ProtocolError
from ...protocols.common import message_bytes as _bytes
from ...protocols.common import parse_answer as _parse
from ...protocols.hers.messages import (
    PROTOCOL,
    Attached,
    Erased,
    EraseOpened,
    ErasePads,
    KeyDecision,
    Query,
    Reencrypted,
    Result,
)
from ..client import ServiceClient


class _IdentHttp(ServiceClient):
    def __init__(self, url: str, *, timeout: float = 600.0, transport=None, api_key: str | None = None,
                 tls=None) -> None:
        super().__init__(url, PROTOCOL, timeout=timeout, transport=transport, api_key=api_key, tls=tls)


class HttpKeyServer(_IdentHttp):
    """The key server's steps as methods (same names and messages as ``scale.ident.KeyRole``), one call each."""

    def attach(self, msg) -> Attached:
        self.reset()
        return _parse(Attached, self.step("attach", _bytes(msg)))

    def decide(self, chunk) -> KeyDecision | None:
        self.reset()
        body = self.step("decide", _bytes(chunk))
        return _parse(KeyDecision, body) if body else None

    def reencrypt(self, msg) -> Reencrypted:
        self.reset()
        return _parse(Reencrypted, self.step("reencrypt", _bytes(msg)))


    def erase_open(self, msg) -> EraseOpened:
        self.reset()
        return _parse(EraseOpened, self.step("erase/open", _bytes(msg)))

    def erase_transfer(self, msg) -> ErasePads:
        self.reset()
        return _parse(ErasePads, self.step("erase/transfer", _bytes(msg)))

    def erase_close(self, msg) -> Erased:
        self.reset()
        return _parse(Erased, self.step("erase/close", _bytes(msg)))


class IdentClient(_IdentHttp):
    """A client of the local server: ``identify(embedding)`` → the gallery id, or None (reject)."""

    def identify(self, embedding) -> str | None:
        x = np.asarray(embedding, dtype="<f8").ravel()
        self.reset()
        result = _parse(Result, self.step("identify", Query(x.tobytes()).to_bytes()))
        if result.accepted != (result.subject_id is not None):
            raise ProtocolError("malformed answer from the service: accepted without a subject, or the reverse")
        return result.subject_id
