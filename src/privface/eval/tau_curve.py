"""Calibrate the per-comparison non-mated score distribution behind τ(N) (``scale/tau_curve.json``).

``python -m privface.eval.tau_curve --backend sface`` embeds the LFW identities held out of every evaluation
(``default_tau.calibration_set``: the same identities and dropped duplicates as the fixed default), enrols each
identity's first image with a face and compares every image with a face against every *other* identity's template:
about 2.6 M non-mated comparisons. For each 1:N setting (the score S_key decides on — the cosine for hers and
cryptomask, the integer ⟨T_α(x), T_β(y)⟩ for idface after its centring and lift, seed 003 §4.1) it stores the
upper quantiles ``q(p)`` of that distribution on a log grid of p, and an exponential tail ``log p = a − b·s``
used beyond the smallest p measured. Since version 3 the stored ``q`` is an upper 95 % confidence bound q⁺(p) from
resampling the held-out identities (``bounded_quantiles``; ``q_point`` keeps the point estimate): the k-photo tails
rest on 53–310 identities, where the point estimate of a tail quantile gave fused galleries FPIR above the target.
Settings without a fixed default (``default_tau.MIN_TPIR``: their τ accepts
almost no mated search either) get no curve: such a gallery needs ``--tau``.

**Fused templates** (issue 37: several photos per identity). For each k = 2 … ``photos_cap`` the same is measured
with templates fused from k photos (``fusion.fuse`` "mean", as ``gallery enrol`` fuses): every identity with at
least k photos gives one template, its first k photos, compared with every photo of every other identity; stored
under the setting's ``by_photos[k]``. (⌊m/k⌋ disjoint templates per identity were tried: weighting the much-
photographed people, their one-photo curve sat lower and held-out one-photo galleries exceeded the target.)
The cap is the largest k with at least
``MIN_IDENTITIES`` held-out identities of ≥ k photos (a curve from fewer people describes those people, not a
population); a gallery's identities with more photos count with the strictest curve (``scale.tau_curve.WORST``).

``scale.tau_curve.tau_for_n`` turns this into τ(N) for an open-set FPIR target: FPIR(N) = 1 − (1 − p)^N, so
τ(N) = q(1 − (1 − FPIR)^{1/N}) (seed 003 §5.2's rule: accept iff the best of N scores ≥ τ). ``--validate``
measures that choice against the alternative (a per-probe mixture, the empirical max-of-N) on two halves of the
held-out identities (docs: "τ follows the gallery").
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
from importlib import resources

import numpy as np

from ..faces.registry import make_backend
from .datasets import CALIBRATION_BYTE
from .default_tau import TARGET_FPIR, calibration_set
from .embed import embed_paths
from .identify_eval import _unit

FILE = "tau_curve.json"
P_GRID = tuple(float(10 ** (-k / 8)) for k in range(8, 8 * 7 + 1))  # 1e-1 … 1e-7, 8 points a decade
MIN_EXCEED = 30  # a quantile is stored only where at least this many comparisons exceed it
TAIL_FROM = 1e-3  # the exponential tail is fitted to the stored quantiles at p ≤ this
MIN_IDENTITIES = 50  # a photo count k is calibrated only when this many held-out identities have ≥ k photos
BOOTSTRAP = 200  # identity-resampling replicates behind the stored upper bound q⁺(p)
CONFIDENCE = 0.95  # q⁺(p): this quantile of the replicates' q(p)
SEED = 37  # the replicates' identity draws (the same draws for every setting and photo count)
VERSION = 3  # 3: q is the bound q⁺, q_point the point estimate; 2: ``by_photos``; 1: one-photo curve (all still read)


def nonmated(x: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(probe rows, gallery rows, own-identity mask): each identity's first row enrolled, every row a probe."""
    first: dict[str, int] = {}
    for r, i in enumerate(ids):
        first.setdefault(str(i), r)
    g = np.array(sorted(first.values()))
    return np.arange(len(ids)), g, ids[:, None] == ids[g][None, :]


