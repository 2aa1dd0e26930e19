"""Headers on every answer of the service, errors included (issue 35 A5): no page of this origin may be framed
(``X-Frame-Options: DENY`` and CSP ``frame-ancestors 'none'``, against clickjacking the page that keeps the user's
key), and no answer is sniffed into another type. An answer without a Content-Security-Policy of its own (the API's
JSON and octets, /healthz, /openapi.json, errors) gets ``DEFAULT_CSP``, which allows nothing."""
from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
ALWAYS = ((b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"))


class SecurityHeaders:
    """ASGI middleware: adds ``ALWAYS`` (replacing the app's own values) and ``DEFAULT_CSP`` where the answer has none;
    an answer's own CSP must forbid framing itself (web.CSP and docs.DOCS_CSP say ``frame-ancestors 'none'``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def add(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in ALWAYS}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                if not any(k.lower() == b"content-security-policy" for k, _ in headers):
                    headers.append((b"content-security-policy", DEFAULT_CSP.encode()))
                message = {**message, "headers": [*headers, *ALWAYS]}
            await send(message)

        await self.app(scope, receive, add)


def protect(app: Starlette) -> None:
    """Put ``SecurityHeaders`` outside every other layer of ``app``, Starlette's own error handler included, so that
    its 500 answers carry the headers too."""
    build = app.build_middleware_stack

    def stack() -> ASGIApp:
        return SecurityHeaders(build())

    app.build_middleware_stack = stack  # type: ignore[method-assign]
