"""Python client of the HTTP service: posts a step's message bytes, carries the session id from
one step to the next, measures each step, and turns error answers into typed errors."""
from __future__ import annotations

import contextlib
import http.client
import json
import select
import ssl
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from ..errors import BackendMismatchError, PrivfaceError, ProtocolError
from ..wire import FrameReader, WireError
from .base import AlreadyEnrolledError, MessageError, NotEnrolledError, SessionError
from .sessions import SESSION_HEADER

OCTETS = "application/octet-stream"


class ServiceError(PrivfaceError):
    """The service refused a request or could not be reached; `status` is the HTTP status
    (0 when no answer came)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class RemoteMessageError(ServiceError, MessageError):
    """400: the server found the message invalid."""


class RemoteNotEnrolledError(ServiceError, NotEnrolledError):
    """404 for an enrolled-subject lookup: the subject is not enrolled."""


class RemoteSessionError(ServiceError, SessionError):
    """409: session missing, unknown, expired or used out of order."""


class RemoteAlreadyEnrolledError(ServiceError, AlreadyEnrolledError):
    """409 for a registration: the subject is already enrolled (revoke it first, or replace it with an
    ``admin`` key)."""


class RemoteBackendMismatchError(ServiceError, BackendMismatchError):
    """409: the server (or the enrolment) is of another face backend than the client's templates; both are named
    (``server_backend``, ``client_backend``)."""

    def __init__(self, message: str, status: int, server_backend: str, client_backend: str):
        BackendMismatchError.__init__(self, message, server_backend, client_backend)
        self.status = status


@dataclass(frozen=True)
class StepStats:
    """One step as the client saw it: message bytes each way and wall time."""

    step: str
    request_bytes: int
    response_bytes: int
    seconds: float
    status: int
    server_seconds: float | None = None
    """The server's compute time for the step, from its Server-Timing header (None if absent)."""


