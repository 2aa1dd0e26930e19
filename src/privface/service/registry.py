"""Protocols the service can mount, by name, imported only when asked for."""
from __future__ import annotations

import importlib
from typing import Any

from ..errors import PrivfaceError
from ..store.base import TemplateStore
from .base import ProtocolService

PROTOCOLS: dict[str, str] = {
    "im2020": "privface.service.bindings.im2020:Im2020Service",
    "gsm": "privface.service.bindings.gsm:GsmService",
    "kolberg": "privface.service.bindings.kolberg:KolbergService",
    "ident": "privface.service.bindings.hers:IdentService",
    "cryptomask": "privface.service.bindings.cryptomask:cryptomask_service",
}


def load_service(name: str, store: TemplateStore, **options: Any) -> ProtocolService:
    """The ProtocolService registered as `name`, built over `store` with `options`."""
    target = PROTOCOLS.get(name)
    if target is None:
        raise PrivfaceError(f"protocol {name} is not available (known: {', '.join(sorted(PROTOCOLS))})")
    module, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise PrivfaceError(f"protocol {name} is not available: {e}") from None
    return cls(store, **options)
