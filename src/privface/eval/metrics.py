"""Biometric performance metrics for face verification (1:1) and identification (1:N).

Conventions used throughout:

* A comparison score is a **distance**: lower means "more likely the same person".
* ``genuine`` is a boolean array, True for a mated (same-identity) pair, False for a non-mated
  (impostor) pair.
* The decision rule is **accept if distance <= threshold**.
* Terms follow ISO/IEC 19795-1: FAR (false accept rate) = accepted impostor pairs / impostor
  pairs; FRR (false reject rate) = rejected genuine pairs / genuine pairs; TAR (true accept
  rate) = 1 - FRR. (Strictly these are FMR/FNMR at the comparison level; the FAR/FRR names are
  kept because they are the ones used in face-recognition papers.)

All functions validate their input and raise ``ValueError`` with a readable message on
mismatched lengths, empty input, missing genuine or impostor pairs, or non-finite distances.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "VerificationResult",
    "all_pairs",
    "auc",
    "best_accuracy_threshold",
    "eer",
    "far_frr",
    "kfold_accuracy",
    "pair_distances",
    "rank1",
    "rank1_leave_one_out",
    "roc",
    "summarize",
    "tar_at_far",
    "tpir_at_fpir",
]

DEFAULT_FAR_TARGETS: tuple[float, ...] = (1e-4, 1e-3, 1e-2)


# --------------------------------------------------------------------------- validation


def _as_bool(genuine: np.ndarray | Iterable[bool], name: str = "genuine") -> np.ndarray:
    g = np.asarray(genuine)
    if g.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {g.shape}")
    if g.dtype == bool:
        return g
    if np.issubdtype(g.dtype, np.number) and np.all((g == 0) | (g == 1)):
        return g.astype(bool)  # 0/1 labels (also the empty array)
    raise ValueError(f"{name} must be boolean (True = same identity), got dtype {g.dtype}")


def _validate(distances: np.ndarray | Iterable[float], genuine: np.ndarray | Iterable[bool]
              ) -> tuple[np.ndarray, np.ndarray]:
    """Return (distances as float64, genuine as bool) after checking shape, size, classes, NaN."""
    d = np.asarray(distances, dtype=np.float64)
    g = _as_bool(genuine)
    if d.ndim != 1:
        raise ValueError(f"distances must be a 1-D array, got shape {d.shape}")
    if d.shape != g.shape:
        raise ValueError(f"distances and genuine differ in length ({d.size} vs {g.size})")
    if d.size == 0:
        raise ValueError("no pairs given: distances and genuine are empty")
    if not np.all(np.isfinite(d)):
        raise ValueError(f"distances contain {int(np.sum(~np.isfinite(d)))} NaN/inf value(s)")
    n_gen = int(g.sum())
    if n_gen == 0:
        raise ValueError("no genuine (same-identity) pairs: FRR/TAR are undefined")
    if n_gen == g.size:
        raise ValueError("no impostor (different-identity) pairs: FAR is undefined")
    return d, g


def _far_key(target: float) -> str:
    """1e-4 -> "1e-4", 0.015 -> "1.5e-2"."""
    mant, exp = f"{target:.6e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


# --------------------------------------------------------------------------- verification


def _roc_counts(d: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds, accepted impostors, accepted genuines) at every distinct distance, ascending."""
    order = np.argsort(d, kind="stable")
    ds, gs = d[order], g[order]
    # last index of each run of equal distances: accepting "<= t" takes the whole tie group
    last = np.flatnonzero(np.r_[ds[1:] != ds[:-1], True])
    tp = np.cumsum(gs)[last]
    fp = (last + 1) - tp
    return ds[last], fp, tp