class ServiceClient:
    """Talks to one protocol of a running service, e.g. `ServiceClient(url, "im2020")`.

    `step()` sends the session id the previous step returned (if any) and keeps the new one;
    `stats` lists every step sent (successful or not). `api_key` goes out as `Authorization: Bearer`;
    `tls` (an ssl.SSLContext, see `tls_context`) verifies an https server and carries a client
    certificate for mutual TLS."""

    def __init__(self, base_url: str, protocol: str, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None, api_key: str | None = None,
                 tls: ssl.SSLContext | None = None):
        self.protocol = protocol
        self._auth = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.session: str | None = None
        self.stats: list[StepStats] = []
        self.base_url = base_url.rstrip("/")
        # An httpx transport (tests, embedding) goes through httpx; otherwise one stdlib keep-alive
        # connection, which costs less client CPU per step than httpx.
        self._http = (httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                   verify=tls if tls is not None else True)
                      if transport is not None else _Connection(self.base_url, timeout, tls))

    def step(self, step: str, body: bytes) -> bytes:
        """Run one step; returns the response message bytes."""
        headers = {"content-type": OCTETS, **self._auth}
        if self.session is not None:
            headers[SESSION_HEADER] = self.session
        t0 = time.perf_counter()
        try:
            r = self._request("POST", f"/v1/{self.protocol}/{step}", body, headers)
        finally:
            seconds = time.perf_counter() - t0
        self.stats.append(StepStats(step, len(body), len(r.content), seconds, r.status_code,
                                    server_seconds(r.headers.get("server-timing"))))
        # A session id serves one step: a new one comes back when the flow goes on.
        self.session = r.headers.get(SESSION_HEADER.lower())
        if r.status_code >= 400:
            raise error_of(r)
        return r.content

    @contextlib.contextmanager
    def exchange(self, step: str, body: bytes | Iterable[bytes], length: int | None = None) -> Iterator[FrameReader]:
        """One step whose answer is a frame stream (``wire.framed``), read as it arrives: yields a ``FrameReader``
        over the response body; on leaving, checks that nothing follows the frames read. ``body``: bytes, or pieces
        sent as they are produced with ``length`` (their total) as Content-Length. One request/response pair, counted
        in ``stats`` when it ends. No HTTP session (the protocol carries its own)."""
        headers = {"content-type": OCTETS, **self._auth}
        if not isinstance(body, (bytes, bytearray)):
            if length is None:
                raise ValueError("a body sent in pieces needs its length")
            headers["content-length"] = str(length)
        sent = len(body) if isinstance(body, (bytes, bytearray)) else length
        t0, status, reader, timing = time.perf_counter(), 0, None, None
        try:
            with self._open("POST", f"/v1/{self.protocol}/{step}", body, headers) as r:
                status, timing = r.status_code, server_seconds(r.headers.get("server-timing"))
                if r.status_code >= 400:
                    raise error_of(_Response(r.status_code, r.headers, r.read_all()))
                reader = FrameReader(r.read)
                try:
                    yield reader
                    reader.end()
                except WireError as e:
                    raise ProtocolError(f"{step}: malformed answer from the service: {e}") from None
        finally:
            self.stats.append(StepStats(step, sent, reader.bytes if reader else 0, time.perf_counter() - t0,
                                        status, timing))

    @contextlib.contextmanager
    def _open(self, method: str, path: str, body, headers: dict):
        try:
            if isinstance(self._http, _Connection):
                with self._http.open(method, path, content=body, headers=headers) as r:
                    yield r
            else:
                with self._http.stream(method, path, content=body, headers=headers) as r:
                    yield _HttpxStream(r)
        except ssl.SSLError as e:
            raise ServiceError(f"TLS with {self.base_url} failed: {e.reason or type(e).__name__}") from None
        except (httpx.HTTPError, OSError, http.client.HTTPException) as e:
            raise ServiceError(f"the exchange with {self.base_url} failed: {type(e).__name__}") from None

    def reset(self) -> None:
        """Forget the current session (start a new flow)."""
        self.session = None

    def healthz(self) -> dict:
        r = self._request("GET", "/healthz", None, {})
        if r.status_code != 200:
            raise error_of(r)
        return r.json()

    def _request(self, method: str, path: str, body: bytes | None, headers: dict):
        try:
            return self._http.request(method, path, content=body, headers=headers)
        except ssl.SSLError as e:  # a certificate problem is worth naming (no secrets in it)
            raise ServiceError(f"TLS with {self.base_url} failed: {e.reason or type(e).__name__}") from None
        except (httpx.HTTPError, OSError, http.client.HTTPException) as e:
            raise ServiceError(f"cannot reach the service at {self.base_url}: {type(e).__name__}") from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class _Response:
    """The parts of an answer the client reads (as httpx.Response names them)."""

    status_code: int
    headers: dict
    content: bytes

    def json(self):
        return json.loads(self.content)


class _HttpxStream:
    """An httpx streamed response with the ``read(n)`` of http.client's."""

    def __init__(self, r: httpx.Response) -> None:
        self.status_code, self.headers = r.status_code, {k.lower(): v for k, v in r.headers.items()}
        self._r, self._it, self._buf = r, r.iter_raw(), b""

    def read(self, n: int) -> bytes:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return b""
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def read_all(self) -> bytes:
        return self._buf + self._r.read()


class _Raw:
    """An http.client response being read (``read(n)``, ``read_all``), with lower-case headers."""

    def __init__(self, r: http.client.HTTPResponse) -> None:
        self.status_code, self.headers, self._r = r.status, {k.lower(): v for k, v in r.getheaders()}, r

    def read(self, n: int) -> bytes:
        return self._r.read1(n) if n else b""

    def read_all(self) -> bytes:
        return self._r.read()


