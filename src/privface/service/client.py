"""Python client of the HTTP service: posts a step's message bytes, carries the session id from
one step to the next, measures each step, and turns error answers into typed errors."""
from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from ..errors import PrivfaceError
from .base import MessageError, NotEnrolledError, SessionError
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
    `stats` lists every step sent (successful or not)."""

    def __init__(self, base_url: str, protocol: str, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None):
        self.protocol = protocol
        self.session: str | None = None
        self.stats: list[StepStats] = []
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, transport=transport)

    def step(self, step: str, body: bytes) -> bytes:
        """Run one step; returns the response message bytes."""
        headers = {"content-type": OCTETS}
        if self.session is not None:
            headers[SESSION_HEADER] = self.session
        t0 = time.perf_counter()
        try:
            r = self._http.post(f"/v1/{self.protocol}/{step}", content=body, headers=headers)
        except httpx.HTTPError as e:
            raise ServiceError(f"cannot reach the service at {self._http.base_url}: "
                               f"{type(e).__name__}") from None
        finally:
            seconds = time.perf_counter() - t0
        self.stats.append(StepStats(step, len(body), len(r.content), seconds, r.status_code,
                                    server_seconds(r.headers.get("server-timing"))))
        # A session id serves one step: a new one comes back when the flow goes on.
        self.session = r.headers.get(SESSION_HEADER)
        if r.status_code >= 400:
            raise error_of(r)
        return r.content

    def reset(self) -> None:
        """Forget the current session (start a new flow)."""
        self.session = None

    def healthz(self) -> dict:
        r = self._http.get("/healthz")
        if r.status_code != 200:
            raise error_of(r)
        return r.json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def error_of(r: httpx.Response) -> ServiceError:
    """The typed error for an error answer, carrying the server's message."""
    try:
        answer = r.json()
        message, kind = str(answer["error"]), str(answer.get("type", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        message, kind = f"HTTP {r.status_code}", ""
    cls = {400: RemoteMessageError, 409: RemoteSessionError}.get(r.status_code, ServiceError)
    if r.status_code == 404 and kind == "NotEnrolledError":
        cls = RemoteNotEnrolledError
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
