"""gsm as ``privface.service.base.ProtocolService``s: one role per server (seed 004 §3: the service provider
and the terminal are separate parties). Each step decodes one wire message, validates it and runs the
party; bad input raises MessageError / SessionError and changes no state (a session is used once).

Provider (``role="provider"``), Π_en of §6/§8:
    ``key``           ProviderKey request (empty ed25519) → ProviderKey (the Ed25519 verification key)
    ``enrol/start``   EnrolRequest (epk, ⟦u_i⟧, Π_epk, Fig. 9) → zk.NormChallenge + session
    ``enrol/finish``  zk.NormResponse → signed Template m1 (also kept in the store under ``gsm``/subject)
Terminal (``role="terminal"``), Π1/Π2/Π3 of §5–§7, the capture w from the ``capture`` callable:
    ``match/present`` MatchStart(variant, m1) → Presented: m1 sent ahead of the capture (§5: it is reusable)
    ``match/start``   MatchStart(variant, m1) → Challenge + session
    ``match/compare`` Π3 only: CompareRequest → CompareChallenge + session
    ``match/finish``  Reply (Π2) · CompareFinish (Π3) → Decision (``aborted`` = ⊥); Decision (Π1) → Claim

Registration is create-only: enrolling a subject the store already holds is AlreadyEnrolledError (HTTP 409)
unless the caller may replace (``Caller.may_replace``: an ``admin`` key). The terminal checks the provider's
σ on m1 for every variant before anything is kept or counted. Π1 trusts the device (§5, Thm. 1: its decision
is the device's own bit), so a terminal serves it only when the operator allows it by name (``allow_pi1``),
and then answers a Claim, audits ``pi1-claimed-…`` and leaves the failure counter alone.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ...errors import CryptoError, ProtocolError
from ...faces.registry import DEFAULT_BACKEND
from ...protocols.gsm import zk
from ...protocols.gsm.keyfile import load_pem, provider_key_bytes, provider_key_from_bytes, provider_signing_key
from ...protocols.gsm.messages import (
    VARIANT_IDS,
    Claim,
    CompareFinish,
    CompareRequest,
    Decision,
    EnrolRequest,
    LegacyTemplate,
    MatchStart,
    Presented,
    ProviderKey,
    Reply,
    Template,
    read_template,
)
from ...protocols.gsm.params import GsmParams
from ...protocols.gsm.parties import PROTOCOL, Enrolled, EnrolSession, ServiceProvider, Terminal, TerminalSession
from ...store.base import TemplateStore
from ...wire import WireError
from ..base import AlreadyEnrolledError, Caller, MessageError, SessionError, StepResult

SCOPES = {"key": ("enrol", "verify", "internal"),  # the public verification key: devices and terminals
          "enrol/start": "enrol", "enrol/finish": "enrol",
          "match/present": "verify", "match/start": "verify", "match/compare": "verify", "match/finish": "verify"}
"""The API-key scope each step needs (service/auth.py); a terminal does not call the provider."""
VARIANT_NAMES = {v: k for k, v in VARIANT_IDS.items()}
log = logging.getLogger("privface.gsm")


def _signing_key(store: TemplateStore, key, path) -> Ed25519PrivateKey:
    """The provider's signing key: given (key object or PEM bytes), else from the key file ``path``
    (keyfile.py: created 0600, a legacy clear copy in the store migrated into it), else one for this process."""
    if isinstance(key, Ed25519PrivateKey):
        return key
    if key is not None:
        return load_pem(key.encode() if isinstance(key, str) else bytes(key), "signing_key")
    return provider_signing_key(store, path)


def body_limits(params: GsmParams, role: str) -> dict[str, int]:
    """Request caps per step, at least twice the largest valid message: a Paillier ciphertext is < N² (2·|N|
    bits); Π_en sends ℓ of them with a Fig. 9 proof of about the same size, m1 at most ℓ (packing only
    shrinks it)."""
    c = 2 * params.paillier_bits // 8 + 16
    if role == "provider":
        return {"key": 1024, "enrol/start": 4 * params.ell * c + 65536, "enrol/finish": 16 * c + 4096}
    return {"match/present": params.ell * c + 16384, "match/start": params.ell * c + 16384, "match/compare": 65536,
            "match/finish": 16 * c + 4096}


class FirstMessageCache:
    """The terminal's validated first messages (§5: m1 is reusable), least recently used first out.

    A first sighting of m1 (``match/present`` or ``match/start``) validates it (``Terminal.receive``: σ and
    expiry, key, packing) and keeps the ``Enrolled``; a background thread then draws ``pool_ahead`` r^N under
    the device's key and builds the reuse tables (``receive(reuse=True)``), so the next session skips both —
    what the in-process benchmark measures. After each session the pool is topped up again. Keyed by the
    exact bytes of (variant, m1), so a hit has already passed every check but expiry, which is re-checked on
    each use. Bounded: ``size`` entries (≈ 3 MB each at ℓ = 256, |N| = 3072), and at most ``max_pending``
    m1 waiting for background work (one item per m1). Beyond that the oldest waiting item is dropped, not the
    request refused: the precomputation is a speed-up nobody waits for (a dropped m1 stays valid, its sessions
    compute inline), and the newest presentation is the one about to reach the camera."""

    def __init__(self, terminal: Terminal, *, size: int = 32, pool_ahead: int = 2, max_pending: int = 4) -> None:
        if size < 1 or max_pending < 1:
            raise ValueError("the first-message cache needs size ≥ 1 and max_pending ≥ 1")
        self.terminal, self.size, self.pool_ahead, self.max_pending = terminal, size, pool_ahead, max_pending
        self.dropped = 0  # background items dropped at the bound
        self._entries: OrderedDict[bytes, tuple[Enrolled, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: OrderedDict[bytes, Callable[[], None]] = OrderedDict()
        self._work = threading.Condition()
        self._busy = False
        self._worker: threading.Thread | None = None

    def get(self, variant: str, m1_bytes: bytes) -> tuple[Enrolled, int]:
        """(Enrolled, expires_at) for this m1, validated now or on an earlier sighting; ProtocolError if bad."""
        key = hashlib.sha256(variant.encode() + b"\0" + m1_bytes).digest()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
        if hit is not None:
            enrolled, expires_at = hit
            if self.terminal.provider_key is not None and expires_at <= self.terminal.clock():
                with self._lock:
                    self._entries.pop(key, None)
                raise ProtocolError("the first message has expired; the device must enrol again")
            self._schedule(key, lambda: self._top_up(enrolled))
            return enrolled, expires_at
        m1 = read_template(m1_bytes)
        enrolled = self.terminal.receive(m1, variant)
        with self._lock:
            self._entries[key] = (enrolled, m1.expires_at)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        self._schedule(key, lambda: self._prepare(key, m1, variant, enrolled))
        return enrolled, m1.expires_at

    def _schedule(self, key: bytes, work: Callable[[], None]) -> None:
        """Queue ``work`` for the m1 ``key`` unless an item for it already waits; drop the oldest beyond the bound."""
        with self._work:
            if key in self._pending:
                self._pending.move_to_end(key)
            else:
                self._pending[key] = work
            while len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)
                self.dropped += 1
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="gsm-terminal-precompute", daemon=True)
                self._worker.start()
            self._work.notify_all()

    def _run(self) -> None:
        while True:
            with self._work:
                while not self._pending:
                    self._busy = False
                    self._work.notify_all()
                    self._work.wait()
                _, work = self._pending.popitem(last=False)
                self._busy = True
            try:
                work()
            except Exception as e:  # a failed precomputation only loses the speed-up
                log.warning("gsm terminal: background precomputation failed (%s)", type(e).__name__)

    def _top_up(self, enrolled: Enrolled) -> None:
        enrolled.pool.fill(max(0, self.pool_ahead - len(enrolled.pool)))

    def _prepare(self, key: bytes, m1: Template | LegacyTemplate, variant: str, enrolled: Enrolled) -> None:
        self._top_up(enrolled)
        tuned = replace(self.terminal.receive(m1, variant, reuse=True), pool=enrolled.pool)
        with self._lock:
            if key in self._entries:
                self._entries[key] = (tuned, m1.expires_at)

    @property
    def pending(self) -> int:
        """First messages waiting for background work (at most ``max_pending``)."""
        with self._work:
            return len(self._pending)

    def wait(self) -> None:
        """Block until the background work queued so far is done (tests, benchmarks)."""
        with self._work:
            while self._pending or self._busy:
                self._work.wait()

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class MatchState:
    """A terminal's HTTP session: the variant's session and, for Π3 after match/compare, nothing more;
    the subject of the presented m1 (for the failure counter)."""

    session: TerminalSession
    subject: str = ""


class GsmService:
    """Options: ``role`` ("provider" or "terminal"), ``params`` (GsmParams) or ``insecure_test_params``;
    provider: ``signing_key_path`` (the Ed25519 key file, keyfile.py: created 0600, a legacy clear copy in the
    store moved into it; None: a key for this process only) or ``signing_key`` (Ed25519 key or PKCS#8 PEM);
    terminal: ``provider_key`` (32 raw bytes or Ed25519PublicKey; without it every match is refused),
    ``capture`` (a callable returning the measurement w as an ℓ-vector of norm ζ, called once per
    match/start), ``allow_pi1`` (serve Π1, whose decision is the device's own claim; default off),
    ``m1_cache`` (first messages kept with their precomputation, ``FirstMessageCache``; 0 turns the cache off)
    and ``m1_pending`` (its bound on m1 waiting for background precomputation), ``kiosk`` (a ``gsm_kiosk.Kiosk``:
    the kiosk page's camera is the capture, and each match's outcome or refusal is shown there)."""

    name = PROTOCOL
    scopes = SCOPES
    takes_caller = True  # create-only registration: replacing an enrolled subject takes Caller.may_replace

    def __init__(self, store: TemplateStore, *, role: str = "provider", params: GsmParams | None = None,
                 insecure_test_params: bool = False, signing_key=None, signing_key_path=None, provider_key=None,
                 capture: Callable[[], Any] | None = None, workers: int | None = 1, m1_cache: int = 32,
                 m1_pending: int = 4, allow_pi1: bool = False, backend: str = DEFAULT_BACKEND,
                 kiosk=None) -> None:
        self.backend = backend  # the face backend of the templates (issue 36): /app/params.json names it
        if params is None:
            params = GsmParams.toy(backend=backend) if insecure_test_params else GsmParams(backend=backend)
        elif params.backend != backend:
            raise ValueError(f"gsm parameters for face backend {params.backend}, server backend {backend}")
        self.store, self.role, self.params = store, role, params
        if role == "provider":
            key = _signing_key(store, signing_key, signing_key_path)
            self.provider = ServiceProvider(params, signing_key=key, workers=workers)
            self.steps = ("key", "enrol/start", "enrol/finish")
            self.first_steps = ("key", "enrol/start")
        elif role == "terminal":
            if isinstance(provider_key, bytes):
                provider_key = provider_key_from_bytes(provider_key)
            self.kiosk = kiosk
            if capture is None and kiosk is not None:
                capture = kiosk.capture
            if capture is None:
                raise ValueError("a gsm terminal needs a capture source (the measurement w)")
            self.terminal, self.capture = Terminal(params, provider_key=provider_key), capture
            self.allow_pi1 = bool(allow_pi1)
            self.m1_cache = (FirstMessageCache(self.terminal, size=m1_cache, max_pending=m1_pending)
                             if m1_cache > 0 else None)
            self.steps = ("match/present", "match/start", "match/compare", "match/finish")
            self.first_steps = ("match/present", "match/start")
        else:
            raise ValueError(f"gsm role must be provider or terminal, got {role!r}")
        self.max_body = body_limits(params, role)

    def attempt(self, step: str, body: bytes, state: Any | None) -> tuple[str, bool] | None:
        """A terminal's Π2/Π3 match is one attempt of the failure counter on m1's subject, decided at
        match/finish (⊥ counts as a rejection). Π1 is none: its bit is the device's claim, so it neither
        resets nor raises the counter."""
        if self.role != "terminal":
            return None
        if step == "match/start":
            try:
                start = MatchStart.from_bytes(body)
                if VARIANT_NAMES.get(start.variant) == "pi1":
                    return None
                return read_template(start.first_message).subject_id, False
            except (WireError, ProtocolError) as e:
                raise MessageError(str(e)) from None
        if isinstance(state, MatchState) and state.session.variant != "pi1":
            return state.subject, step == "match/finish"
        return None

    def handle(self, step: str, body: bytes, state: Any | None, *, caller: Caller | None = None) -> StepResult:
        if step not in self.steps:
            raise MessageError(f"gsm {self.role} has no step {step!r}")
        if step in self.first_steps and state is not None:
            raise SessionError(f"{step} starts a new flow and takes no session")
        try:
            if self.role == "provider":
                return self._provider(step, body, state, caller)
            result = self._terminal(step, body, state)
        except (WireError, ProtocolError, CryptoError) as e:
            if self.role == "terminal" and step != "match/present":
                self._show(state.subject if isinstance(state, MatchState) else None, "refused", str(e))
            raise MessageError(str(e)) from None
        if step == "match/finish" and result.decision is None:
            self._show(result.subject, "accept" if result.accepted else "reject")
        return result

    def _show(self, subject: str | None, state: str, message: str = "") -> None:
        """The outcome on the kiosk page, if any (never a score or template)."""
        kiosk = getattr(self, "kiosk", None)
        if kiosk is not None:
            kiosk.record(subject, state, message)

    def refused(self, subject: str | None, reason: str) -> None:
        """Called by the app when a step is refused before it reaches us (the subject is locked out)."""
        self._show(subject, "locked", reason)

    @staticmethod
    def _may_replace(caller: Caller | None) -> bool:
        """Over HTTP the app always names the caller; None is an in-process call by the operator's own code."""
        return caller is None or caller.may_replace

    def _check_new(self, subject_id: str, caller: Caller | None) -> None:
        if not self._may_replace(caller) and self.store.get(PROTOCOL, subject_id) is not None:
            raise AlreadyEnrolledError(f"{subject_id!r} is already enrolled; replacing it needs an admin key")

    def _provider(self, step: str, body: bytes, state, caller: Caller | None) -> StepResult:
        sp = self.provider
        if step == "key":
            ProviderKey.from_bytes(body)
            return StepResult(ProviderKey(provider_key_bytes(sp.public_key)).to_bytes())
        if step == "enrol/start":
            request = EnrolRequest.from_bytes(body)
            self._check_new(request.subject_id, caller)  # before the proofs: a refusal costs nothing
            challenge, session = sp.enrol_start(request)
            return StepResult(challenge.to_bytes(), session, subject=request.subject_id)
        if not isinstance(state, EnrolSession):
            raise SessionError("enrol/finish needs the session of an enrol/start")
        m1 = sp.enrol_finish(state, zk.NormResponse.from_bytes(body))
        data = m1.to_bytes()
        if self._may_replace(caller):
            self.store.put(PROTOCOL, m1.subject_id, data)
        elif not self.store.swap(PROTOCOL, m1.subject_id, None, data):  # insert-only, atomic: one enrolment wins
            raise AlreadyEnrolledError(f"{m1.subject_id!r} was enrolled meanwhile; replacing it needs an admin key")
        return StepResult(data, subject=m1.subject_id)

    def _terminal(self, step: str, body: bytes, state) -> StepResult:
        term = self.terminal
        if step in ("match/present", "match/start"):
            start = MatchStart.from_bytes(body)
            variant = VARIANT_NAMES.get(start.variant)
            if variant is None:
                raise ProtocolError(f"unknown gsm variant id {start.variant}")
            if variant == "pi1" and not self.allow_pi1:
                raise ProtocolError("Π1 (a semi-honest device decides) is off on this terminal: use pi2 or pi3 "
                                    "(an operator may allow it with --allow-variant pi1)")
            if term.provider_key is None:
                raise ProtocolError("this terminal has no provider verification key (--provider-key)")
            if self.m1_cache is not None:
                enrolled, expires_at = self.m1_cache.get(variant, start.first_message)
            else:
                m1 = read_template(start.first_message)
                enrolled, expires_at = term.receive(m1, variant), m1.expires_at
            if step == "match/present":
                return StepResult(Presented(enrolled.subject_id, expires_at).to_bytes(), subject=enrolled.subject_id)
            challenge, session = term.challenge(enrolled, self.capture(), variant)
            return StepResult(challenge.to_bytes(), MatchState(session, enrolled.subject_id),
                              subject=enrolled.subject_id)
        if not isinstance(state, MatchState):
            raise SessionError(f"{step} needs the session of a match/start")
        session = state.session
        if step == "match/compare":
            if session.variant != "pi3":
                raise SessionError("match/compare belongs to Π3 only")
            reply = term.pi3_compare(session, CompareRequest.from_bytes(body))
            return StepResult(reply.to_bytes(), state, subject=state.subject)
        if session.variant == "pi1":  # the device's bit: no decision of ours, not counted (attempt), audited as a claim
            claim = term.pi1_finish(session, Decision.from_bytes(body))
            return StepResult(Claim(claim).to_bytes(), subject=state.subject,
                              decision="pi1-claimed-match" if claim else "pi1-claimed-no-match")
        if session.variant == "pi2":
            decision = term.pi2_finish(session, Reply.from_bytes(body))
        else:
            decision = term.pi3_finish(session, CompareFinish.from_bytes(body))
        return StepResult(decision.to_bytes(), subject=state.subject,
                          accepted=bool(decision.match) and not decision.aborted)
