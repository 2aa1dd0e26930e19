"""kolberg as ``privface.service.base.ProtocolService``s: one role per server (seed 002 §2.2: the DB server and
the authentication server are separate parties that must not collude). Each step decodes one wire message,
validates it and runs the party; bad input raises MessageError / NotEnrolledError and changes no state.

DB server (``role="db"``, talks to the auth server at ``auth_url`` over HTTP, holds no secret key):
    ``public-key``  KeyRequest → PublicKey (the auth server's current key)
    ``enrol``       EnrolRequest → EnrolResponse        ``revoke``   RevokeRequest → RevokeResponse
    ``verify/challenge`` ChallengeRequest → Challenge (opens the verification's session: a fresh nonce)
    ``verify``      VerifyRequest → Result (in that session, naming its nonce: each challenge answers once)
    ``identify``    IdentifyRequest → Result
    ``enrol`` creates only: an enrolled subject gets 409 (AlreadyEnrolledError) unless the caller may replace
    subjects (``Caller.may_replace``: an ``admin`` key, or a service without API keys). Failed verifications count
    per subject, failed identifications per caller (the service's failure counter, ``attempt``).
Auth server (``role="auth"``, its key pairs in its own store — never the DB server's):
    ``public-key``  KeyRequest → PublicKey              ``auth/keys`` KeyRequest → AuthKeys
    ``auth/decide`` DistanceBatch → AuthDecision (empty body until the batch marked ``last``)
    ``auth/rotate/begin`` · ``auth/rotate/reencrypt`` · ``auth/rotate/activate`` · ``auth/rotate/retire``
                    (``privface rotate-keys``, ``rotation`` module)
"""
from __future__ import annotations

from typing import Any

from ...errors import BackendMismatchError, CryptoError, ProtocolError, SubjectExistsError, UnknownSubjectError
from ...protocols.kolberg.messages import Challenge, ChallengeRequest, KeyRequest, Result, VerifyRequest
from ...protocols.kolberg.params import KolbergParams
from ...protocols.kolberg.parties import PROTOCOL, AuthServer, DBServer
from ...store.base import TemplateStore
from ...wire import WireError
from ..base import AlreadyEnrolledError, Caller, MessageError, NotEnrolledError, SessionError, StepResult

_KB, _MB = 1024, 1024 * 1024
DB_LIMITS = {"public-key": _KB, "enrol": 2 * _MB, "verify/challenge": _KB, "verify": 2 * _MB, "identify": 2 * _MB,
             "revoke": _KB}
AUTH_LIMITS = {"public-key": _KB, "auth/keys": _KB, "auth/decide": 4 * _MB, "auth/rotate/begin": _KB,
               "auth/rotate/reencrypt": 4 * _MB, "auth/rotate/activate": _KB, "auth/rotate/retire": _KB}

SCOPES = {"public-key": ("enrol", "verify", "internal", "admin"), "enrol": "enrol", "verify/challenge": "verify",
          "verify": "verify", "identify": "verify", "revoke": "admin",
          # auth server: the DB server calls it with an internal key; rotate-keys with an admin key
          "auth/keys": ("internal", "admin"), "auth/decide": "internal", "auth/rotate/begin": "admin",
          "auth/rotate/reencrypt": "admin", "auth/rotate/activate": "admin", "auth/rotate/retire": "admin"}
"""The API-key scope each step needs (service/auth.py)."""


