"""How a protocol plugs into the HTTP service.

The service exposes `POST /v1/{protocol}/{step}` with an `application/octet-stream` body (one
wire-encoded message). Multi-round flows carry a session: a step that returns a state gets a
fresh session id back in the `X-Privface-Session` response header; the client sends it with the
next step; the service keeps the state server-side until the flow ends or the session expires.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import PrivfaceError


class NotEnrolledError(PrivfaceError):
    """The subject id named in a request is not enrolled (HTTP 404)."""


class MessageError(PrivfaceError):
    """A message failed validation: wrong type, size, range or group membership (HTTP 400)."""


def json_object(body: bytes) -> dict:
    """An admin step's JSON body (empty: ``{}``), refused with MessageError unless it is one JSON object."""
    try:
        msg = json.loads(body or b"{}")
    except ValueError:
        raise MessageError("expected a JSON object") from None
    if not isinstance(msg, dict):
        raise MessageError("expected a JSON object")
    return msg


class RejectedAttemptError(MessageError):
    """A deciding step's message that only a cheating client sends (e.g. a forged §VII output label): refused
    like any bad message (HTTP 400) and counted as a rejected attempt by the failure counter (limits.Lockout)."""


class SessionError(PrivfaceError):
    """Missing, unknown or expired session, or a step out of order (HTTP 409)."""


class SessionLimitError(SessionError):
    """Too many open sessions (HTTP 503): the server is busy, try again later."""


class ScopeError(PrivfaceError):
    """The key is valid but lacks the scope the step needs, or the step declares none; or the step refuses this
    caller the way it was asked (e.g. a revocation without proof where nobody is an admin) (HTTP 403)."""


class LimitError(PrivfaceError):
    """Too many requests from one client, or too many rejected attempts for one subject (HTTP 429)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))  # whole seconds, as Retry-After wants


class AlreadyEnrolledError(PrivfaceError):
    """A registration names a subject that is already enrolled (HTTP 409): registration creates only;
    replacing a subject takes a caller allowed to (``Caller.may_replace``) or a revocation first."""


@dataclass(frozen=True)
class Caller:
    """Who calls a step: ``id`` is ``key:<key id>``, or ``addr:<client address>`` when the service runs
    without API keys (the identity the rate limit and the session quota count); ``scopes`` are the key's,
    None without API keys (then every step is open to everyone; nobody is an admin, so e.g. an im2020 revocation
    needs the key's proof)."""

    id: str
    scopes: frozenset[str] | None = None

    @property
    def may_replace(self) -> bool:
        """Whether a registration by this caller may replace an enrolled subject: an ``admin`` key, or any
        caller of a service without API keys (who could revoke, then register, anyway)."""
        return self.scopes is None or "admin" in self.scopes


@dataclass
class StepResult:
    """What a step returns: the response message bytes, and the state to keep for the next step
    (None ends the flow and drops the session). For the audit trail and the failure counter: the
    ``subject`` ID the step was about, when it names one, and on the step that decides a verification
    attempt whether it was ``accepted``. ``decision``: what the audit records instead of ``allowed`` for a
    step that ends a flow without deciding one (e.g. gsm Π1's ``pi1-claimed-match``: the client's own bit)."""

    body: bytes
    state: Any = None
    subject: str | None = None
    accepted: bool | None = None
    decision: str | None = None
    stream: Iterator[bytes] | None = None
    """Instead of ``body``: the response's bytes piece by piece, each produced as the previous one is sent (so a
    response may be larger than memory should hold at once); closed early if the client goes away or stalls."""


class ProtocolService(Protocol):
    """A protocol's server side as the HTTP service sees it."""

    name: str  # URL segment, e.g. "im2020"
    steps: tuple[str, ...]  # allowed steps, e.g. ("enrol", "auth/start", "auth/finish", "revoke")
    first_steps: tuple[str, ...]  # steps that need no session

    def handle(self, step: str, body: bytes, state: Any | None) -> StepResult:
        """Run one step on a validated-size body; raise MessageError / NotEnrolledError /
        SessionError (or another PrivfaceError → 400) on bad input, changing no state."""
        ...

    # Optional: `step_aliases = {"old name": "step"}`: old step names still answered (the app maps them first).
    # Optional: `takes_caller = True` and `handle(step, body, state, caller=...)` get who calls (a `Caller`),
    # e.g. for a per-caller share of a protocol's own sessions (cryptomask) or create-only registration.

    # Optional, for the failure counter (limits.Lockout) of verification flows:
    # def attempt(self, step: str, body: bytes, state: Any | None) -> tuple[str, bool] | None:
    #     """(subject ID, whether this step decides) when `step` belongs to a verification attempt, else
    #     None; cheap (decodes at most the subject ID); MessageError on a bad body. The deciding step's
    #     StepResult carries `accepted`. An identification (1:N) names no subject: (None, decides) counts
    #     its failures against the caller (limits.caller_counter)."""
