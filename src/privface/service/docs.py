"""``/docs``: Swagger UI for the API, with no inline script so that it can run under a strict
Content-Security-Policy (issue 35 A5) — it shares its origin with ``/app/``, the page that keeps the user's key.

The page is static HTML; Swagger UI's bundle and stylesheet come from ``DOCS_STATIC`` (fastapi-offline, no CDN) and
its start-up code from ``/docs/init.js``, which reads the OpenAPI URL from the page's ``data-openapi`` attribute."""
from __future__ import annotations

import html

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

DOCS_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
INIT_JS = """"use strict";
window.ui = SwaggerUIBundle({
  url: document.getElementById("swagger-ui").dataset.openapi,
  dom_id: "#swagger-ui", layout: "BaseLayout", deepLinking: true, showExtensions: true, showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""


def mount_docs(app: FastAPI, static_url: str) -> None:
    """``/docs`` and ``/docs/init.js`` (build the app with ``docs_url=None`` so FastAPI adds no page of its own)."""
    headers = {"content-security-policy": DOCS_CSP, "cache-control": "no-cache"}

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> Response:
        root = html.escape(request.scope.get("root_path", ""), quote=True)
        static, openapi = f"{root}{static_url}", f"{root}{html.escape(app.openapi_url or '', quote=True)}"
        return HTMLResponse(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(app.title)} - Swagger UI</title>
<link rel="stylesheet" href="{static}/swagger-ui.css"><link rel="icon" href="{static}/favicon.png"></head>
<body><div id="swagger-ui" data-openapi="{openapi}"></div>
<script src="{static}/swagger-ui-bundle.js"></script><script src="{root}/docs/init.js"></script></body></html>
""", headers=headers)

    @app.get("/docs/init.js", include_in_schema=False)
    def docs_init() -> Response:
        return Response(INIT_JS, media_type="text/javascript; charset=utf-8", headers=headers)
