"""cryptomask's key generator over HTTP: ``HttpKeyGenerator``, the CS's link to ``privface serve --protocol cryptomask
--role kg`` (an ``internal`` API key). Every answer is parsed by the wire codec and checked by ``scale.cryptomask_kg.
KGLink`` before use."""
from __future__ import annotations

from ...protocols.common import message_bytes as _bytes
from ...protocols.common import parse_answer as _parse
from ...protocols.cryptomask.erase_messages import EraseAttached, EraseRefreshed
from ...protocols.cryptomask.server import PROTOCOL
from ..client import ServiceClient


class HttpKeyGenerator(ServiceClient):
    """The KG's steps as methods (same names and messages as ``scale.cryptomask_kg.KeyGeneratorRole``'s
    ``attach`` / ``refresh``, prefixed ``erase_``), one call each."""

    def __init__(self, url: str, *, timeout: float = 600.0, transport=None, api_key: str | None = None,
                 tls=None) -> None:
        super().__init__(url, PROTOCOL, timeout=timeout, transport=transport, api_key=api_key, tls=tls)

    def erase_attach(self, msg) -> EraseAttached:
        self.reset()
        return _parse(EraseAttached, self.step("erase/attach", _bytes(msg)))

    def erase_refresh(self, msg) -> EraseRefreshed:
        self.reset()
        return _parse(EraseRefreshed, self.step("erase/refresh", _bytes(msg)))
