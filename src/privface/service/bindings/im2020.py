"""im2020 as a ``privface.service.base.ProtocolService``: each step decodes one wire message, validates it
and runs the ``Server`` party. Bad input raises MessageError / NotEnrolledError / SessionError and
changes no state."""
from __future__ import annotations

from typing import Any

from ...errors import BackendMismatchError, CryptoError, ProtocolError, UnknownSubjectError
from ...protocols.im2020.messages import (
    AuthFinish,
    AuthStart,
    CompareFinish,
    CompareRequest,
    RevokeProof,
    RevokeRequest,
    RevokeStart,
)
from ...protocols.im2020.params import Im2020Params
from ...protocols.im2020.parties import (
    AuthSession,
    CompareSession,
    ForgedLabelError,
    RevokeSession,
    Server,
    SubjectExistsError,
    enrolment_from_bytes,
)
from ...store.base import TemplateStore
from ...wire import WireError
from ..base import (
    AlreadyEnrolledError,
    Caller,
    MessageError,
    NotEnrolledError,
    RejectedAttemptError,
    ScopeError,
    SessionError,
    StepResult,
)


def body_limits(params: Im2020Params) -> dict[str, int]:
    """Request caps per step, about twice the largest valid message: a level-1 ciphertext is a_i < 2^k and
    β_i < N per dimension (enrol: plus pk and σ); the §VII OT request is 256 bytes per circuit bit."""
    per_dim = 2 * (params.jl.bits // 8 + 16)
    ciphertexts = params.dims * per_dim + 4 * (params.jl.bits // 8) + 4096
    return {"enrol": ciphertexts, "auth/start": ciphertexts, "auth/compare": params.circuit_bits * 512 + 4096,
            "auth/finish": 4096, "revoke": 1024, "revoke/start": 1024, "revoke/finish": 1024}


class Im2020Service:
    """Options: ``params`` (Im2020Params) or any of its fields (``tau``, ``dims``, ``insecure_test_params``,
    ``security_bits``, ``mode``, ``compare_bits``), and ``tp_public_key`` (an ECDSA P-256 public key or its PEM bytes):
    then ``enrol`` takes only a SignedEnrolRequest, unexpired and with a serial above the subject's last."""

    name = "im2020"
    steps = ("enrol", "auth/start", "auth/finish", "revoke/start", "revoke/finish", "revoke")  # basic; see __init__
    first_steps = ("enrol", "auth/start", "revoke/start", "revoke")
    step_aliases = {"register": "enrol"}  # the step's name before 0.2 (the paper's "registration")
    scopes = {"enrol": "enrol", "auth/start": "verify", "auth/compare": "verify", "auth/finish": "verify",
              "revoke/start": ("enrol", "admin"), "revoke/finish": ("enrol", "admin"),
              "revoke": "admin"}  # the API-key scope each step needs (service/auth.py)
    """Revocation: a key that may enrol revokes an ID by proving possession of its secret key (revoke/start →
    challenge, revoke/finish → proof; ``Server.revoke_start``); ``revoke`` (no proof) takes an ``admin`` key and
    is refused on a service without API keys, where nobody is an admin."""
    next_steps = {"auth/start": ("auth/compare", "auth/finish"), "auth/compare": ("auth/finish",),
                  "revoke/start": ("revoke/finish",)}
    """The steps that continue each step's session (OpenAPI links, service/openapi.py); auth/compare only in
    secure-comparison mode."""
    takes_caller = True  # enrol replaces an enrolled ID only for a caller that may (``Caller.may_replace``)

    def __init__(self, store: TemplateStore, **options) -> None:
        tp = options.pop("tp_public_key", None)
        if isinstance(tp, (bytes, str)):
            from cryptography.hazmat.primitives.serialization import load_pem_public_key

            tp = load_pem_public_key(tp.encode() if isinstance(tp, str) else tp)
        params = options.pop("params", None)
        if params is None:
            level = options.pop("security_bits", 112)
            params = Im2020Params.for_level(level, **options)
        elif options:
            raise TypeError(f"give either params or its fields, not both: {sorted(options)}")
        self.server = Server(store, params, tp_public_key=tp)
        if params.mode == "secure-comparison":
            self.steps = ("enrol", "auth/start", "auth/compare", "auth/finish", "revoke/start", "revoke/finish",
                          "revoke")
        self.max_body = body_limits(params)

    def attempt(self, step: str, body: bytes, state: Any | None) -> tuple[str, bool] | None:
        """An authentication (§IV-B.3) is one attempt of the failure counter, decided at auth/finish."""
        if step == "auth/start":
            try:
                return AuthStart.from_bytes(body).subject_id, False
            except WireError as e:
                raise MessageError(str(e)) from None
        if step in ("auth/compare", "auth/finish") and isinstance(state, (AuthSession, CompareSession)):
            return state.subject_id, step == "auth/finish"
        return None

    def handle(self, step: str, body: bytes, state: Any | None, caller: Caller | None = None) -> StepResult:
        """``caller`` None (in-process use) may replace an enrolled ID and revoke without a proof, as an admin.
        A refused revocation proof changes nothing and is not counted by the lockout: it is a guess of a fresh
        k-bit ρ (one per challenge), and counting it would let any enrol key lock out a subject's verifications."""
        if step not in self.steps:
            raise MessageError(f"im2020 has no step {step!r}")
        if step in self.first_steps and state is not None:
            raise SessionError(f"{step} starts a new flow and takes no session")
        try:
            if step == "enrol":
                done = self.server.enrol(enrolment_from_bytes(body), replace=caller is None or caller.may_replace)
                return StepResult(done.to_bytes(), subject=done.subject_id)
            if step == "revoke":
                if caller is not None and caller.scopes is None:
                    raise ScopeError("this server runs without API keys, so nobody is an admin: a revocation must "
                                     "prove possession of the ID's key (revoke/start, then revoke/finish)")
                gone = self.server.revoke(RevokeRequest.from_bytes(body))
                return StepResult(gone.to_bytes(), subject=gone.subject_id)
            if step == "revoke/start":
                challenge, rs = self.server.revoke_start(RevokeStart.from_bytes(body))
                return StepResult(challenge.to_bytes(), rs, subject=rs.subject_id)
            if step == "revoke/finish":
                if not isinstance(state, RevokeSession):
                    raise SessionError("revoke/finish needs the session of a revoke/start")
                gone = self.server.revoke_finish(state, RevokeProof.from_bytes(body))
                return StepResult(gone.to_bytes(), subject=gone.subject_id)
            if step == "auth/start":
                challenge, session = self.server.auth_start(AuthStart.from_bytes(body))
                return StepResult(challenge.to_bytes(), session, subject=session.subject_id)
            secure = self.server.params.mode == "secure-comparison"
            if step == "auth/compare":
                if not isinstance(state, AuthSession):
                    raise SessionError("auth/compare needs the session of an auth/start")
                challenge, session = self.server.auth_compare(state, CompareRequest.from_bytes(body))
                return StepResult(challenge.to_bytes(), session, subject=session.subject_id)
            if secure:
                if not isinstance(state, CompareSession):
                    raise SessionError("auth/finish needs the session of an auth/compare (secure-comparison mode)")
                result = self.server.compare_finish(state, CompareFinish.from_bytes(body))
            else:
                if not isinstance(state, AuthSession):
                    raise SessionError("auth/finish needs the session of an auth/start")
                result, _ = self.server.auth_finish(state, AuthFinish.from_bytes(body))
            return StepResult(result.to_bytes(), subject=state.subject_id, accepted=result.accepted)
        except UnknownSubjectError as e:
            raise NotEnrolledError(str(e)) from None
        except SubjectExistsError as e:
            raise AlreadyEnrolledError(str(e)) from None
        except ForgedLabelError as e:  # a guess that decided nothing: the failure counter counts it (app.guarded)
            raise RejectedAttemptError(str(e)) from None
        except BackendMismatchError:  # 409 naming both backends (app.status_of)
            raise
        except (WireError, ProtocolError, CryptoError) as e:
            raise MessageError(str(e)) from None
