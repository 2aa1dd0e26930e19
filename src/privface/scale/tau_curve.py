"""The default threshold τ for a gallery of N identities (issue 37: thresholds that follow the gallery).

``tau_curve.json`` holds, per face backend and 1:N setting, the upper quantiles q(p) of the per-comparison
non-mated score distribution measured on LFW identities no evaluation uses (``python -m privface.eval.tau_curve``)
and an exponential tail for p below the measured ones; since version 3 each q(p) is an upper 95 % confidence bound
(held-out identities resampled, ``eval.tau_curve.bounded_quantiles``), so p(τ) is bounded from above.
Seed 003 §5.2's open-set rule accepts iff the best of the N
scores reaches τ, so with a per-comparison false-match rate p the gallery's FPIR is 1 − (1 − p)^N and

    τ(N) = q(p_N),   p_N = 1 − (1 − FPIR)^{1/N},

rounded up to the score's own grid (1e-4 for the cosine, 1 for idface's integer score). The binomial form is the
measured choice (docs: "τ follows the gallery"); it is conservative when some probes score higher than others.

**Fused galleries** (several photos per identity): a template fused from k photos scores higher against everyone,
so the calibration holds one curve per k = 1 … ``photos_cap`` (``by_photos``; k = 1 is the setting's own curve).
A gallery with N_k identities of k photos has

    FPIR(τ) = 1 − Π_k (1 − p_k(τ))^{N_k},

p_k(τ) the share of k-photo comparisons reaching τ (``exceed_rate``, the inverse of ``score_at``); ``tau_for_mix``
solves FPIR(τ) = target by bisection (FPIR falls as τ rises) and rounds up to the score grid as above. Identities
whose photo count is not known, or above the cap, count with the pointwise largest p_k (``WORST``), the strictest
curve. ``bounded_mix`` turns the counts the key store saw into the mix for the N identities S_key answers now.
"""
from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources

from ..errors import PrivfaceError

FILE = "tau_curve.json"
TARGET_FPIR = 3e-3
WORST = 0
"""The photo count of an identity whose count is not known (or above the calibrated cap): the strictest curve."""


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


def exceed_rate(curve: dict, s: float) -> tuple[float, bool]:
    """(p(s), extrapolated): the share of non-mated comparisons reaching score ``s`` — ``score_at``'s inverse
    (log-linear between the stored quantiles, the fitted tail beyond, never above the smallest stored p there);
    1 below the first stored quantile (p ≥ 0.1: no τ is wanted there)."""
    ps, qs = curve["p"], curve["q"]
    if s <= qs[0]:
        return (float(ps[0]) if s == qs[0] else 1.0), False
    for k in range(1, len(ps)):
        if s <= qs[k]:
            if qs[k] == qs[k - 1]:
                return float(ps[k]), False
            w = (s - qs[k - 1]) / (qs[k] - qs[k - 1])
            return math.exp(math.log(ps[k - 1]) + w * (math.log(ps[k]) - math.log(ps[k - 1]))), False
    a, b = curve["tail"]
    return min(float(ps[-1]), math.exp(min(0.0, a - b * s))), True


def _entry(backend: str, dim: int, key: str) -> dict:
    entry = _doc()["backends"].get(backend)
    if entry is None or entry["dim"] != dim or key not in entry["settings"]:
        raise PrivfaceError(f"no calibrated default τ for {key} with {backend} templates of d = {dim}: "
                            "pass --tau (a cosine for hers and cryptomask, an integer score for idface)")
    return entry


def photo_curves(backend: str, dim: int, key: str) -> dict[int, dict]:
    """{k: curve} for the photo counts calibrated for this setting (k = 1 always; more from ``by_photos``)."""
    setting = _entry(backend, dim, key)["settings"][key]
    return {1: setting, **{int(k): c for k, c in setting.get("by_photos", {}).items()}}


def fpir_of_mix(curves: dict[int, dict], mix: dict[int, int], s: float) -> tuple[float, bool]:
    """(FPIR(s) = 1 − Π_k (1 − p_k(s))^{N_k}, any p_k from the tail) for the photo-count mix {k: N_k}, p_k taken as
    max_{j ≤ k} p_j (the measured curves cross where their tails are extrapolated; with the envelope more photos are
    never less strict, which ``bounded_mix`` relies on); a k without its own curve (``WORST``, above the cap) takes
    the largest p_k(s) of all curves."""
    rates, run = {}, (0.0, False)
    for k in sorted(curves):  # the envelope max_{j ≤ k} p_j: more photos never count as less strict
        run = max(run, exceed_rate(curves[k], s))
        rates[k] = run
    worst = run
    log_none, extrapolated = 0.0, False
    for k, nk in mix.items():
        if nk <= 0:
            continue
        p, ex = rates.get(k, worst)
        extrapolated |= ex
        if p >= 1.0:
            return 1.0, extrapolated
        log_none += nk * math.log1p(-p)
    return -math.expm1(log_none), extrapolated


