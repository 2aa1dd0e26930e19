"""Protocols, one folder per paper; ``catalogue()`` lists what each declares (threat model, leakage,
security levels, parameters) for ``privface protocols``.

Every folder has the same three modules: ``params`` (parameter sets and their security), ``parties`` (one class
per party, holding its own state) and ``messages`` (the wire messages); what is particular to a paper sits beside
them (im2020 ``blind``, gsm ``zk`` and ``keyfile``, kolberg ``rotation``, hers ``scheme``, cryptomask ``he``,
``encoding``, ``reveal``, ``server``). idface is a database encryption scheme of the two-server ident protocol: its
parties and messages are hers's. Over HTTP, each protocol's server binding is ``service.bindings.<name>`` and its
client ``service.clients.<name>`` (a class); no module here holds HTTP code."""
from __future__ import annotations

import importlib

PROTOCOLS = ("im2020", "gsm", "kolberg", "hers", "idface", "cryptomask")


def catalogue() -> list[dict]:
    return [importlib.import_module(f"{__name__}.{name}").DESCRIPTION for name in PROTOCOLS]
