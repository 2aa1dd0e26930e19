"""Seed 001's Cloud Server as a ``privface.service.base.ProtocolService`` (protocol ``cryptomask``, role ``cs``) over a
persisted gallery (``privface gallery enrol --scheme cryptomask``): it holds pk, k_sw and the gallery, never sk
or sk_v. The verifier (``remote.VerifierClient``, ``privface identify --protocol cryptomask --server``) is its
client. Steps (scope ``verify``), one HTTP exchange per logical message of the protocol, so an identification takes
the same number of exchanges at every gallery size (1 + 1 + Alg. 3's 10 rounds, ``gallery`` once per client), all
without an HTTP session: the identification's own session id travels in the messages (``server``), so a bad
message (400) leaves it usable. Large bodies are frame streams (``wire.framed``), written and read frame by frame.
A new identification beyond the caller's share (``server.MAX_PER_CALLER``) gets 429 with Retry-After, beyond the
CS's (``server.MAX_SESSIONS``) 503, as the service answers too many requests from one client / too many sessions.

    ``gallery``           GalleryRequest → GalleryInfo    (pk and layout)
    ``ot/setup``          FerretSetupRequest → FerretSetup   (a new Ferret pool of the caller: id, setup request)
    ``ot/finish``         FerretFinish → FerretPool   (the verifier's setup response; the pool's state)
    ``ot/refill``         FerretRefillRequest → FerretPool   (between identifications: Ferret iterations until the
                          pool holds one identification's COTs; the verifier's state must equal the CS's)
    ``identify/start``    FerretQuery (or Query: SoftSpokenOT) → Started, DistanceChunk 0, 1, …   (Alg. 2; one
                          streamed response: each chunk computed while the previous one is sent; on SoftSpokenOT
                          Started carries the base-OT request)
    ``identify/reveal``   RoundHead, RoundPiece… → RoundHead, RoundPiece…   (Alg. 3 in one batch, rounds 0, 1, …;
                          round 0's head carries the base-OT response; the last answer carries μ_0)

Enrolment (scope ``enrol``, as hers' local server: ``bindings.hers``):

    ``gallery/add``       {"ids": [...], "templates": [[d floats], …]} → the enrolment report (``scale.lifecycle.add``,
                          a new batch appended crash-safe, seed 001 Alg. 1); ids unique and new, 1 to ``MAX_ADD``,
                          templates finite, non-zero, of the gallery's d; adds one at a time (and the store's writer
                          lease). Identifications that start afterwards see the grown gallery, those in flight the
                          one they started on; ``Started`` names the size each runs on, so a verifier whose layout is
                          older takes the new one (``server.CloudServerRole.regallery``). On Ray shards the shards
                          stage the grown ranges first (``scale.resident_cs.ResidentCloudServer.grown``); an add
                          stored but not staged (a shard restarting) answers 200 with ``"served": false`` and the
                          next identification stages it (or answers 503).

Size limits come from the gallery the CS serves: ``identify/start`` exactly one query; ``identify/reveal`` the
largest round this gallery's Alg. 3 has (``server.max_round_bytes``) — and before anything past its head is read,
the head is checked against the caller's session (``stream_heads``/``admit``), which gives the exact size the body
must have, so a caller with a valid key cannot make the CS buffer more than its own next round — one at a time per
identification (a second upload of a round in flight: 409 before its body is read), and only while the CS's memory
budget (``memory``, ``privface serve --memory-budget``) holds it with its answer (else 503). Ferret pools
(``protocols.cryptomask.pools``, within a budget of their own: ``pool_memory``, ``--ot-pool-memory``) are the
caller's own (another caller's is "unknown"); a pool that cannot be used — unknown (a CS restart forgets them all),
evicted, expired, desynchronised, in use — is 409 naming it, a pool or refill beyond the CS's limits 503 with
Retry-After.
"""
from __future__ import annotations

import threading
from typing import Any

from ...errors import CryptoError, PrivfaceError, ProtocolError, TemplateError
from ...protocols.cryptomask.messages import HEAD_LIMIT
from ...protocols.cryptomask.pools import PoolBusy, PoolError, PoolsFull
from ...protocols.cryptomask.server import PROTOCOL, CloudServerRole, RoundBusy, TooManySessions
from ...store.base import TemplateStore
from ...wire import WireError
from ..base import Caller, LimitError, MessageError, SessionError, SessionLimitError, StepResult
from .cryptomask_kg import GALLERY_LIMITS, GALLERY_SCOPES, KeyGeneratorService, gallery_step, templates_source

MAX_ADD = 256  # templates per ``gallery/add`` request (as hers': ``bindings.hers.MAX_ADD``)
ADD_LIMIT = 4 << 20  # bytes of a ``gallery/add`` body (as hers')
STEPS = {"gallery": "gallery", "ot/setup": "ot_setup", "ot/finish": "ot_finish", "ot/refill": "ot_refill",
         "identify/start": "start", "identify/reveal": "reveal"}