class _Connection:
    """One keep-alive HTTP/1.1 connection to ``base_url`` (http or https) with the ``request`` of
    httpx.Client; reopened when the server closed it meanwhile (idle timeout) or after an error."""

    def __init__(self, base_url: str, timeout: float, tls: ssl.SSLContext | None = None) -> None:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ServiceError(f"not an http(s) service URL: {base_url!r}")
        if u.scheme == "https":
            context = tls if tls is not None else ssl.create_default_context()
            self._new = lambda: http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=context)
        else:
            if tls is not None:
                raise ServiceError(f"TLS options given for a plain http URL: {base_url!r} (use https://)")
            self._new = lambda: http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        self._prefix = u.path.rstrip("/")
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        """The kept connection, or a new one if there is none or the server closed it while idle."""
        conn = self._conn
        if conn is not None and conn.sock is not None and select.select([conn.sock], [], [], 0)[0]:
            conn.close()  # readable while idle: the server closed it (or sent something unasked)
            conn = None
        if conn is None:
            conn = self._conn = self._new()
        return conn

    def request(self, method: str, path: str, *, content: bytes | None, headers: dict) -> _Response:
        conn = self._connection()
        try:
            conn.request(method, self._prefix + path, body=content, headers=headers)
            r = conn.getresponse()
            data = r.read()
        except BaseException:
            self.close()
            raise
        if r.will_close:
            self.close()
        return _Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)

    @contextlib.contextmanager
    def open(self, method: str, path: str, *, content, headers: dict) -> Iterator[_Raw]:
        """``request`` with the answer read by the caller as it arrives; the connection is kept only if the
        answer was read to its end."""
        conn = self._connection()
        try:
            conn.request(method, self._prefix + path, body=content, headers=headers)
            r = conn.getresponse()
            yield _Raw(r)
        except BaseException:
            self.close()
            raise
        if r.will_close or not r.isclosed():
            self.close()  # a server closing, or an answer not read to its end: the connection cannot be reused

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def tls_context(ca: str | None = None, client_cert: str | None = None,
                client_key: str | None = None) -> ssl.SSLContext | None:
    """A client TLS context: trusts the CA certificate file `ca` (default: the system's), presents
    `client_cert`/`client_key` (PEM) for mutual TLS; None when nothing is given."""
    if ca is None and client_cert is None and client_key is None:
        return None
    if (client_cert is None) != (client_key is None):
        raise ServiceError("give both --client-cert and --client-key (mutual TLS), or neither")
    try:
        context = ssl.create_default_context(cafile=ca)
        if client_cert is not None:
            context.load_cert_chain(client_cert, client_key)
    except (OSError, ssl.SSLError) as e:
        raise ServiceError(f"cannot load TLS files: {getattr(e, 'strerror', None) or e}") from None
    return context


def error_of(r) -> ServiceError:
    """The typed error for an error answer, carrying the server's message."""
    try:
        answer = r.json()
        message, kind = str(answer["error"]), str(answer.get("type", ""))
    except (ValueError, KeyError, TypeError, AttributeError):  # json.JSONDecodeError is a ValueError
        message, kind = f"HTTP {r.status_code}", ""
    cls = {400: RemoteMessageError, 409: RemoteSessionError}.get(r.status_code, ServiceError)
    if r.status_code == 404 and kind == "NotEnrolledError":
        cls = RemoteNotEnrolledError
    if r.status_code == 409 and kind == "AlreadyEnrolledError":
        cls = RemoteAlreadyEnrolledError
    if r.status_code == 409 and kind == "BackendMismatchError":
        return RemoteBackendMismatchError(message, r.status_code, str(answer.get("server_backend")),
                                          str(answer.get("client_backend")))
    return cls(message, r.status_code)


def server_seconds(header: str | None) -> float | None:
    """The `compute;dur=MS` entry of a Server-Timing header, in seconds."""
    for entry in (header or "").split(","):
        name, *params = (x.strip() for x in entry.split(";"))
        if name == "compute":
            durs = [v for k, _, v in (p.partition("=") for p in params) if k == "dur"]
            try:
                return float(durs[0]) / 1000 if durs else None
            except ValueError:
                return None
    return None