class KolbergService:
    """Options: ``role`` ("db" or "auth"), ``scheme`` (ckks|bfv|ntru) or ``params``; db: ``auth_url`` (or an
    in-process ``auth`` object with ``keys`` and ``decide``, for tests), ``timeout``, and for the link to the auth
    server ``auth_api_key`` (a key with the ``internal`` scope) and ``auth_tls`` (an ssl.SSLContext); auth:
    ``max_pending``, ``pending_ttl``, ``clock`` (its table of open multi-chunk requests, ``AuthServer``)."""

    name = PROTOCOL
    first_steps: tuple[str, ...]
    scopes = SCOPES
    takes_caller = True  # ``handle`` gets the caller: whether its enrolment may replace an enrolled subject

    def __init__(self, store: TemplateStore, *, role: str = "db", scheme: str = "bfv",
                 params: KolbergParams | None = None, auth_url: str | None = None, auth=None,
                 timeout: float = 120.0, auth_api_key: str | None = None, auth_tls=None, **pending) -> None:
        self.params = params or KolbergParams(scheme)
        self.store, self.role = store, role
        if pending and (role != "auth" or not set(pending) <= {"max_pending", "pending_ttl", "clock"}):
            raise TypeError(f"options {sorted(pending)} are not options of a kolberg {role} server")
        if role == "auth":
            self.party = AuthServer(self.params, store, **pending)
            self.max_body = AUTH_LIMITS
        elif role == "db":
            if auth is None:
                if not auth_url:
                    raise ValueError("a kolberg DB server needs the auth server's URL (--auth-url)")
                from ..clients.kolberg import HttpAuth
                auth = HttpAuth(auth_url, timeout=timeout, api_key=auth_api_key, tls=auth_tls)
            self.auth = auth
            self.party = DBServer(self.params, store, auth.keys(KeyRequest(0)), auth.decide, keys=auth.keys)
            self.max_body = DB_LIMITS
        else:
            raise ValueError(f"kolberg role must be db or auth, got {role!r}")
        self.steps = tuple(self.max_body)
        self.first_steps = tuple(step for step in self.steps if step != "verify")  # verify: the challenge's session

    def handle(self, step: str, body: bytes, state: Any | None, caller: Caller | None = None) -> StepResult:
        """Run ``step``; without a ``caller`` (in process) an enrolment creates only."""
        if step not in self.steps:
            raise MessageError(f"kolberg {self.role} server has no step {step!r}")
        if (step == "verify") != isinstance(state, Challenge):
            raise SessionError("kolberg verify continues the session of verify/challenge; other steps take none")
        try:
            if step == "verify/challenge":
                challenge = self.party.challenge(body)
                return StepResult(challenge.to_bytes(), state=challenge, subject=challenge.subject_id)
            if step == "verify":
                reply = self.party.verify(body, state)
            else:
                reply = self._run(step, body, replace=caller is not None and caller.may_replace)
        except UnknownSubjectError as e:
            raise NotEnrolledError(str(e)) from None
        except SubjectExistsError as e:
            raise AlreadyEnrolledError(str(e)) from None
        except BackendMismatchError:  # 409 naming both backends (app.status_of)
            raise
        except (WireError, ProtocolError, CryptoError) as e:
            raise MessageError(str(e)) from None
        return StepResult(b"" if reply is None else reply.to_bytes(), subject=getattr(reply, "subject_id", None),
                          accepted=reply.accepted if isinstance(reply, Result) else None)

    def attempt(self, step: str, body: bytes, state: Any | None) -> tuple[str | None, bool] | None:
        """A DB server's verification (1:1) is one attempt of the claimed subject's failure counter; an
        identification (1:N) names no subject and is one attempt of the caller's (a probe that matches nobody
        is a failure: online guessing against the whole gallery)."""
        if self.role != "db" or step not in ("verify/challenge", "verify", "identify"):
            return None
        if step == "identify":
            return None, True
        try:
            if step == "verify/challenge":  # refused while the subject is locked out; decides nothing
                return ChallengeRequest.from_bytes(body).subject_id, False
            return VerifyRequest.from_bytes(body).subject_id, True
        except WireError as e:
            raise MessageError(str(e)) from None

    def _run(self, step: str, body: bytes, *, replace: bool):
        p = self.party
        if step == "public-key":
            KeyRequest.from_bytes(body)
            return p.public_key()
        if self.role == "auth":
            return {"auth/keys": p.keys, "auth/decide": p.decide, "auth/rotate/begin": p.rotate_begin,
                    "auth/rotate/reencrypt": p.reencrypt, "auth/rotate/activate": p.activate,
                    "auth/rotate/retire": p.retire}[step](body)
        if step == "enrol":
            return p.enrol(body, replace=replace)
        return {"identify": p.identify, "revoke": p.revoke}[step](body)