def roc(distances: np.ndarray, genuine: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve: (far, tar, thresholds), one point per distinct distance, thresholds ascending.

    Point k is the operating point "accept if distance <= thresholds[k]"; tied distances are
    accepted together, so a tie between genuine and impostor pairs yields a single diagonal step.
    A first point (far=0, tar=0) with threshold ``-inf`` (accept nothing) is prepended, so the
    curve runs from (0, 0) to (1, 1). Sorting once makes this O(n log n).
    """
    d, g = _validate(distances, genuine)
    thr, fp, tp = _roc_counts(d, g)
    n_gen = int(g.sum())
    n_imp = g.size - n_gen
    far = np.r_[0.0, fp / n_imp]
    tar = np.r_[0.0, tp / n_gen]
    return far, tar, np.r_[-np.inf, thr]


def auc(distances: np.ndarray, genuine: np.ndarray) -> float:
    """Area under the ROC curve (trapezoidal rule over :func:`roc`).

    Equals P(d_genuine < d_impostor) + 0.5 * P(tie), i.e. sklearn's
    ``roc_auc_score(genuine, -distances)``.
    """
    d, g = _validate(distances, genuine)
    _, fp, tp = _roc_counts(d, g)
    fp, tp = np.r_[0, fp], np.r_[0, tp]
    n_gen = int(g.sum())
    twice_area = int(np.sum(np.diff(fp) * (tp[1:] + tp[:-1])))  # exact integer trapezoid sum
    return twice_area / (2 * n_gen * (g.size - n_gen))


def eer(distances: np.ndarray, genuine: np.ndarray) -> tuple[float, float]:
    """Equal error rate and its threshold: (eer, threshold).

    Method: walk the ROC points in ascending threshold order; FAR rises from 0 to 1 and
    FRR = 1 - TAR falls from 1 to 0. Take the first point k where FRR - FAR <= 0 and the point
    k-1 before it (FRR - FAR > 0), and intersect the straight segment joining them in (FAR, FRR)
    space with the line FAR = FRR. With ``a = delta[k-1] / (delta[k-1] - delta[k])`` (delta =
    FRR - FAR), EER = FAR[k-1] + a (FAR[k] - FAR[k-1]) and the threshold is interpolated the same
    way between the two thresholds (or is threshold[k] when k-1 is the "accept nothing" point).

    If FAR == FRR exactly at point k, every threshold in [t_k, t_{k+1}) attains it, and the
    midpoint of that interval is returned; in particular a perfectly separated set gives
    ``(0.0, (max genuine distance + min impostor distance) / 2)``.

    The EER lies in [0, 1]; it exceeds 0.5 only for a worse-than-chance (inverted) scorer.
    """
    d, g = _validate(distances, genuine)
    thr, fp, tp = _roc_counts(d, g)
    n_gen = int(g.sum())
    n_imp = g.size - n_gen
    thr, fp, tp = np.r_[-np.inf, thr], np.r_[0, fp], np.r_[0, tp]
    far = fp / n_imp
    # (FRR - FAR) * n_gen * n_imp in exact integers: +n_gen*n_imp at -inf, -n_gen*n_imp at the end
    delta = (n_gen - tp) * n_imp - fp * n_gen
    k = int(np.argmax(delta <= 0))
    if delta[k] == 0:
        t = thr[k] if k + 1 == thr.size else (thr[k] + thr[k + 1]) / 2.0
        return float(far[k]), float(t)
    a = delta[k - 1] / (delta[k - 1] - delta[k])
    rate = far[k - 1] + a * (far[k] - far[k - 1])
    t = thr[k] if k == 1 else thr[k - 1] + a * (thr[k] - thr[k - 1])
    return float(rate), float(t)


def far_frr(distances: np.ndarray, genuine: np.ndarray, threshold: float) -> tuple[float, float]:
    """(FAR, FRR) at one threshold, accepting pairs with distance <= threshold."""
    d, g = _validate(distances, genuine)
    accept = d <= threshold
    return float(accept[~g].mean()), float((~accept[g]).mean())


def tar_at_far(distances: np.ndarray, genuine: np.ndarray,
               targets: Iterable[float] = DEFAULT_FAR_TARGETS) -> dict[str, float]:
    """TAR at fixed FAR targets, e.g. ``{"1e-4": tar, "1e-3": tar, "1e-2": tar}``.

    Conservative: for each target, the largest ROC threshold whose empirical FAR <= target is
    used (no interpolation), and the TAR there is reported. When there are too few impostor
    pairs to resolve the target (n_impostor * target < 1) the only admissible operating point is
    FAR = 0, so the value reported is the TAR at the largest threshold accepting no impostor;
    it is still returned (not NaN) but is a lower bound rather than a measurement at the target.
    """
    d, g = _validate(distances, genuine)
    thr, fp, tp = _roc_counts(d, g)
    n_gen = int(g.sum())
    n_imp = g.size - n_gen
    fp = np.r_[0, fp]
    tar = np.r_[0.0, tp / n_gen]
    out: dict[str, float] = {}
    for target in targets:
        if not 0.0 <= target <= 1.0:
            raise ValueError(f"FAR target must be in [0, 1], got {target}")
        allowed = np.floor(target * n_imp + 1e-9)  # tolerate 0.29 * 100 = 28.999...
        k = int(np.searchsorted(fp, allowed, side="right")) - 1
        out[_far_key(target)] = float(tar[k])
    return out


def best_accuracy_threshold(distances: np.ndarray, genuine: np.ndarray) -> tuple[float, float]:
    """(threshold, accuracy) maximising verification accuracy on the given pairs.

    Candidates are the midpoints between consecutive sorted distinct distances (the LFW
    protocol); with a single distinct distance that distance is the only candidate. Accuracy
    is (accepted genuine + rejected impostor) / all pairs. Ties go to the smallest threshold.
    """
    d, g = _validate(distances, genuine)
    thr, fp, tp = _roc_counts(d, g)
    n_imp = g.size - int(g.sum())
    if thr.size == 1:
        return float(thr[0]), float(g.mean())
    correct = tp[:-1] + (n_imp - fp[:-1])  # threshold between thr[i] and thr[i+1]
    i = int(np.argmax(correct))
    return float((thr[i] + thr[i + 1]) / 2.0), float(correct[i] / g.size)


def kfold_accuracy(distances: np.ndarray, genuine: np.ndarray,
                   folds: np.ndarray) -> tuple[float, float]:
    """LFW-protocol verification accuracy: (mean, std) over folds.

    For each fold the threshold is chosen by :func:`best_accuracy_threshold` on all *other*
    folds and the accuracy of that threshold is measured on the held-out fold. ``std`` is the
    population standard deviation (ddof=0, numpy's default) of the per-fold accuracies.
    """
    d, g = _validate(distances, genuine)
    f = np.asarray(folds)
    if f.shape != d.shape:
        raise ValueError(f"folds and distances differ in length ({f.size} vs {d.size})")
    if not np.issubdtype(f.dtype, np.integer):
        raise ValueError(f"folds must be integers, got dtype {f.dtype}")
    labels = np.unique(f)
    if labels.size < 2:
        raise ValueError("k-fold evaluation needs at least 2 distinct folds")
    accs = np.empty(labels.size)
    for n, label in enumerate(labels):
        test = f == label
        try:
            t, _ = best_accuracy_threshold(d[~test], g[~test])
        except ValueError as e:
            raise ValueError(f"training folds for held-out fold {label}: {e}") from None
        accs[n] = np.mean((d[test] <= t) == g[test])
    return float(accs.mean()), float(accs.std())


# --------------------------------------------------------------------------- pairs


def all_pairs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All unordered pairs i < j of samples: (i_idx, j_idx, genuine = ids[i] == ids[j])."""
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be a 1-D array, got shape {ids.shape}")
    if ids.size < 2:
        raise ValueError(f"need at least 2 samples to form pairs, got {ids.size}")
    i, j = np.triu_indices(ids.size, k=1)
    return i, j, ids[i] == ids[j]


def pair_distances(emb: np.ndarray, i: np.ndarray, j: np.ndarray,
                   chunk: int = 65536) -> np.ndarray:
    """Euclidean distances ||emb[i] - emb[j]|| for each index pair (computed in chunks)."""
    e = np.asarray(emb, dtype=np.float64)
    i, j = np.asarray(i), np.asarray(j)
    if e.ndim != 2:
        raise ValueError(f"embeddings must be 2-D (n, dim), got shape {e.shape}")
    if i.shape != j.shape or i.ndim != 1:
        raise ValueError(f"index arrays must be 1-D and equal length, got {i.shape} and {j.shape}")
    out = np.empty(i.size)
    for s in range(0, i.size, chunk):
        diff = e[i[s:s + chunk]] - e[j[s:s + chunk]]
        out[s:s + chunk] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return out


# --------------------------------------------------------------------------- identification


def _check_emb(emb: np.ndarray, ids: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    e = np.asarray(emb, dtype=np.float64)
    ids = np.asarray(ids)
    if e.ndim != 2:
        raise ValueError(f"{name} embeddings must be 2-D (n, dim), got shape {e.shape}")
    if ids.ndim != 1 or ids.size != e.shape[0]:
        raise ValueError(f"{name} ids must be 1-D with one id per embedding "
                         f"({ids.size} ids for {e.shape[0]} embeddings)")
    if e.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(e)):
        raise ValueError(f"{name} embeddings contain NaN/inf values")
    return e, ids


def _sq_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distance matrix (a_rows x b_rows)."""
    return (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T


def rank1(gallery_emb: np.ndarray, gallery_ids: np.ndarray,
          probe_emb: np.ndarray, probe_ids: np.ndarray, chunk: int = 2048) -> float:
    """Closed-set rank-1 identification rate.

    Each probe is assigned the id of its nearest gallery embedding (Euclidean distance; on an
    exact tie the first gallery entry wins); the rate is the fraction of probes whose assigned
    id equals their true id.
    """
    ge, gi = _check_emb(gallery_emb, gallery_ids, "gallery")
    pe, pi = _check_emb(probe_emb, probe_ids, "probe")
    if ge.shape[1] != pe.shape[1]:
        raise ValueError(f"gallery and probe dimensions differ ({ge.shape[1]} vs {pe.shape[1]})")
    hits = 0
    for s in range(0, pe.shape[0], chunk):
        nearest = np.argmin(_sq_dist(pe[s:s + chunk], ge), axis=1)
        hits += int(np.sum(gi[nearest] == pi[s:s + chunk]))
    return hits / pe.shape[0]


def rank1_leave_one_out(emb: np.ndarray, ids: np.ndarray, chunk: int = 2048) -> float:
    """Rank-1 rate with every sample used as a probe against all the others (ORL style).

    Samples whose identity has no other sample cannot be identified in a closed set and are
    left out of the denominator; a ValueError is raised when no identity has 2+ samples.
    """
    e, ids = _check_emb(emb, ids, "embedding set")
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    usable = counts[inverse] >= 2
    if not usable.any():
        raise ValueError("leave-one-out rank-1 needs at least one identity with 2+ samples")
    hits = 0
    for s in range(0, e.shape[0], chunk):
        dist = _sq_dist(e[s:s + chunk], e)
        rows = np.arange(dist.shape[0])
        dist[rows, rows + s] = np.inf  # exclude the probe itself
        nearest = np.argmin(dist, axis=1)
        ok = ids[nearest] == ids[s:s + chunk]
        hits += int(np.sum(ok & usable[s:s + chunk]))
    return hits / int(usable.sum())


def tpir_at_fpir(mated_best: np.ndarray, mated_correct: np.ndarray, nonmated_best: np.ndarray,
                 targets: Iterable[float] = (1e-2, 1e-3)) -> dict[str, dict[str, float]]:
    """Open-set identification (ISO/IEC 19795-1): TPIR at fixed FPIR targets, on **similarity** scores.

    Each probe's answer is its top-1 gallery entry if its best score exceeds a threshold, else reject.
    For each target f the threshold v is the lowest with FPIR = |{non-mated best > v}| / n ≤ f (conservative,
    no interpolation; ties at v are rejected); TPIR = |{mated: top-1 correct and best > v}| / m. Returns
    ``{"1e-2": {"tpir": …, "fpir": achieved FPIR, "threshold": v}, …}``.
    """
    mb = np.asarray(mated_best, dtype=np.float64)
    ok = _as_bool(mated_correct, "mated_correct")
    nb = np.sort(np.asarray(nonmated_best, dtype=np.float64))[::-1]
    if mb.size == 0 or mb.shape != ok.shape or nb.size == 0:
        raise ValueError("need one best score and one correctness flag per mated probe, and non-mated probes")
    if not (np.all(np.isfinite(mb)) and np.all(np.isfinite(nb))):
        raise ValueError("scores must be finite")
    out = {}
    for f in targets:
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"FPIR target must be in [0, 1], got {f}")
        allowed = int(np.floor(f * nb.size + 1e-9))
        v = -np.inf if allowed >= nb.size else float(nb[allowed])
        out[_far_key(f)] = {"tpir": float(np.mean(ok & (mb > v))), "fpir": float(np.mean(nb > v)),
                            "threshold": None if v == -np.inf else v}
    return out


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class VerificationResult:
    """Headline verification metrics for one set of scored pairs (see :func:`summarize`)."""

    eer: float
    eer_threshold: float
    auc: float
    tar_at_far: dict[str, float] = field(default_factory=dict)
    genuine_pairs: int = 0
    impostor_pairs: int = 0

    def to_dict(self) -> dict[str, object]:
        """Plain-Python dict (JSON-serialisable), tar_at_far copied."""
        return {
            "eer": self.eer,
            "eer_threshold": self.eer_threshold,
            "auc": self.auc,
            "tar_at_far": dict(self.tar_at_far),
            "genuine_pairs": self.genuine_pairs,
            "impostor_pairs": self.impostor_pairs,
        }


def summarize(distances: np.ndarray, genuine: np.ndarray,
              targets: Iterable[float] = DEFAULT_FAR_TARGETS) -> VerificationResult:
    """EER (+threshold), AUC, TAR@FAR and pair counts for one set of scored pairs."""
    d, g = _validate(distances, genuine)
    rate, thr = eer(d, g)
    n_gen = int(g.sum())
    return VerificationResult(
        eer=rate, eer_threshold=thr, auc=auc(d, g), tar_at_far=tar_at_far(d, g, targets),
        genuine_pairs=n_gen, impostor_pairs=int(g.size - n_gen),
    )
