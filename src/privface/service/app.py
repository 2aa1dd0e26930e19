"""The HTTP service: `POST /v1/{protocol}/{step}` in front of any `ProtocolService` (base.py).

Bodies are opaque wire-encoded messages and are never logged. Status codes: 400 bad message, 401 no or unknown API
key, 403 key without the step's scope (or a step that declares no scope: fail closed), 404 unknown protocol/step or
subject not enrolled, 409 session missing/unknown/expired/out of order or a face backend other than the server's or
the enrolment's (the body then also names ``server_backend`` and ``client_backend``), 408 body too slow
(``BodyLimits``: past its deadline, or below the minimum rate in a window; the connection is closed), 413 body over
the step's limit, 415 not application/octet-stream, 429 rate limit, subject locked out or too many requests / body
bytes in flight for this caller (limits.py, with Retry-After), 503 store unavailable, too many sessions or a gallery
shard restarting (``errors.UnavailableError``, with Retry-After), 500 anything else.
Every error body is `{"error": "…", "type": "…"}`, never a traceback.

A step may answer with a stream (``StepResult.stream``: pieces produced as the previous one is sent, each send
given ``STREAM_SEND_TIMEOUT`` s), and a service may declare, in ``stream_heads`` (step → bytes), steps whose body is a
frame stream (``wire.framed``) whose first frame, read alone, goes to ``svc.admit(step, frame, caller)`` before the
rest is read: it answers the exact size the whole body may have for this caller (or refuses, 400), so a large
body is buffered only when the service expects it. ``admit`` may also answer ``(size, release)``: ``release()`` is
called once the exchange is over (its answer sent or cut, or the request refused), e.g. to free what the service
reserved for that body. A streamed answer whose client goes away is stopped there (its pieces' iterator closed).

With ``keys`` (an ``ApiKeys``), every step needs ``Authorization: Bearer <key>``, checked before the body
is read or a session touched, so a refused call changes nothing. ``/healthz``, ``/docs`` (Swagger UI, its
scripts served from ``DOCS_STATIC`` by fastapi-offline, nothing from a CDN) and ``/openapi.json`` stay open (no
templates, keys or scores there); ``/metrics`` (Prometheus) needs the
``metrics`` or ``admin`` scope. Every step call leaves one audit record (observe.py) when the whole exchange is over
(a streamed answer: when it ended, or was cut), naming the route as called and the canonical step.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ..errors import BackendMismatchError, PrivfaceError, UnavailableError
from ..store.base import StoreUnavailableError, TemplateStore
from ..wire.codec import PREFIX_BYTES
from .auth import ApiKeys, AuthError, ScopeError, bearer, required_scopes
from .base import (
    AlreadyEnrolledError,
    Caller,
    MessageError,
    NotEnrolledError,
    ProtocolService,
    RejectedAttemptError,
    SessionError,
    StepResult,
)
from .cors import Cors, check_origins
from .docs import mount_docs
from .headers import protect
from .limits import BodyLimits, InFlight, LimitError, Lockout, RateLimiter, caller_counter
from .observe import METRICS_CONTENT_TYPE, Metrics, audit
from .openapi import describe_steps
from .sessions import SESSION_HEADER, SessionLimitError, Sessions
from .web import mount_root, mount_web

log = logging.getLogger("privface.service")
OCTETS = "application/octet-stream"
DEFAULT_MAX_BODY = 16 * 1024 * 1024
DOCS_STATIC = "/docs-static"
STREAM_SEND_TIMEOUT = 120.0
"""Seconds a streamed response waits for the client to take one piece before it gives up (and closes the stream)."""
DEFAULT_BODY_LIMITS = BodyLimits()
"""Every body is read under these unless ``create_app`` is given others (None: no limit)."""
UNLIMITED_SCOPES = frozenset({"internal", "admin"})
"""Keys of services and operators (kolberg DB → auth batches, key rotation) skip the per-client rate limit."""


class ErrorBody(BaseModel):
    error: str  # a message fit to show a user
    type: str  # the error's kind, e.g. MessageError, NotEnrolledError, SessionError, TooLarge
    server_backend: str | None = None  # BackendMismatchError (409): the face backend of the server (or enrolment)
    client_backend: str | None = None  # BackendMismatchError: the face backend the client's templates came from


class _Refused(Exception):
    KINDS = {401: "AuthError", 403: "ScopeError", 404: "NotFound", 405: "MethodNotAllowed", 408: "BodyTimeout",
             413: "TooLarge", 415: "UnsupportedMediaType"}

    def __init__(self, status: int, message: str):
        self.status, self.message = status, message


def status_of(e: PrivfaceError) -> int:
    """The HTTP status of a typed error raised by a step."""
    if isinstance(e, NotEnrolledError):
        return 404
    if isinstance(e, (SessionLimitError, StoreUnavailableError, UnavailableError)):
        return 503
    if isinstance(e, (SessionError, AlreadyEnrolledError, BackendMismatchError)):
        return 409
    return 400  # MessageError and every other PrivfaceError


def _error(status: int, message: str, kind: str | None = None,
           headers: Mapping[str, str] | None = None, **extra: str) -> JSONResponse:
    kind = kind or _Refused.KINDS.get(status, "HTTPError")
    return JSONResponse({"error": message, "type": kind, **extra}, status_code=status, headers=headers)


def create_app(store: TemplateStore, services: Iterable[ProtocolService], *, session_ttl: float = 120.0,
               max_sessions: int = 10_000, max_sessions_per_caller: int | None = None,
               max_body: int = DEFAULT_MAX_BODY, keys: ApiKeys | None = None,
               rate_limit: RateLimiter | None = None, lockout: Lockout | None = None,
               body_limits: BodyLimits | None = DEFAULT_BODY_LIMITS, in_flight: InFlight | None = None,
               allow_origins: Iterable[str] = (), face_landmarks: int | None = None) -> FastAPI:
    """A FastAPI app serving `services` (each a ProtocolService) over `store`; with `keys`, every step
    needs an API key holding the scope the service declares for it (module docstring).

    `max_body` caps every step's body; a service may declare a smaller or larger cap per step in an
    optional `max_body: dict[str, int]` attribute. `rate_limit` and `lockout` (limits.py; `privface serve`
    turns both on) answer 429 with Retry-After. Each caller (API key, else client address) holds at most
    `max_sessions_per_caller` open sessions (default 1 % of `max_sessions`; 429 with Retry-After beyond),
    and a session id is honoured only for the caller that opened it. Every body is read under ``body_limits`` (408
    past its deadline or below its minimum rate; None: no limit) and each caller's requests and body bytes in flight
    under ``in_flight`` (default ``InFlight()``; 429); keys with the ``internal`` or ``admin`` scope skip both
    per-caller limits (rate and in flight). ``allow_origins`` (``serve --allow-origin``, cors.py): the other origins
    of the deployment — CORS on a terminal's steps for exactly those, and the page's CSP ``connect-src`` widened to
    them. ``face_landmarks``: the alignment of the face backend's templates, which the page at /app/ runs
    (`privface serve --landmarks`; None: the backend's default)."""
    allow_origins = check_origins(allow_origins)
    in_flight = InFlight() if in_flight is None else in_flight
    by_name: dict[str, ProtocolService] = {}
    for s in services:
        if s.name in by_name:
            raise ValueError(f"two services named {s.name!r}")
        if not set(s.first_steps) <= set(s.steps):
            raise ValueError(f"{s.name}: first_steps must be among steps")
        by_name[s.name] = s
        if keys is not None and (unmapped := [t for t in s.steps if not required_scopes(s, t)]):
            log.warning("%s: steps without a declared scope are refused: %s", s.name, ", ".join(unmapped))
    sessions = Sessions(session_ttl, max_sessions, max_per_caller=max_sessions_per_caller)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield  # uvicorn has stopped accepting and let running requests finish
        log.info("shutdown: dropping %d open sessions", len(sessions))
        sessions.clear()

    app = FastAPIOffline(title="privface", version="1", summary="Face matching on encrypted templates",
                         lifespan=lifespan, docs_url=None, redoc_url=None, static_url=DOCS_STATIC)  # no CDN
    protect(app)  # no framing, no sniffing, a CSP on every answer (headers.py)
    mount_docs(app, DOCS_STATIC)  # /docs without inline script, under a CSP (docs.py)
    app.state.sessions, app.state.store, app.state.services = sessions, store, by_name
    app.state.keys = keys
    app.state.metrics = metrics = Metrics(sessions)

    def authorize(key, svc: ProtocolService, step: str) -> None:
        """403 unless `key` holds the step's scope (a step that declares none is refused)."""
        need = required_scopes(svc, step)
        if not need & key.scopes:
            log.info("key %s refused on %s/%s (scope)", key.key_id, svc.name, step)
            raise ScopeError(f"{svc.name}/{step} needs the {' or '.join(sorted(need))} scope" if need
                             else f"{svc.name}/{step} declares no scope and is refused")

    def limit(svc: ProtocolService, step: str) -> int:
        return int(getattr(svc, "max_body", {}).get(step, max_body))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException):
        return _error(e.status_code, str(e.detail), headers=getattr(e, "headers", None))

    @app.get("/healthz", response_model=dict)
    def healthz():
        """Liveness and store reachability; lists the mounted protocols."""
        try:
            store.get("privface", "healthz")
        except PrivfaceError:
            return _error(503, "template store unavailable", "StoreUnavailableError")
        return {"status": "ok", "protocols": sorted(by_name)}

    @app.get("/metrics", response_class=Response,
             responses={200: {"content": {METRICS_CONTENT_TYPE: {}}}, 401: {"model": ErrorBody},
                        403: {"model": ErrorBody}})
    def metrics_endpoint(request: Request) -> Response:
        """Prometheus text format; with API keys on, a key with the metrics or admin scope."""
        if keys is not None:
            try:
                key = keys.authenticate(bearer(request.headers.get("authorization")))
            except AuthError as e:
                return _error(401, str(e), "AuthError", headers={"www-authenticate": "Bearer"})
            if not key.scopes & {"metrics", "admin"}:
                return _error(403, "/metrics needs the metrics or admin scope", "ScopeError")
        return Response(metrics.render(), media_type=METRICS_CONTENT_TYPE)

    @app.post(
        "/v1/{protocol}/{step:path}",
        summary="Run one protocol step",
        response_class=Response,
        responses={200: {"content": {OCTETS: {}}, "description": "the response message; "
                         f"header {SESSION_HEADER} when the flow continues"},
                   **{c: {"model": ErrorBody} for c in (400, 401, 403, 404, 409, 413, 415, 429, 503)}},
        openapi_extra={"requestBody": {"required": True, "content": {
            OCTETS: {"schema": {"type": "string", "format": "binary"}}}},
            "parameters": [{"name": SESSION_HEADER, "in": "header", "required": False,
                            "schema": {"type": "string"},
                            "description": "session id returned by the previous step"}]},
    )
    async def run_step(protocol: str, step: str, request: Request) -> Response:
        t0, seen = time.perf_counter(), {"release": []}  # seen: what the audit record may name (no content)
        route = step  # as called: a deprecated alias (im2020 register) is audited as such
        if protocol in by_name:
            step = getattr(by_name[protocol], "step_aliases", {}).get(step, step)
        try:
            response = await _run_step(protocol, step, request, seen)
        except BaseException:
            _release(seen)
            raise
        known = protocol in by_name and step in by_name[protocol].steps
        labels = (protocol, step) if known else ("unknown", "unknown")

        def record(ended: bool = True) -> None:
            """Metrics and the audit record, once the answer is complete (a stream: when it ended, or was cut); what
            the exchange held (in-flight counts, the service's reservations) is released."""
            _release(seen)
            seconds = time.perf_counter() - t0
            if not ended:
                seen["error"] = "StreamEnded"
            metrics.requests.labels(*labels, str(response.status_code) if ended else "cut").inc()
            metrics.latency.labels(*labels).observe(seconds)
            accepted = seen.get("accepted")
            if accepted is not None:
                metrics.attempts.labels(protocol, "accepted" if accepted else "rejected").inc()
            ok = response.status_code < 400 and ended
            key = seen.get("key")
            audit(party=key.key_id if key else None, party_name=key.name if key else None,
                  client=request.client.host if request.client else None, protocol=protocol[:64], step=step[:64],
                  route=route[:64], subject=seen.get("subject"), status=response.status_code,
                  error=seen.get("error"),
                  decision=("cut" if not ended else "refused" if not ok else (seen.get("decision") or "allowed")
                            if accepted is None else "accepted" if accepted else "rejected"),
                  ms=round(seconds * 1000, 3))

        if isinstance(response, _Stream):
            response.ended, response.release = record, lambda: _release(seen)
        else:
            record()
        return response

    async def _run_step(protocol: str, step: str, request: Request, seen: dict) -> Response:
        try:
            key = None if keys is None else await run_in_threadpool(  # 401 before anything else
                keys.authenticate, bearer(request.headers.get("authorization")))
            seen["key"] = key
            caller = Caller(f"key:{key.key_id}", key.scopes) if key else Caller(
                f"addr:{request.client.host if request.client else '?'}")
            unlimited = bool(key and key.scopes & UNLIMITED_SCOPES)
            if rate_limit is not None and not unlimited:
                try:
                    rate_limit.take(caller.id)
                except LimitError:
                    metrics.rate_limited.inc()
                    raise
            svc = by_name.get(protocol)
            if svc is None:
                raise _Refused(404, f"unknown protocol {protocol!r}")
            if step not in svc.steps:
                raise _Refused(404, f"unknown step {step!r} of {protocol}")
            if key is not None:
                authorize(key, svc, step)
            ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != OCTETS:
                raise _Refused(415, f"send the message as {OCTETS}")
            cap = limit(svc, step)
            declared = request.headers.get("content-length")
            if declared is not None and (not declared.isdigit() or int(declared) > cap):
                raise _Refused(413, f"{protocol}/{step} accepts at most {cap} bytes")
            sid = request.headers.get(SESSION_HEADER)
            if sid is None and step not in svc.first_steps:
                raise SessionError(f"{protocol}/{step} continues a flow: send {SESSION_HEADER}")
            if sid is not None:
                sessions.check(protocol, sid, caller.id)
            else:
                sessions.room(caller.id)
            too_large = f"{protocol}/{step} accepts at most {cap} bytes"
            account = None
            if not unlimited:  # one caller's stalled bodies: at most so many requests and bytes at once
                ticket = in_flight.enter(caller.id)
                seen["release"].append(lambda: in_flight.leave(caller.id, ticket))

                def account(n: int) -> None:
                    in_flight.add(caller.id, ticket, n)

            heads = getattr(svc, "stream_heads", {})
            reader = _Body(request, body_limits, account, int(declared) if declared is not None else None)
            if step in heads:
                def admit(head: bytes):
                    return (svc.admit(step, head, caller) if getattr(svc, "takes_caller", False)
                            else svc.admit(step, head))

                body = await _read_framed(reader, cap, heads[step], admit, declared, f"{protocol}/{step}",
                                          seen["release"].append)
            else:
                body = await _read(reader, cap, too_large)
            attempt = None
            if lockout is not None and hasattr(svc, "attempt"):
                peeked = sessions.peek(protocol, sid, caller.id) if sid is not None else None
                attempt = await run_in_threadpool(svc.attempt, step, body, peeked)
            t0 = time.perf_counter()
            if attempt is None:
                state = sessions.take(protocol, sid, caller.id) if sid is not None else None
                result = await run_in_threadpool(_handle, svc, step, body, state, caller)
            else:
                seen["subject"] = attempt[0]  # None for 1:N: counted per caller (guarded)
                result = await run_in_threadpool(guarded, svc, step, body, sid, attempt, caller)
            compute_ms = (time.perf_counter() - t0) * 1000
            if not isinstance(result, StepResult) or not isinstance(result.body, bytes):
                raise TypeError(f"{protocol}.handle must return a StepResult with bytes")
            if result.stream is not None and result.state is not None:
                raise TypeError(f"{protocol}.handle: a streamed answer keeps no HTTP session")
            seen.update(subject=result.subject or seen.get("subject"), accepted=result.accepted,
                        decision=result.decision)
            # Server-Timing (W3C): the step's compute time, so clients can tell network from work.
            headers = {"server-timing": f"compute;dur={compute_ms:.3f}"}
            if result.stream is not None:
                return _Stream(result.stream, headers, f"{protocol}/{step}")
            if result.state is not None:
                headers[SESSION_HEADER] = sessions.open(protocol, result.state, caller.id)
            return Response(result.body, media_type=OCTETS, headers=headers)
        except _Refused as e:
            seen["error"] = _Refused.KINDS.get(e.status, "HTTPError")
            # a body cut for time: close the connection, or the client could go on trickling into it
            return _error(e.status, e.message, headers={"connection": "close"} if e.status == 408 else None)
        except ClientDisconnect:
            seen["error"] = "ClientDisconnect"  # the body was cut short by the client: no one reads this answer
            return _error(400, "the client went away before its body was read", "ClientDisconnect")
        except AuthError as e:
            seen["error"] = "AuthError"
            return _error(401, str(e), "AuthError", headers={"www-authenticate": "Bearer"})
        except ScopeError as e:
            seen["error"] = "ScopeError"
            return _error(403, str(e), "ScopeError")
        except LimitError as e:
            seen["error"] = "LimitError"
            return _error(429, str(e), "LimitError", headers={"retry-after": str(e.retry_after)})
        except PrivfaceError as e:
            seen["error"] = type(e).__name__
            unavailable = isinstance(e, StoreUnavailableError)  # details stay on the server
            retry = {"retry-after": str(e.retry_after)} if isinstance(e, UnavailableError) else None
            backends = ({"server_backend": e.server_backend, "client_backend": e.client_backend}
                        if isinstance(e, BackendMismatchError) else {})
            return _error(status_of(e), "template store unavailable" if unavailable else str(e),
                          type(e).__name__, headers=retry, **backends)
        except Exception as e:  # a bug: tell the client nothing, log only the type (no bodies)
            seen["error"] = "InternalError"
            log.error("%s/%s failed with %s", protocol, step, type(e).__name__)
            return _error(500, "internal server error", "InternalError")

    def guarded(svc: ProtocolService, step: str, body: bytes, sid: str | None, attempt,
                caller: Caller) -> StepResult:
        """A step of a verification attempt: refused (429, nothing taken) while the subject is locked
        out; the deciding step holds an in-flight slot and counts its decision (limits.Lockout). An attempt
        that names no subject (1:N identification) counts against the caller (limits.caller_counter)."""
        subject, decides = attempt
        name, subject = (svc.name, subject) if subject is not None else caller_counter(svc.name, caller.id)

        def _state(sid: str | None):
            return sessions.take(svc.name, sid, caller.id) if sid is not None else None

        try:
            if not decides:
                lockout.check(name, subject)
                return _handle(svc, step, body, _state(sid), caller)
            with lockout.attempt(name, subject):
                try:
                    result = _handle(svc, step, body, _state(sid), caller)
                except RejectedAttemptError:  # e.g. a forged output label: 400, and counted as a rejection
                    lockout.record(name, subject, False)
                    raise
                if isinstance(result, StepResult) and result.accepted is not None:
                    lockout.record(name, subject, result.accepted)
                return result
        except LimitError as e:
            metrics.lockouts.labels(svc.name).inc()
            if hasattr(svc, "refused"):  # e.g. the gsm kiosk page shows it
                svc.refused(subject, str(e))
            raise

    if keys is not None:
        _declare_bearer(app)
    describe_steps(app, by_name, limit)  # one OpenAPI operation per step (service/openapi.py)
    mount_web(app, by_name, allow_origins, face_landmarks)  # the browser client at /app/ (service/web.py)
    terminals = [f"/v1/{s.name}/" for s in by_name.values() if getattr(s, "role", None) == "terminal"]
    terminals += ["/app/pair"] if any(getattr(s, "kiosk", None) is not None for s in by_name.values()) else []
    if allow_origins and terminals:
        app.add_middleware(Cors, origins=allow_origins, prefixes=terminals)  # inside SecurityHeaders (headers.protect)
    mount_root(app, by_name)  # / → the page, or what this server serves (service/web.py)
    return app


