"""Protocols, one folder per paper; ``catalogue()`` lists what each declares (threat model, leakage,
security levels, parameters) for ``privface protocols``."""
from __future__ import annotations

import importlib

PROTOCOLS = ("im2020", "gsm", "kolberg", "hers", "idface", "cryptomask")


def catalogue() -> list[dict]:
    return [importlib.import_module(f"{__name__}.{name}").DESCRIPTION for name in PROTOCOLS]