SCOPES = {**{step: "verify" for step in STEPS}, **GALLERY_SCOPES, "gallery/add": "enrol"}
"""The API-key scope each step needs (service/auth.py): a verifier identifies with ``verify``; the gallery's admin
steps (``bindings.cryptomask_kg.gallery_step``) need ``admin``, ``gallery/add`` ``enrol``."""


class CryptoMaskService:
    """Options: ``role`` ("cs"), ``gallery_url`` (the gallery store, required), ``gallery_name``; for tests
    ``chunk`` (ciphertexts per DistanceChunk) and ``batch`` (Alg. 3 entries per batch, a multiple of 64; default:
    one batch over the whole gallery); ``memory``: the CS's memory budget in bytes (``server.SESSION_MEMORY``);
    ``ray`` (a Ray cluster address, or "auto") and ``shards``: the gallery resident in K Ray actors
    (``scale.resident_cs``; a shard lost mid-identification: retried once, else 503 with Retry-After); ``kg_url``
    (the key generator, ``privface serve --protocol cryptomask --role kg``), ``kg_api_key`` (scope ``internal``),
    ``kg_tls``, or an in-process ``kg`` (tests): the gallery's admin steps (``bindings.cryptomask_kg``)."""

    name = PROTOCOL
    scopes = SCOPES
    takes_caller = True  # ``handle`` gets the caller: its share of identifications, and only its own sessions

    def __init__(self, store: TemplateStore, *, role: str = "cs", gallery_url: str | None = None,
                 gallery_name: str = "default", chunk: int | None = None, batch: int | None = None,
                 memory: int | None = None, pool_memory: int | None = None, ray: str | None = None,
                 shards: int | None = None,
                 kg_url: str | None = None, kg_api_key: str | None = None, kg_tls=None, kg=None,
                 timeout: float = 600.0) -> None:
        if role != "cs":
            raise ValueError(f"cryptomask serves role cs (the verifier is a client), got {role!r}")
        if not gallery_url:
            raise ValueError("a cryptomask CS needs the gallery store (--gallery)")
        from ...scale.cryptomask_gallery import CMGallery

        gallery = CMGallery(gallery_url, gallery_name)  # GalleryError (exit 2) if damaged
        self.role, self.store = role, store
        self.gallery_url, self.gallery_name, self.pk_bytes = gallery_url, gallery_name, gallery.pk_bytes
        self.resident = ray is not None
        self._kg = (lambda: kg) if kg is not None else None
        if kg is None and kg_url:
            from ..clients.cryptomask_kg import HttpKeyGenerator

            self._kg = lambda: HttpKeyGenerator(kg_url, timeout=timeout, api_key=kg_api_key, tls=kg_tls)
        if ray is None:
            cs = gallery.cloud_server()
        else:  # issue 38: the blocks resident in K Ray actors (scale.resident_cs); a lost shard → 503 Retry-After
            from ...scale.resident_cs import ResidentCloudServer

            cs = ResidentCloudServer(gallery, address=ray, shards=shards)
        try:
            self.party = CloudServerRole(cs, gallery.pk_bytes,
                                         insecure_test_params=gallery.meta["insecure_test_params"], chunk=chunk,
                                         batch=batch, memory=memory, pool_memory=pool_memory)
        except ValueError as e:  # a budget below one identification's need
            raise PrivfaceError(f"--memory-budget: {e}") from None
        self._adding = threading.Lock()  # one ``gallery/add`` at a time in this CS (the writer lease across CSs)
        self._grow_pending = False  # an add in the store that identifications do not see yet (``_stage_pending``)
        self.steps = self.first_steps = tuple(STEPS) + tuple(GALLERY_LIMITS) + ("gallery/add",)
        self.max_body = {"gallery": 1024, "ot/setup": 1024, "ot/finish": 4 << 20, "ot/refill": 1024,
                         "identify/start": self.party.query_bytes + 1024, "identify/reveal": self.party.round_limit,
                         **GALLERY_LIMITS, "gallery/add": ADD_LIMIT}
        self.stream_heads = {"identify/reveal": HEAD_LIMIT}
        """Steps whose body is a frame stream checked by ``admit`` once its first frame (at most this many bytes) is
        read (service/app.py)."""

    def admit(self, step: str, head: bytes, caller: Caller | None = None):
        """(the exact body size of a round whose head frame is ``head``, the exchange's ``release``): MessageError if
        the head does not fit the caller's session, SessionError while another round of it is in flight,
        SessionLimitError when the memory budget is full; a refusal reserves nothing."""
        try:
            return self.party.admit_round(head, caller and caller.id)
        except RoundBusy as e:
            raise SessionError(str(e)) from None
        except TooManySessions as e:
            raise SessionLimitError(str(e)) from None
        except (WireError, ProtocolError) as e:
            raise MessageError(str(e)) from None

    def kg_link(self):
        """A link to the key generator (``erase_attach``, ``erase_refresh``); MessageError if none is configured."""
        if self._kg is None:
            raise MessageError("this CS has no key generator to erase with (privface serve … --key-url of the "
                               "cryptomask kg)")
        return self._kg()

    def reload(self) -> None:
        """Serve the gallery as the store holds it now to the identifications that start from here (those in flight
        keep the CS they started with: ``server.CloudServerRole.start``): after an erasure, which keeps the layout,
        or an add, which grows it (an add by another CS or the CLI meanwhile included)."""
        self.grown()

    def add(self, body: bytes) -> dict:
        """``gallery/add`` (module docstring): the body validated before anything is written, the batch appended
        (``scale.lifecycle.add``), then the grown gallery served (``grown``)."""
        from ...scale import lifecycle
        from ...scale.layout import GalleryError
        from ...store.base import StoreError, check_key
        from ..base import json_object

        msg = json_object(body)
        ids = msg.get("ids")
        if (set(msg) != {"ids", "templates"} or not isinstance(ids, list) or not 1 <= len(ids) <= MAX_ADD
                or not all(isinstance(i, str) for i in ids)):
            raise MessageError(f"expected {{\"ids\": [1 to {MAX_ADD} gallery ids], \"templates\": [one per id]}}")
        if len(set(ids)) != len(ids):
            raise MessageError("ids: an id repeats")
        try:
            for i in ids:
                check_key("gallery", i)
        except (StoreError, TemplateError) as e:
            raise MessageError(str(e)) from None
        source = templates_source(ids, msg["templates"], self.party.cs.dim)
        with self._adding:
            # an id the gallery answers is refused here: the enrolment's resume rule (the last batch's ids again →
            # "nothing left to do") would otherwise answer 200 and keep the stored template, not the one sent
            known = set(ids) & set(lifecycle.list_ids(self.gallery_url, self.gallery_name))
            if known:
                raise MessageError(f"already in the gallery: {', '.join(sorted(known)[:10])} (gallery/update "
                                   "replaces a template)")
            try:
                report = lifecycle.add(self.gallery_url, source, self.gallery_name, retune_tau=False)
            except (GalleryError, StoreError, TemplateError) as e:
                raise MessageError(str(e)) from None
            try:
                self.grown()
            except SessionLimitError:  # stored: the caller must not take it for lost (identifications stage it)
                self._grow_pending = True
                report = {**report, "served": False}
        return report

    def _stage_pending(self) -> None:
        """An add stored but not yet served (its staging failed: a shard restarting): serve the grown gallery before
        the next identification starts, else 503 with Retry-After — never an answer without it."""
        if self._grow_pending:
            with self._adding:
                if self._grow_pending:
                    self.grown()
                    self._grow_pending = False

    def grown(self) -> None:
        """Serve the gallery as the store holds it now, grown or not, to the identifications that start from here
        (``server.CloudServerRole.regallery``; those in flight keep theirs)."""
        from ...scale.cryptomask_gallery import CMGallery

        gallery = CMGallery(self.gallery_url, self.gallery_name)
        try:
            self.party.regallery(self.party.cs.grown(gallery) if self.resident else gallery.cloud_server())
        except (ValueError, PrivfaceError) as e:  # the add is in the store: this CS serves it once restarted
            raise SessionLimitError(f"the gallery grew in the store, but this CS still serves it as before: {e}") \
                from None
        self.max_body["identify/reveal"] = self.party.round_limit

    def handle(self, step: str, body: bytes, state: Any | None, caller: Caller | None = None) -> StepResult:
        if step == "gallery/add" and state is None:
            import json

            return StepResult(json.dumps(self.add(body)).encode())
        if step in GALLERY_LIMITS and state is None:
            import json

            return StepResult(json.dumps(gallery_step(self, step, body)).encode())
        if step not in STEPS:
            raise MessageError(f"cryptomask cs has no step {step!r}")
        if state is not None:
            raise SessionError("cryptomask steps carry their session in the message, not in an HTTP session")
        if step == "identify/start":
            self._stage_pending()
        run = getattr(self.party, STEPS[step])
        try:
            reply = run(body) if step == "gallery" else run(body, caller and caller.id)
        except TooManySessions as e:
            raise LimitError(str(e), e.retry_after) if e.per_caller else SessionLimitError(str(e)) from None
        except PoolsFull as e:
            raise SessionLimitError(str(e)) from None
        except (PoolError, PoolBusy) as e:
            raise SessionError(str(e)) from None
        except (WireError, ProtocolError, CryptoError, TemplateError) as e:
            raise MessageError(str(e)) from None
        if step == "gallery" or step.startswith("ot/"):
            return StepResult(reply.to_bytes())
        return StepResult(b"", stream=reply)


def cryptomask_service(store: TemplateStore, *, role: str = "cs", **options):
    """The cryptomask role ``role`` names: the CS (``CryptoMaskService``) or the key generator
    (``bindings.cryptomask_kg.KeyGeneratorService``)."""
    if role == "kg":
        return KeyGeneratorService(store, role=role, **options)
    return CryptoMaskService(store, role=role, **options)
