"""Cross-origin terminals (issue 39): the user's installed page on the provider's origin presents to a terminal on
another origin. ``serve --allow-origin ORIGIN`` (repeatable) names the deployment's other origins: a terminal's
steps (``/v1/gsm/…`` of a ``--role terminal`` server, and its kiosk's ``/app/pair``) answer CORS for exactly those
origins (``Cors``), and the page's CSP ``connect-src`` (web.py) lists exactly those beside ``'self'`` — on the
provider, the terminals its users' app may present to (also in its ``params.json`` as ``terminals``, where the app
looks up a pairing code). A provider's own steps get no CORS (its page is same-origin). Nothing else changes: no
wildcard, no credentials (the API authenticates by bearer key, never by cookie), and requests from any other origin
get no CORS headers (the browser keeps their answers from the page) — a preflight from one is refused with 403.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import PrivfaceError
from .sessions import SESSION_HEADER

ORIGIN = re.compile(r"^(?i:https?)://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)(:[0-9]{1,5})?$")
"""scheme://host[:port], nothing after it (a browser's Origin header has no path and no trailing slash)."""
ALLOW_HEADERS = f"content-type, authorization, {SESSION_HEADER.lower()}"
EXPOSE_HEADERS = f"{SESSION_HEADER.lower()}, server-timing, retry-after"
MAX_AGE = "600"


def check_origins(origins: Iterable[str]) -> tuple[str, ...]:
    """The origins as given, each ``http(s)://host[:port]`` (port 1–65535), lowercased scheme and host; anything
    else (a path, ``*``, ``null``) is a PrivfaceError naming it."""
    out = []
    for o in origins:
        m = ORIGIN.match(o)
        port = m.group(2) if m else None
        if m is None or (port is not None and not 0 < int(port[1:]) < 65536):
            raise PrivfaceError(f"--allow-origin {o!r}: give an origin, scheme://host[:port], no path, no wildcard")
        scheme, rest = o.split("://", 1)
        out.append(f"{scheme.lower()}://{rest.lower()}")
    return tuple(dict.fromkeys(out))


class Cors:
    """ASGI middleware: CORS for ``origins`` only, on paths under ``prefixes`` (module docstring)."""

    def __init__(self, app: ASGIApp, origins: Iterable[str], prefixes: Iterable[str]) -> None:
        self.app = app
        self.origins = frozenset(check_origins(origins))
        self.prefixes = tuple(prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope["headers"]}
        origin = headers.get(b"origin", b"").decode("latin-1")
        allowed = origin in self.origins
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
            await self._preflight(send, origin if allowed else None)
            return
        if not allowed:
            await self.app(scope, receive, send)
            return

        async def add(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin"),
                         (b"access-control-expose-headers", EXPOSE_HEADERS.encode())]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, add)

    @staticmethod
    async def _preflight(send: Send, origin: str | None) -> None:
        if origin is None:
            body = b'{"error": "this origin may not call this server", "type": "CorsError"}'
            headers = [(b"content-type", b"application/json"), (b"vary", b"Origin")]
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        headers = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin"),
                   (b"access-control-allow-methods", b"POST"),
                   (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
                   (b"access-control-max-age", MAX_AGE.encode())]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
