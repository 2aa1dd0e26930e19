"""Seed 001's Cloud Server as a ``privface.service.base.ProtocolService`` (protocol ``cryptomask``, role ``cs``) over a
persisted gallery (``privface gallery enrol --scheme cryptomask``): it holds pk, k_sw and the gallery, never sk
or sk_v. The verifier (``remote.VerifierClient``, ``privface identify --protocol cryptomask --server``) is its
client. Steps (scope ``verify``), each one wire message in and one out, all without an HTTP session: the
identification's own session id travels in the messages (``server``), so a bad message (400) leaves it usable.
A new identification beyond the caller's share (``server.MAX_PER_CALLER``) gets 429 with Retry-After, beyond the
CS's (``server.MAX_SESSIONS``) 503, as the service answers too many requests from one client / too many sessions.

    ``gallery``               GalleryRequest → GalleryInfo  (pk and layout)
    ``identify/start``        Query → Started               (Alg. 2: distances computed, d_0 kept; base-OT request)
    ``identify/distances``    DistanceRequest → DistanceChunk   (chunks 0, 1, … in order)
    ``identify/ot``           OTSetup → OTReady
    ``identify/reveal``       RevealRound → RevealRound     (Alg. 3, rounds 0, 1, …; the last carries μ_0)
"""
from __future__ import annotations

from typing import Any

from ...errors import CryptoError, ProtocolError, TemplateError
from ...protocols.cryptomask.server import PROTOCOL, CloudServerRole, TooManySessions
from ...store.base import TemplateStore
from ...wire import MAX_MESSAGE_BYTES, WireError
from ..base import Caller, LimitError, MessageError, SessionError, SessionLimitError, StepResult

STEPS = {"gallery": "gallery", "identify/start": "start", "identify/distances": "distances", "identify/ot": "ot",
         "identify/reveal": "reveal"}
SCOPES = {step: "verify" for step in STEPS}
"""The API-key scope each step needs (service/auth.py): a verifier identifies with ``verify``."""


class CryptoMaskService:
    """Options: ``role`` ("cs"), ``gallery_url`` (the gallery store, required), ``gallery_name``; for tests
    ``chunk`` (ciphertexts per DistanceChunk) and ``batch`` (Alg. 3 entries per batch, a multiple of 64)."""

    name = PROTOCOL
    scopes = SCOPES
    takes_caller = True  # ``handle`` gets the caller: its share of identifications, and only its own sessions

    def __init__(self, store: TemplateStore, *, role: str = "cs", gallery_url: str | None = None,
                 gallery_name: str = "default", chunk: int | None = None, batch: int | None = None) -> None:
        if role != "cs":
            raise ValueError(f"cryptomask serves role cs (the verifier is a client), got {role!r}")
        if not gallery_url:
            raise ValueError("a cryptomask CS needs the gallery store (--gallery)")
        from ...scale.cryptomask_gallery import CMGallery

        gallery = CMGallery(gallery_url, gallery_name)  # GalleryError (exit 2) if damaged
        options = {} if batch is None else {"batch": batch}
        self.role, self.store = role, store
        self.party = CloudServerRole(gallery.cloud_server(), gallery.pk_bytes,
                                     insecure_test_params=gallery.meta["insecure_test_params"], chunk=chunk, **options)
        self.steps = self.first_steps = tuple(STEPS)
        self.max_body = {"gallery": 1024, "identify/start": self.party.query_bytes + 1024,
                         "identify/distances": 1024, "identify/ot": 16384, "identify/reveal": MAX_MESSAGE_BYTES}

    def handle(self, step: str, body: bytes, state: Any | None, caller: Caller | None = None) -> StepResult:
        if step not in STEPS:
            raise MessageError(f"cryptomask cs has no step {step!r}")
        if state is not None:
            raise SessionError("cryptomask steps carry their session in the message, not in an HTTP session")
        run = getattr(self.party, STEPS[step])
        try:
            reply = run(body) if step == "gallery" else run(body, caller and caller.id)
        except TooManySessions as e:
            raise LimitError(str(e), e.retry_after) if e.per_caller else SessionLimitError(str(e)) from None
        except (WireError, ProtocolError, CryptoError, TemplateError) as e:
            raise MessageError(str(e)) from None
        return StepResult(reply.to_bytes())
