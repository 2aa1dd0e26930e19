"""Seed 003 §3.2's identification servers as a ``privface.service.base.ProtocolService`` (protocol ``ident``),
one role per server — they must not collude. One protocol serves hers, idface-ckks and idface-paillier galleries:
the scheme is the persisted gallery's (``scale.gallery``); the IP_DB message is CKKS residues (one or two
ciphertexts per block) or Paillier (ct⁺, ct⁻) pairs. Bad input raises MessageError and changes no state.

Key server (``role="key"``, its store = the gallery's key store, holds sk; scores never leave it):
    ``attach``    Attach → Attached          (the local server, once at start; checked against sk's pk digest)
    ``decide``    ScoreChunk → KeyDecision   (empty body until the chunk that completes the request)
    ``reencrypt`` Reencrypt → Reencrypted    (erasure, hers: the masked refresh's key step, ``crypto.ckks_refresh``)
    ``erase/open``      EraseOpen → EraseOpened      (erasure, idface-ckks / -paillier: the digit erasure of
    ``erase/transfer``  EraseChoices → ErasePads      ``protocols.idface.erase`` in three exchanges, S_key's side
    ``erase/close``     EraseOutputs → Erased         ``scale.erase_link.KeyEraser``: ≤ 4 open, each step once)
Local server (``role="local"``, the encrypted gallery; calls the key server over HTTP with an ``internal`` key):
    ``identify``        Query → Result             (the gallery id of the best score ≥ τ, or not accepted)
    ``gallery/info``    {} → the gallery's settings and size (JSON, ``scale.lifecycle.info``)       scope admin
    ``gallery/list``    {} → {"ids": [...]} (JSON)                                                scope admin
    ``gallery/remove``  {"ids": [...]} → the removal report (JSON, ``scale.lifecycle.withdraw``: taken out of
                        the answers, online; erased with the key server: hers by ``reencrypt``,
                        idface by ``erase/*``; ``"erased": true``)                               scope admin
    ``gallery/add``     {"ids": [...], "templates": [[d floats], …]} → the add report (``scale.lifecycle.add``:
                        encrypted here under the public key — S_local sees plaintext templates, as it sees
                        every query in seed 003 §3.2)                                           scope enrol
    ``gallery/update``  the same body → ``scale.lifecycle.update`` (the old templates removed as by remove)  scope admin
"""
from __future__ import annotations

import json
from typing import Any

from ...errors import CryptoError, ProtocolError, TemplateError, UnavailableError
from ...protocols.hers.messages import PROTOCOL
from ...scale.ident import KeyRole, LocalRole
from ...store.base import StoreError, TemplateStore
from ...wire import WireError
from ..base import MessageError, SessionError, StepResult, json_object

_KB, _MB = 1024, 1024 * 1024
KEY_LIMITS = {"attach": 2 * _MB, "decide": 4 * _MB, "reencrypt": 4 * _MB, "erase/open": 4 * _MB + _KB,
              "erase/transfer": 4 * _MB + 300 * _KB, "erase/close": 1 * _MB}
LOCAL_LIMITS = {"identify": 8 * _KB, "gallery/info": 64, "gallery/list": 64, "gallery/remove": 256 * _KB,
                "gallery/add": 4 * _MB, "gallery/update": 4 * _MB}
SCOPES = {"attach": "internal", "decide": "internal", "reencrypt": "internal", "erase/open": "internal",
          "erase/transfer": "internal", "erase/close": "internal", "identify": "verify",
          "gallery/info": "admin",
          "gallery/list": "admin", "gallery/remove": "admin", "gallery/add": "enrol", "gallery/update": "admin"}
MAX_REMOVE = 1000  # ids per ``gallery/remove`` request
MAX_ADD = 256  # templates per ``gallery/add`` / ``gallery/update`` request
"""The API-key scope each step needs (service/auth.py): clients identify with ``verify``; only the local
server (an ``internal`` key) talks to the key server."""