def fused_templates(x: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(templates fused from k photos, their identity, how many identities gave one): one template per identity
    with m ≥ k rows, the normalised mean of its first k rows — as a gallery holds one template per person (k = 1:
    the first row, as before version 2)."""
    from .fusion import fuse

    by: dict[str, list[int]] = {}
    for r, i in enumerate(ids):
        by.setdefault(str(i), []).append(r)
    t, owner = [], []
    for i, rows in by.items():
        if len(rows) >= k:
            t.append(fuse(x[rows[:k]], "mean" if k > 1 else "single"))
            owner.append(i)
    return np.array(t).reshape(-1, x.shape[1]), np.array(owner, dtype=str), len(owner)


def photos_cap(ids: np.ndarray, minimum: int = MIN_IDENTITIES) -> int:
    """The largest k with at least ``minimum`` identities of ≥ k photos (1 at least)."""
    _, counts = np.unique(ids, return_counts=True)
    return max([1] + [k for k in range(1, int(counts.max()) + 1) if int((counts >= k).sum()) >= minimum])


def quantiles(scores: np.ndarray, p_grid=P_GRID) -> dict:
    """{"p": [...], "q": [...], "tail": [a, b], "comparisons": n}: q(p) = the score exceeded by a share p of the
    non-mated comparisons (p only down to ``MIN_EXCEED``/n: the last few comparisons are single pairs, LFW's
    look-alikes and mislabels, not a distribution), and log p = a − b·s fitted to the stored q(p) at
    p ≤ ``TAIL_FROM``."""
    s = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    n = s.size
    ps = [p for p in p_grid if p * n >= MIN_EXCEED]
    q = [float(s[int(np.floor(p * n)) - 1]) for p in ps]
    fit = [(v, np.log(p)) for p, v in zip(ps, q) if p <= TAIL_FROM]
    if len({v for v, _ in fit}) < 2:  # a coarse integer score: no slope to fit; never extrapolate below q
        slope, icpt = -1e9, 0.0
    else:
        slope, icpt = np.polyfit(*zip(*fit), 1)
    return {"p": [round(p, 12) for p in ps], "q": [round(v, 6) for v in q],
            "tail": [round(float(icpt), 6), round(float(-slope), 6)], "comparisons": int(n)}


def bounded_quantiles(scores: np.ndarray, probe_id: np.ndarray, template_id: np.ndarray, rows_per_id: np.ndarray,
                      has_template: np.ndarray, reps: int = BOOTSTRAP, conf: float = CONFIDENCE, seed: int = SEED
                      ) -> dict:
    """``quantiles`` with q(p) replaced by an upper confidence bound q⁺(p) (``q_point`` keeps the point estimate).

    The comparisons are not independent: a held-out identity enters all of its own rows' comparisons and every
    comparison with its template, so the sampling unit is the identity. Each replicate draws the held-out identities
    with replacement (a cluster bootstrap, seeded), weighs the comparison (probe of identity a, template of identity
    b) by w_a·w_b, and takes the weighted q(p) at the same p grid; q⁺(p) is the ``conf`` quantile of the replicates
    (one-sided: P[q(p) > q⁺(p)] ≈ 1 − conf), so p(q⁺) bounds the per-comparison rate from above at ``conf``. The
    exponential tail is fitted to q⁺ as ``quantiles`` fits it to q. ``probe_id`` / ``template_id`` index identities
    0 … n−1; ``rows_per_id[i]`` counts identity i's probe rows, ``has_template[i]`` whether it has a template."""
    point = quantiles(scores)
    ps = np.asarray(point["p"])
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    s, a, b = np.asarray(scores, dtype=np.float64)[order], probe_id[order], template_id[order]
    keep = min(s.size, max(int(0.3 * s.size), 1))  # p ≤ 0.1 lies in the top 30 % of every replicate (checked below)
    rng = np.random.default_rng(seed)
    n_ids = rows_per_id.size
    reps_q = np.empty((reps, ps.size))
    for r in range(reps):
        w = rng.multinomial(n_ids, np.full(n_ids, 1.0 / n_ids)).astype(np.float64)
        total = float(rows_per_id @ w) * float(has_template @ w) - float((rows_per_id * has_template) @ (w * w))
        cw = np.cumsum(w[a[:keep]] * w[b[:keep]])
        if cw[-1] < ps[0] * total:
            keep = s.size  # a replicate reaching further down: use every comparison from here on
            cw = np.cumsum(w[a] * w[b])
        reps_q[r] = s[np.minimum(np.searchsorted(cw, ps * total), keep - 1)]
    qu = np.maximum(np.quantile(reps_q, conf, axis=0, method="higher"), np.asarray(point["q"]))
    qu = np.maximum.accumulate(qu)
    fit = [(float(v), float(np.log(p))) for p, v in zip(ps, qu) if p <= TAIL_FROM]
    if len({v for v, _ in fit}) < 2:
        slope, icpt = -1e9, 0.0
    else:
        slope, icpt = np.polyfit(*zip(*fit), 1)
    return {**point, "q": [round(float(v), 6) for v in qu], "tail": [round(float(icpt), 6), round(float(-slope), 6)],
            "q_point": point["q"], "tail_point": point["tail"]}


def identity_index(ids: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(probe identity index per row, template identity index per template, rows per identity, has-template flag)."""
    names, probe_id, rows_per_id = np.unique(ids, return_inverse=True, return_counts=True)
    template_id = np.searchsorted(names, owner)
    has = np.zeros(names.size)
    has[template_id] = 1.0
    return probe_id, template_id, rows_per_id.astype(np.float64), has


def curve_of(scores: np.ndarray, ids: np.ndarray, owner: np.ndarray, bound: bool = True) -> dict:
    """The stored curve of a (probes, templates) score matrix (own-identity pairs dropped): ``bounded_quantiles``
    (or, ``bound=False``, the point estimate ``quantiles``)."""
    mask = ids[:, None] != owner[None, :]
    if not bound:
        return quantiles(scores[mask])
    probe_id, template_id, rows, has = identity_index(ids, owner)
    pa = np.broadcast_to(probe_id[:, None], scores.shape)[mask]
    tb = np.broadcast_to(template_id[None, :], scores.shape)[mask]
    return bounded_quantiles(scores[mask], pa, tb, rows, has)


def settings_scores(x: np.ndarray, backend: str):
    """Yield (key, step, scorer) per 1:N setting: scorer(probe rows, gallery rows) → their score matrix."""
    for key, step, pair in setting_pairs(backend, x.shape[1]):
        yield key, step, (lambda r, g, pair=pair: pair(x[r], x[g]))


def setting_pairs(backend: str, dim: int):
    """Yield (key, step, pair) per 1:N setting: pair(probes, templates) → their (unit rows) score matrix."""
    from ..protocols.idface.centring import shipped_mean
    from ..protocols.idface.params import PARAMETER_SETS, IDFaceParams
    from ..scale.default_tau import idface_key

    def cos(q, t):
        return q @ t.T

    yield "hers", 1e-4, cos
    yield "cryptomask", 1e-4, cos
    mean = shipped_mean(backend)
    for centring in ("none", "shipped"):
        for lift in (None, 1024, 2048):
            width = lift or dim
            if width not in PARAMETER_SETS:
                continue
            for beta in PARAMETER_SETS[width][1]:
                p = IDFaceParams.for_dim(dim, beta, mean if centring == "shipped" else None, lift)
                # |entries| ≤ α: exact in float64
                yield idface_key(centring, lift, beta), 1.0, (
                    lambda q, t, p=p: p.query_transform(q).astype(np.float64) @ p.enrol_transform(t).astype(
                        np.float64).T)


def _embedded(backend: str, data_root: str | None):
    ds, dropped = calibration_set(data_root)
    emb = embed_paths(ds.paths, {"name": backend}, which="center")
    rows = np.flatnonzero(emb.found)
    x = _unit(np.nan_to_num(emb.vectors, nan=1.0))[rows]
    return x, np.asarray(ds.ids).astype(str)[rows], emb, dropped


def calibrate(backend: str, data_root: str | None = None) -> dict:
    from .default_tau import _dropped_source

    x, ids, emb, dropped = _embedded(backend, data_root)
    cap = photos_cap(ids)
    fused = {k: fused_templates(x, ids, k) for k in range(1, cap + 1)}
    out = {}
    fixed = json.loads(resources.files("privface.scale").joinpath("default_tau.json").read_text())
    usable = fixed["backends"].get(backend, {}).get("tau", {})  # settings that find anyone (default_tau.MIN_TPIR)
    for key, step, pair in setting_pairs(backend, x.shape[1]):
        if key not in usable:
            continue
        curves = {}
        for k, (t, owner, people) in fused.items():
            curves[k] = {**curve_of(pair(x, t), ids, owner), "templates": int(len(t)), "identities": people}
        out[key] = {"step": step, **curves[1], "by_photos": {str(k): c for k, c in curves.items() if k > 1}}
    source = {"dataset": "lfw (grey), identities held out of every LFW evaluation: first byte of SHA-256(name) "
                         f"< {CALIBRATION_BYTE}",
              "identities": int(np.unique(ids).size), "probes": int(ids.size), "undetected": emb.undetected,
              **_dropped_source(dropped), "backend_options": make_backend(name=backend).options(),
              "model": "binomial: FPIR(N) = 1 − (1 − p)^N, p the per-comparison non-mated rate; a gallery of "
                       "N_k identities fused from k photos: FPIR = 1 − Π_k (1 − p_k)^N_k",
              "bound": f"q(p) is an upper {CONFIDENCE:g} confidence bound (q_point: the point estimate): the "
                       f"{CONFIDENCE:g} quantile of q(p) over {BOOTSTRAP} replicates drawing the held-out identities "
                       f"with replacement (seed {SEED}); the tail is fitted to the bound",
              "photos_cap": cap, "photos_rule": f"k ≤ the largest k with ≥ {MIN_IDENTITIES} held-out identities of "
                                                "≥ k photos; one template per identity: its first k photos",
              "command": f"python -m privface.eval.tau_curve --backend {backend}"}
    return {"dim": int(x.shape[1]), "target_fpir": TARGET_FPIR, "source": source, "settings": out}


def _exceed(s: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """(probes, grid): how many of each probe's non-mated scores (NaN = own identity) reach each τ."""
    srt = np.sort(np.nan_to_num(s, nan=-np.inf), axis=1)
    return np.stack([s.shape[1] - np.searchsorted(row, grid, side="left") for row in srt])


def validate(backend: str, data_root: str | None = None, ns=(10, 40, 100, 300), target: float = TARGET_FPIR,
             key: str = "hers") -> dict:
    """Fit on one half of the held-out identities (split by SHA-256 of the name), test on the other: τ(N) from the
    binomial model (pooled p) and from the per-probe mixture mean_i 1 − (1 − p_i)^N (the expected max-of-N for
    galleries drawn from the calibration identities), and the FPIR each τ gives on the other half for random
    N-identity galleries (exact hypergeometric expectation, no sampling)."""
    from scipy.special import gammaln

    x, ids, _, _ = _embedded(backend, data_root)
    scorer = next(f for k, _, f in settings_scores(x, backend) if k == key)
    half = np.array([hashlib.sha256(b"half:" + i.encode()).digest()[0] & 1 for i in ids])
    parts = []
    for h in (0, 1):
        rows = np.flatnonzero(half == h)
        r, g, own = nonmated(x[rows], ids[rows])
        parts.append(np.where(own, np.nan, scorer(rows[r], rows[g])))
    lo = min(float(np.nanmin(p)) for p in parts)
    hi = max(float(np.nanmax(p)) for p in parts)
    grid = np.linspace(lo, hi, 2000)
    out: dict = {"backend": backend, "setting": key, "target_fpir": target, "rows": []}
    for fit, test in ((0, 1), (1, 0)):
        kf, kt = _exceed(parts[fit], grid), _exceed(parts[test], grid)
        nf = np.sum(~np.isnan(parts[fit]), axis=1)
        nt = np.sum(~np.isnan(parts[test]), axis=1)
        pooled = kf.sum(axis=0) / nf.sum()
        for n in ns:
            binom = grid[np.argmax(1 - (1 - pooled) ** n <= target)]
            mix = grid[np.argmax(np.mean(1 - (1 - kf / nf[:, None]) ** n, axis=0) <= target)]
            a = nt[:, None] - kt
            with np.errstate(invalid="ignore", divide="ignore"):
                none = np.where(a >= n, np.exp(gammaln(a + 1) - gammaln(a - n + 1) - gammaln(nt[:, None] + 1)
                                               + gammaln(nt[:, None] - n + 1)), 0.0)
            fpir_test = np.mean(1 - none, axis=0)
            at = {name: round(float(fpir_test[np.searchsorted(grid, t)]), 5) for name, t in
                  (("binomial", binom), ("mixture", mix))}
            out["rows"].append({"fit_half": fit, "n": n, "tau_binomial": round(float(binom), 4),
                                "tau_mixture": round(float(mix), 4),
                                "tau_ideal_on_test": round(float(grid[np.argmax(fpir_test <= target)]), 4),
                                "fpir_test_binomial": at["binomial"], "fpir_test_mixture": at["mixture"]})
    return out


def validate_photos(backend: str, data_root: str | None = None, ns=(10, 40), target: float = TARGET_FPIR,
                    key: str = "hers", photos=(1, 2, 3)) -> dict:
    """Out-of-sample check of the per-photo-count curves: fit every k's curve on one half of the held-out identities
    (split as ``validate``), and on the other half form galleries of N identities each fused from its first k photos;
    the FPIR they give (exact expectation over random N-identity galleries, every photo of the half a probe against
    the other identities) at τ from the k-photo curve's point estimate, from the one-photo curve's, and from the
    k-photo curve's upper bound (``bounded_quantiles``: what ships)."""
    from scipy.special import gammaln

    from ..scale.tau_curve import exceed_rate

    x, ids, _, _ = _embedded(backend, data_root)
    pair = next(f for k, _, f in setting_pairs(backend, x.shape[1]) if k == key)
    half = np.array([hashlib.sha256(b"half:" + i.encode()).digest()[0] & 1 for i in ids])
    out: dict = {"backend": backend, "setting": key, "target_fpir": target, "rows": []}
    for fit in (0, 1):
        fr, tr = np.flatnonzero(half == fit), np.flatnonzero(half != fit)
        curves, bounds = {}, {}
        for k in photos:
            t, owner, _ = fused_templates(x[fr], ids[fr], k)
            bounds[k] = curve_of(pair(x[fr], t), ids[fr], owner)
            curves[k] = {k2: v for k2, v in bounds[k].items() if k2 not in ("q", "tail")}
            curves[k].update(q=bounds[k]["q_point"], tail=bounds[k]["tail_point"])
        for k in photos:
            t, owner, _ = fused_templates(x[tr], ids[tr], k)
            s = np.where(ids[tr][:, None] == owner[None, :], np.nan, pair(x[tr], t))
            for n in ns:
                if n > len(owner) - 1:
                    continue
                row = {"fit_half": fit, "photos": k, "n": n, "identities": int(len(owner))}
                for name, curve in (("k_curve", curves[k]), ("one_photo_curve", curves[1]),
                                    ("k_curve_bound", bounds[k])):
                    p_n = -np.expm1(np.log1p(-target) / n)
                    tau = _score(curve, p_n)
                    nt = np.sum(~np.isnan(s), axis=1)
                    a = nt - np.sum(np.nan_to_num(s, nan=-np.inf) >= tau, axis=1)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        none = np.where(a >= n, np.exp(gammaln(a + 1) - gammaln(a - n + 1) - gammaln(nt + 1)
                                                       + gammaln(nt - n + 1)), 0.0)
                    row[f"tau_{name}"] = round(float(tau), 4)
                    row[f"fpir_test_{name}"] = round(max(0.0, float(np.mean(1 - none))), 5)
                    row[f"p_fit_{name}"] = float(f"{exceed_rate(curve, tau)[0]:.3g}")
                out["rows"].append(row)
    return out


def _score(curve: dict, p: float) -> float:
    from ..scale.tau_curve import score_at

    return score_at(curve, p)[0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="sface")
    ap.add_argument("--data-root")
    ap.add_argument("--validate", action="store_true", help="print the binomial-vs-mixture measurement")
    ap.add_argument("--validate-photos", action="store_true",
                    help="print the out-of-sample FPIR of fused galleries at the k-photo and one-photo curves' τ")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    if a.validate_photos:
        print(json.dumps(validate_photos(a.backend, a.data_root)))
        return
    if a.validate:
        print(json.dumps(validate(a.backend, a.data_root)))
        return
    target = resources.files("privface.scale").joinpath(FILE)
    doc = json.loads(target.read_text()) if target.is_file() else {"backends": {}}
    doc["backends"][a.backend] = calibrate(a.backend, a.data_root)
    doc = {"version": VERSION, **{k: v for k, v in doc.items() if k != "version"}}
    target.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    hers = doc["backends"][a.backend]["settings"]["hers"]
    print(json.dumps({"backend": a.backend, "photos_cap": doc["backends"][a.backend]["source"]["photos_cap"],
                      "hers_q_at_1e-4": {k: _q_at(c, 1e-4) for k, c in [("1", hers), *hers["by_photos"].items()]},
                      "seconds": round(time.perf_counter() - t0, 1)}))


def _q_at(curve: dict, p: float) -> float | None:
    return next((q for pp, q in zip(curve["p"], curve["q"]) if pp <= p * (1 + 1e-9)), None)


if __name__ == "__main__":
    main()