def _grid_above(q: float, step: float) -> float:
    return round(math.floor(q / step + 1e-9) * step + step, 6)  # the next grid score above q


def tau_for_mix(backend: str, dim: int, key: str, mix: dict[int, int], target: float = TARGET_FPIR
                ) -> tuple[float, dict]:
    """(τ, its source) for a gallery holding ``mix[k]`` identities fused from k photos (module docstring): one
    photo each is the closed form q(p_N); otherwise FPIR(τ) = target (``fpir_of_mix``) by bisection."""
    curves = photo_curves(backend, dim, key)
    mix = {int(k): int(v) for k, v in mix.items() if int(v) > 0}
    n = sum(mix.values())
    if n < 1:
        mix, n = {1: 1}, 1  # an empty gallery answers nobody; τ for its first identity
    step = curves[1]["step"]
    p_n = per_comparison_rate(n, target)
    if mix.keys() == {1}:
        q, extrapolated = score_at(curves[1], p_n)
    else:
        lo = min(float(c["q"][0]) for c in curves.values())
        hi = max(max(float(c["q"][-1]), (c["tail"][0] - math.log(1e-300)) / c["tail"][1] if c["tail"][1] > 0
                     else float(c["q"][-1])) for c in curves.values())
        hi = max(hi, lo + step)
        while fpir_of_mix(curves, mix, hi)[0] > target:  # a flat tail: widen until the target is met
            hi = lo + 2 * (hi - lo)
        for _ in range(200):
            mid = (lo + hi) / 2
            if fpir_of_mix(curves, mix, mid)[0] > target:
                lo = mid
            else:
                hi = mid
            if hi - lo < step * 1e-6:
                break
        q = hi
        extrapolated = fpir_of_mix(curves, mix, q)[1]
    tau = _grid_above(q, step)  # at most FPIR = target reach it
    src = _entry(backend, dim, key)["source"]
    comparisons = sum(c["comparisons"] for k, c in curves.items() if k in mix or WORST in mix)
    return tau, {"mode": "default", "n": int(n), "target_fpir": target, "per_comparison_rate": float(f"{p_n:.4g}"),
                 "extrapolated": extrapolated, "backend": backend, "setting": key,
                 "photos": {str(k): v for k, v in sorted(mix.items())},
                 "photos_cap": max(curves),
                 "calibration": f"{src['identities']} held-out LFW identities, {comparisons} non-mated "
                                f"comparisons{', q(p) an upper confidence bound' if 'bound' in src else ''} "
                                f"({src['command']})"}


def tau_for_n(backend: str, dim: int, key: str, n: int, target: float = TARGET_FPIR, photos: int = 1
              ) -> tuple[float, dict]:
    """(τ(N), its source) for a gallery of ``n`` identities of ``backend`` templates (``dim``) under setting ``key``
    ("hers", "cryptomask" or ``default_tau.idface_key(…)``), each fused from ``photos`` photos; PrivfaceError when
    no curve was calibrated."""
    return tau_for_mix(backend, dim, key, {photos: max(int(n), 1)}, target)


def bounded_mix(seen: dict | None, n: int, cap: int | None = None) -> dict[int, int]:
    """The photo-count mix {k: N_k} S_key assumes for the ``n`` identities it answers, from ``seen`` — the photo
    counts {k: identities} of every identity enrolled where the key store was written (never lowered by a removal;
    None: a gallery made before counts were recorded, whose τ assumed one photo each). At most n of the seen
    identities count, the most photos first (the removed ones may have been those with fewer photos); identities
    beyond what was seen (added where the key store was out of reach) count as ``WORST``. So the mix never claims
    fewer photos than the gallery holds, whatever S_local reports or removes; counts above ``cap`` become WORST."""
    if seen is None:
        return {1: n}
    left, out = n, {}
    order = sorted(((int(k), int(v)) for k, v in seen.items()), key=lambda kv: (kv[0] != WORST, -kv[0]))
    for k, v in order:
        take = min(left, max(v, 0))
        if take:
            kk = WORST if k == WORST or (cap is not None and k > cap) else k
            out[kk] = out.get(kk, 0) + take
            left -= take
    if left:
        out[WORST] = out.get(WORST, 0) + left
    return out


def describe(source: dict) -> str:
    """One line for people: where a default τ(N) came from."""
    photos = source.get("photos", {"1": source["n"]})
    if list(photos) == ["1"]:
        model = f"1 − (1 − p)^N at p = {source['per_comparison_rate']:g}"
    else:
        terms = ", ".join(f"{v} × {'unknown/above cap' if k == str(WORST) else k}" for k, v in photos.items())
        model = f"1 − Π_k (1 − p_k)^N_k for identities of k photos ({terms})"
    return (f"default for N = {source['n']} ({source['backend']}, {source['setting']}): FPIR "
            f"{source['target_fpir']:g} = {model}"
            + (" (tail extrapolated)" if source.get("extrapolated") else "") + f"; {source['calibration']}")