def _handle(svc: ProtocolService, step: str, body: bytes, state, caller: Caller) -> StepResult:
    """``svc.handle``, told the caller (base.Caller) when the service declares ``takes_caller``."""
    if getattr(svc, "takes_caller", False):
        return svc.handle(step, body, state, caller=caller)
    return svc.handle(step, body, state)


def _declare_bearer(app: FastAPI) -> None:
    """Describe the API-key requirement in /openapi.json (a bearer scheme on every step), so clients
    and API fuzzers know to send it."""
    make = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = make()
            schema.setdefault("components", {})["securitySchemes"] = {"apiKey": {
                "type": "http", "scheme": "bearer", "description": "pfk_… key from privface keys create"}}
            for path, ops in schema["paths"].items():
                if path.startswith("/v1/") or path == "/metrics":
                    for op in ops.values():
                        op["security"] = [{"apiKey": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi


def _release(seen: dict) -> None:
    """Run (once) what the exchange registered to release at its end."""
    release, seen["release"] = seen.get("release", []), []
    for f in reversed(release):
        try:
            f()
        except Exception as e:  # a release never fails the answer; log its type only
            log.error("releasing a request's reservation failed with %s", type(e).__name__)


class _Body:
    """A request body as it arrives (``next()``: a chunk, None at its end), cut with 408 once ``limits.timeout`` s
    have passed since it started to be read, or when a window of ``limits.rate_window`` s brought fewer than
    ``limits.min_rate``·window bytes (limits.BodyLimits). ``account(n)`` (the caller's bytes in flight; it may raise
    LimitError) is told the declared Content-Length at once, or each chunk's size as it arrives. Read from the ASGI
    ``receive`` directly: a wait for it cut by a window's end loses nothing (uvicorn keeps the bytes until it
    returns)."""

    def __init__(self, request: Request, limits: BodyLimits | None, account: Callable[[int], None] | None,
                 declared: int | None) -> None:
        self._receive, self._more = request.receive, True
        self._limits, self._account, self._declared = limits, account, declared
        if account is not None and declared:
            account(declared)
        now = time.monotonic()
        self._deadline = now + (limits.timeout if limits else float("inf"))
        self._window_end = now + (limits.rate_window if limits else float("inf"))
        self._window_bytes = 0

    def _check(self, now: float) -> None:
        lim = self._limits
        if lim is None:
            return
        if now >= self._deadline:
            raise _Refused(408, f"the request body did not arrive within {lim.timeout:g} s")
        if now >= self._window_end:
            if lim.min_rate and self._window_bytes < lim.min_rate * lim.rate_window:
                raise _Refused(408, f"the request body arrived slower than {lim.min_rate:g} bytes/s "
                                    f"over {lim.rate_window:g} s")
            self._window_end, self._window_bytes = now + lim.rate_window, 0

    async def next(self) -> bytes | None:
        while self._more:
            self._check(time.monotonic())
            try:
                async with asyncio.timeout(None if self._limits is None else
                                           min(self._deadline, self._window_end) - time.monotonic()):
                    message = await self._receive()
            except TimeoutError:
                continue  # a window ended: _check decides
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            chunk, self._more = message.get("body", b""), message.get("more_body", False)
            if chunk:
                self._window_bytes += len(chunk)
                if self._account is not None and self._declared is None:
                    self._account(len(chunk))
                return chunk
        return None

    async def __aiter__(self):
        while (chunk := await self.next()) is not None:
            yield chunk


async def _read(body: _Body, cap: int, message: str) -> bytes:
    """The request body, refused with 413 as soon as it passes `cap` bytes (chunked or lying
    senders included), without reading the rest."""
    chunks, size = [], 0
    async for chunk in body:
        size += len(chunk)
        if size > cap:
            raise _Refused(413, message)
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_framed(body: _Body, cap: int, head_limit: int, admit, declared: str | None, what: str,
                       hold: Callable[[Callable[[], None]], None]) -> bytes:
    """A frame-stream body (``stream_heads``): its first frame (413 past ``head_limit`` bytes), then ``admit(frame)``
    (in a thread; it may refuse) → the body's allowed size (or that and a ``release`` handed to ``hold``), then the
    rest, refused with 413 as soon as the body passes that size (or ``cap``) or the declared Content-Length does; 400
    if the body ends inside the first frame."""
    buf = bytearray()

    async def fill(n: int, limit: int) -> bool:
        while len(buf) < n:
            chunk = await body.next()
            if chunk is None:
                return False
            buf.extend(chunk)
            if len(buf) > limit:
                raise _Refused(413, f"{what} accepts at most {limit} bytes here")
        return True

    if not await fill(PREFIX_BYTES, cap):
        raise MessageError(f"{what}: the body ends before its first frame")
    n = int.from_bytes(buf[:PREFIX_BYTES], "big")
    if n > head_limit:
        raise _Refused(413, f"{what}: a first frame of {n} bytes (at most {head_limit})")
    if not await fill(PREFIX_BYTES + n, cap):
        raise MessageError(f"{what}: the body ends inside its first frame")
    admitted = await run_in_threadpool(admit, bytes(buf[PREFIX_BYTES:PREFIX_BYTES + n]))
    if isinstance(admitted, tuple):
        admitted, release = admitted
        hold(release)
    allowed = min(cap, int(admitted))
    if declared is not None and int(declared) > allowed:
        raise _Refused(413, f"{what} accepts {allowed} bytes for this message, not {declared}")
    if len(buf) > allowed:
        raise _Refused(413, f"{what} accepts at most {allowed} bytes here")
    async for chunk in body:
        buf.extend(chunk)
        if len(buf) > allowed:
            raise _Refused(413, f"{what} accepts at most {allowed} bytes here")
    return bytes(buf)


class _Stream(StreamingResponse):
    """A streamed answer (``StepResult.stream``): each piece computed in a worker thread, then sent; a client that
    takes none for ``STREAM_SEND_TIMEOUT`` s, a client that goes away (its ``http.disconnect``: uvicorn drops what is
    sent after it without a word), or a piece that fails, ends the response early (the client sees a truncated body),
    and no further piece is computed. The pieces' iterator is closed in every case, so the service can drop what it
    was for."""

    def __init__(self, pieces: Iterator[bytes], headers: dict, what: str) -> None:
        super().__init__(pieces, media_type=OCTETS, headers=headers)
        self._pieces, self._what = pieces, what
        self.ended: Callable[[bool], None] | None = None
        """Called once the stream is over, with whether it was sent whole (the step's metrics and audit record)."""
        self.release: Callable[[], None] = lambda: None
        """Called (at least once) as soon as the last piece is sent, before the end of the body, so that what the
        exchange reserved is free before the client can see the answer end and send its next request."""

    async def __call__(self, scope, receive, send) -> None:
        whole, gone = False, asyncio.Event()

        async def listen() -> None:  # the request body has been read: the next message is the disconnect
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        listener = asyncio.ensure_future(listen())
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for piece in self.body_iterator:
                if gone.is_set():
                    raise ConnectionResetError("the client went away")
                await asyncio.wait_for(send({"type": "http.response.body", "body": piece, "more_body": True}),
                                       STREAM_SEND_TIMEOUT)
            if gone.is_set():
                raise ConnectionResetError("the client went away")
            self.release()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            whole = True
        except Exception as e:  # the response has started: the stream can only end short
            log.warning("%s: streamed answer ended early (%s)", self._what, type(e).__name__)
        finally:
            listener.cancel()
            self.release()
            close = getattr(self._pieces, "close", None)
            if close is not None:
                await run_in_threadpool(close)
            if self.ended is not None:
                self.ended(whole)


__all__ = ["create_app", "status_of", "SESSION_HEADER", "MessageError", "DEFAULT_MAX_BODY"]
