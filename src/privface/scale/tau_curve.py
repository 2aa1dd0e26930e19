"""The default threshold τ for a gallery of N identities (issue 37: thresholds that follow the gallery).

``tau_curve.json`` holds, per face backend and 1:N setting, the upper quantiles q(p) of the per-comparison
non-mated score distribution measured on LFW identities no evaluation uses (``python -m privface.eval.tau_curve``)
and an exponential tail for p below the measured ones. Seed 003 §5.2's open-set rule accepts iff the best of the N
scores reaches τ, so with a per-comparison false-match rate p the gallery's FPIR is 1 − (1 − p)^N and

    τ(N) = q(p_N),   p_N = 1 − (1 − FPIR)^{1/N},

rounded up to the score's own grid (1e-4 for the cosine, 1 for idface's integer score). The binomial form is the
measured choice (docs: "τ follows the gallery"); it is conservative when some probes score higher than others.
"""
from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources

from ..errors import PrivfaceError

FILE = "tau_curve.json"
TARGET_FPIR = 3e-3


@cache
def _doc() -> dict:
    return json.loads(resources.files(__package__).joinpath(FILE).read_text())


def per_comparison_rate(n: int, target: float = TARGET_FPIR) -> float:
    """p_N: the per-comparison false-match rate at which N comparisons give FPIR ``target``."""
    return -math.expm1(math.log1p(-target) / n)


def score_at(curve: dict, p: float) -> tuple[float, bool]:
    """(q(p), extrapolated): log-linear interpolation between the stored quantiles, the fitted tail beyond."""
    ps, qs = curve["p"], curve["q"]
    if p >= ps[0]:
        return float(qs[0]), False
    for k in range(1, len(ps)):
        if p >= ps[k]:
            w = (math.log(ps[k - 1]) - math.log(p)) / (math.log(ps[k - 1]) - math.log(ps[k]))
            return qs[k - 1] + w * (qs[k] - qs[k - 1]), False
    a, b = curve["tail"]
    return max(float(qs[-1]), (a - math.log(p)) / b), True


def tau_for_n(backend: str, dim: int, key: str, n: int, target: float = TARGET_FPIR) -> tuple[float, dict]:
    """(τ(N), its source) for a gallery of ``n`` identities of ``backend`` templates (``dim``) under setting ``key``
    ("hers", "cryptomask" or ``default_tau.idface_key(…)``); PrivfaceError when no curve was calibrated."""
    entry = _doc()["backends"].get(backend)
    if n < 1:
        n = 1  # an empty gallery answers nobody; τ for its first identity
    if entry is None or entry["dim"] != dim or key not in entry["settings"]:
        raise PrivfaceError(f"no calibrated default τ for {key} with {backend} templates of d = {dim}: "
                            "pass --tau (a cosine for hers and cryptomask, an integer score for idface)")
    curve = entry["settings"][key]
    p = per_comparison_rate(n, target)
    q, extrapolated = score_at(curve, p)
    step = curve["step"]
    tau = round(math.floor(q / step + 1e-9) * step + step, 6)  # the next grid score above q: at most p reach it
    src = entry["source"]
    return tau, {"mode": "default", "n": int(n), "target_fpir": target, "per_comparison_rate": float(f"{p:.4g}"),
                 "extrapolated": extrapolated, "backend": backend, "setting": key,
                 "calibration": f"{src['identities']} held-out LFW identities, {curve['comparisons']} non-mated "
                                f"comparisons ({src['command']})"}


def describe(source: dict) -> str:
    """One line for people: where a default τ(N) came from."""
    return (f"default for N = {source['n']} ({source['backend']}, {source['setting']}): FPIR "
            f"{source['target_fpir']:g} = 1 − (1 − p)^N at p = {source['per_comparison_rate']:g}"
            + (" (tail extrapolated)" if source.get("extrapolated") else "") + f"; {source['calibration']}")
