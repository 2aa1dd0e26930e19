"""Default key-server thresholds τ for new galleries, per face backend and 1:N scheme.

The values in ``default_tau.json`` are calibrated on LFW identities that no evaluation uses
(``python -m privface.eval.default_tau``): τ accepts at most its target FPIR of non-mated searches there.
A gallery records its τ and where it came from (``tau_source``) when it is created.
"""
from __future__ import annotations

import json
from functools import cache
from importlib import resources

from ..errors import PrivfaceError

FILE = "default_tau.json"


def idface_key(centring: str, lift: int | None, beta: int) -> str:
    return f"idface/centring={centring}/lift={lift or 0}/beta={beta}"


@cache
def _doc() -> dict:
    return json.loads(resources.files(__package__).joinpath(FILE).read_text())


def default_tau(backend: str, dim: int, key: str) -> tuple[float, str]:
    """(τ, provenance) for templates of ``backend`` with ``dim`` dimensions under scheme setting ``key``
    ("hers", "cryptomask" or ``idface_key(…)``); PrivfaceError when none was calibrated."""
    entry = _doc()["backends"].get(backend)
    if entry is None or entry["dim"] != dim or key not in entry["tau"]:
        raise PrivfaceError(f"no calibrated default τ for {key} with {backend} templates of d = {dim}: "
                            "pass --tau (a cosine for hers and cryptomask, an integer score for idface)")
    t, src = entry["tau"][key], entry["source"]
    return float(t["tau"]), (f"default for {backend}: FPIR {t['fpir_calibration']:g} / TPIR "
                             f"{t['tpir_calibration']:g} on {src['identities']} held-out LFW identities "
                             f"({src['command']})")
