"""cryptomask's gallery lifecycle over HTTP (issue 37): the key generator as a role of its own, and the CS's admin
steps on the gallery it serves.

Key generator (``role="kg"``, its store = the gallery's key store, holds sk; ``scale.cryptomask_kg``):
    ``erase/attach``   EraseAttach → EraseAttached     (the CS's public context, checked against the pk digest)
    ``erase/refresh``  EraseRefresh → EraseRefreshed   (the masked refresh's key step: fresh encryptions only)
both scope ``internal`` (the CS's key for the KG).

CS (``service.bindings.cryptomask``, ``role="cs"``, with ``kg_url``) — ``gallery_step`` here:
    ``gallery/info``    {} → the gallery's settings and size (``scale.lifecycle.info``, no τ)        scope admin
    ``gallery/list``    {} → {"ids": [...]}                                                           scope admin
    ``gallery/remove``  {"ids": [...]} → the erasure report (``scale.cryptomask_erase.withdraw`` with the KG over
                        HTTP: the removed rows decrypt to 0, the stacks are fresh encryptions); then the CS serves
                        the erased gallery to the identifications that start afterwards (those in flight finish on
                        the gallery they started with)                                                scope admin
    ``gallery/update``  {"ids": [...], "templates": [[d floats], …]} → the update report: each old row erased
                        and the new template written in its place in one write of its block
                        (``scale.lifecycle.update``); served to the identifications that start afterwards  scope admin
(``gallery/add`` changes the gallery's size: ``privface gallery add``, then a restart of the CS.)
A CS whose blocks are resident in Ray shards refuses ``gallery/remove`` (a change there needs the shards reloaded).
"""
from __future__ import annotations

from typing import Any

from ...errors import CryptoError, ProtocolError, TemplateError
from ...protocols.cryptomask.server import PROTOCOL
from ...store.base import StoreError, TemplateStore
from ...wire import WireError
from ..base import MessageError, SessionError, StepResult, json_object

_KB = 1024
KG_STEPS = {"erase/attach": 2 * 1024 * _KB + _KB, "erase/refresh": 4 * 1024 * _KB}
KG_SCOPES = {step: "internal" for step in KG_STEPS}
GALLERY_LIMITS = {"gallery/info": 64, "gallery/list": 64, "gallery/remove": 256 * _KB, "gallery/update": 4096 * _KB}
GALLERY_SCOPES = {step: "admin" for step in GALLERY_LIMITS}
MAX_REMOVE = 1000  # ids per ``gallery/remove`` request
MAX_UPDATE = 256  # templates per ``gallery/update`` request


class KeyGeneratorService:
    """Options: ``role`` ("kg"), ``gallery_name``, ``insecure_test_params`` (accept a toy public context)."""

    name = PROTOCOL
    scopes = KG_SCOPES
    max_body = KG_STEPS
    steps = first_steps = tuple(KG_STEPS)

    def __init__(self, store: TemplateStore, *, role: str = "kg", gallery_name: str = "default",
                 insecure_test_params: bool = False) -> None:
        from ...scale.cryptomask_kg import KeyGeneratorRole

        self.store, self.role = store, role
        self.party = KeyGeneratorRole(store, gallery_name, insecure_test_params=insecure_test_params)

    def handle(self, step: str, body: bytes, state: Any | None) -> StepResult:
        if step not in KG_STEPS:
            raise MessageError(f"cryptomask kg has no step {step!r}")
        if state is not None:
            raise SessionError("cryptomask kg steps take no session")
        try:
            reply = (self.party.attach if step == "erase/attach" else self.party.refresh)(body)
        except (WireError, ProtocolError, CryptoError) as e:
            raise MessageError(str(e)) from None
        return StepResult(reply.to_bytes())


def gallery_step(service, step: str, body: bytes) -> dict:
    """The CS's admin steps on its own gallery (module docstring); the body is validated first."""
    from ...scale import lifecycle
    from ...scale.cryptomask_kg import KGLink
    from ...scale.layout import GalleryError
    from ...store.base import check_key

    msg = json_object(body)
    url, name = service.gallery_url, service.gallery_name
    try:
        if step == "gallery/info":
            return lifecycle.info(url, name, tau=False)  # the CS never reads the key store
        if step == "gallery/list":
            return {"ids": lifecycle.list_ids(url, name)}
        ids = msg.get("ids")
        most = MAX_REMOVE if step == "gallery/remove" else MAX_UPDATE
        if (set(msg) != ({"ids"} if step == "gallery/remove" else {"ids", "templates"})
                or not isinstance(ids, list) or not 1 <= len(ids) <= most
                or not all(isinstance(i, str) for i in ids)):
            raise MessageError(f"expected {{\"ids\": [1 to {most} gallery ids]"
                               + ("}" if step == "gallery/remove" else ", \"templates\": [one per id]}"))
        for i in ids:
            check_key("gallery", i)
        if service.resident:
            raise MessageError("this CS's gallery is resident in Ray shards: remove with `privface gallery remove` "
                               "and restart the CS")
        source = templates_source(ids, msg["templates"], service.party.cs.dim) if step == "gallery/update" else None
        link = service.kg_link()
        try:
            key = KGLink(link, service.pk_bytes)
            report = (lifecycle.withdraw(url, ids, name, key=key, retune_tau=False) if source is None
                      else lifecycle.update(url, source, name, key=key, retune_tau=False))
        finally:
            if hasattr(link, "close"):
                link.close()
        service.reload()
        return report
    except (GalleryError, StoreError, TemplateError, ProtocolError, CryptoError) as e:
        raise MessageError(str(e)) from None


def templates_source(ids: list[str], rows, d: int):
    """The request's templates as a source: one list of d finite numbers per id, non-zero (MessageError
    otherwise)."""
    import numpy as np

    from ...scale.sources import ArraySource

    if (not isinstance(rows, list) or len(rows) != len(ids)
            or not all(isinstance(r, list) and len(r) == d for r in rows)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for r in rows for v in r)):
        raise MessageError(f"templates: one list of {d} numbers per id")
    x = np.asarray(rows, dtype=np.float64)
    with np.errstate(over="ignore"):
        norms = np.linalg.norm(x, axis=1)
    if not np.all(np.isfinite(x)) or not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise MessageError("templates must be finite, non-zero and of finite norm")
    return ArraySource(ids, x / norms[:, None])


__all__ = ["GALLERY_LIMITS", "GALLERY_SCOPES", "KeyGeneratorService", "gallery_step", "templates_source"]