class IdentService:
    """Options: ``role`` ("key" or "local"), ``gallery_name``; key: ``insecure_test_params`` (accept a toy
    public context); local: ``gallery_url`` (the gallery store), ``key_url`` (or an in-process ``key`` with
    ``attach`` and ``decide``, for tests), ``key_api_key`` (scope ``internal``), ``key_tls`` (ssl.SSLContext),
    ``timeout``, ``chunk`` (blocks per ScoreChunk; default: as many as fit 3 MiB), ``ray`` (a Ray cluster address,
    or "auto" for a local Ray) and ``shards`` (K resident gallery shards on it: ``scale.resident``; a shard
    restarting after node loss answers 503 with Retry-After); key: ``key_workers`` (decryption processes of the key
    server's own: ``scale.key_pool``; 1 = in its process)."""

    name = PROTOCOL
    first_steps: tuple[str, ...]
    scopes = SCOPES

    def __init__(self, store: TemplateStore, *, role: str = "local", gallery_name: str = "default",
                 gallery_url: str | None = None, key_url: str | None = None, key=None, key_api_key: str | None = None,
                 key_tls=None, timeout: float = 600.0, chunk: int | None = None,
                 insecure_test_params: bool = False, ray: str | None = None, shards: int | None = None,
                 key_workers: int = 1) -> None:
        self.store, self.role = store, role
        if role == "key":
            if ray is not None:
                raise ValueError("Ray shards serve the local server's gallery; the key server runs alone")
            self.party = KeyRole(store, gallery_name, insecure_test_params=insecure_test_params, workers=key_workers)
            self.max_body = KEY_LIMITS
        elif role == "local":
            if not gallery_url:
                raise ValueError("an ident local server needs the gallery store (--gallery)")
            if key is None:
                if not key_url:
                    raise ValueError("an ident local server needs the key server's URL (--key-url)")
                from ..clients.hers import HttpKeyServer

                def link():  # one connection per user: erasure runs beside the identifications' link
                    return HttpKeyServer(key_url, timeout=timeout, api_key=key_api_key, tls=key_tls)
                key = link()
                self._erase_key = link
            else:
                self._erase_key = lambda: key
            self.key = key
            self.party = LocalRole(gallery_url, key, gallery_name, chunk=chunk, ray=ray, shards=shards)
            self.max_body = LOCAL_LIMITS
        else:
            raise ValueError(f"ident role must be key or local, got {role!r}")
        self.steps = self.first_steps = tuple(self.max_body)

    def handle(self, step: str, body: bytes, state: Any | None) -> StepResult:
        if step not in self.steps:
            raise MessageError(f"ident {self.role} server has no step {step!r}")
        if state is not None:
            raise SessionError("ident steps take no session")
        if step.startswith("gallery/"):
            return StepResult(json.dumps(self._gallery_step(step, body)).encode())
        try:
            reply = getattr(self.party, step.replace("/", "_"))(body)  # the role's steps are its party's methods
        except (WireError, ProtocolError, CryptoError, TemplateError) as e:
            raise MessageError(str(e)) from None
        if step == "identify":
            return StepResult(reply.to_bytes(), subject=reply.subject_id, accepted=reply.accepted)
        return StepResult(b"" if reply is None else reply.to_bytes())

    def _gallery_step(self, step: str, body: bytes) -> dict:
        """The admin steps of the local server on its own gallery (``scale.lifecycle``); body validated first."""
        from ...scale import lifecycle
        from ...scale.layout import GalleryError
        from ...store.base import check_key

        msg = json_object(body)
        url, name = self.party.gallery.url, self.party.gallery.name
        try:
            if step == "gallery/info":
                return lifecycle.info(url, name, tau=False)  # S_local never reads the key store
            if step == "gallery/list":
                return {"ids": lifecycle.list_ids(url, name)}
            ids = msg.get("ids")
            most = MAX_REMOVE if step == "gallery/remove" else MAX_ADD
            if (set(msg) != ({"ids"} if step == "gallery/remove" else {"ids", "templates"})
                    or not isinstance(ids, list) or not 1 <= len(ids) <= most
                    or not all(isinstance(i, str) for i in ids)):
                raise MessageError(f"expected {{\"ids\": [1 to {most} gallery ids]"
                                   + ("}" if step == "gallery/remove" else ", \"templates\": [one per id]}"))
            for i in ids:
                check_key("gallery", i)
            link = self._erase_key() if step != "gallery/add" else None
            try:
                key = self.party.erase_link(link) if link is not None else None
                # retune_tau=False: S_key computes τ(N) itself at the re-attach (S_local never writes τ)
                if step == "gallery/remove":
                    report = lifecycle.withdraw(url, ids, name, key=key, retune_tau=False)
                elif step == "gallery/update":
                    report = lifecycle.update(url, self._templates(ids, msg["templates"]), name, key=key,
                                               retune_tau=False)
                else:
                    report = lifecycle.add(url, self._templates(ids, msg["templates"]), name, retune_tau=False)
            finally:
                if link is not None and link is not self.key:
                    link.close()
            try:
                self.party.refresh()
            except UnavailableError:  # a shard is restarting: the change is in the store, the next
                pass  # identification stages it (scale.resident) — the caller must not think it lost
            return report
        except (GalleryError, StoreError, TemplateError, ProtocolError, CryptoError) as e:
            raise MessageError(str(e)) from None

    def _templates(self, ids: list[str], rows):
        """The request's templates as a source: one list of d finite numbers per id (MessageError otherwise)."""
        import numpy as np

        from ...scale.sources import ArraySource

        d = self.party.dim
        if (not isinstance(rows, list) or len(rows) != len(ids)
                or not all(isinstance(r, list) and len(r) == d for r in rows)
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for r in rows for v in r)):
            raise MessageError(f"templates: one list of {d} numbers per id")
        x = np.asarray(rows, dtype=np.float64)
        with np.errstate(over="ignore"):
            norms = np.linalg.norm(x, axis=1)
        if not np.all(np.isfinite(x)) or not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise MessageError("templates must be finite, non-zero and of finite norm")
        return ArraySource(ids, x)
