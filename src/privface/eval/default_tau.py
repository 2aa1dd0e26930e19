"""Make the shipped default 1:N thresholds τ (``scale/default_tau.json``) on data no evaluation uses.

``python -m privface.eval.default_tau`` embeds the LFW identities held out of every LFW evaluation
(``datasets.lfw_calibration``, about 20 % of the people) and, per 1:N scheme and idface setting, sets τ
so that at most ``TARGET_FPIR`` of non-mated searches are accepted. Each held-out identity's first image with
a face is enrolled; every image of every held-out identity is searched against that gallery **without its own
identity** (a non-mated search, seed 003 §5.2's open-set rule: accept iff the best score ≥ τ), and against the
full gallery for the calibration TPIR. Scores are the ones S_key decides on: the cosine for hers and cryptomask
(seed 001 §3.4 quantises it, a shift below 1e-4), the integer ⟨T_α(x), T_β(y)⟩ for idface after its centring
and lift. ``TARGET_FPIR`` lies below the 1e-2 goal: FPIR grows with the gallery (the evaluation's is larger).
LFW files a few photos under two names; such a pair is a non-mated search every model accepts, so the images of
each are dropped first (``duplicates``: a pixel rule, the same for every backend; ``source.dropped_duplicates``).
A setting whose τ accepts (almost) no mated search either (``MIN_TPIR``) gets no default: it must be given τ.

``--verification`` measures the 1:1 default of ``faces.thresholds`` on the same identities (``verification``):
a 1:1 threshold, from which the protocols' 1:1 defaults derive; the 1:N τ here is chosen for a gallery-wide FPIR
and so is stricter (dlib: cosine 0.9557 against the 1:1 default's 0.9272).
"""
from __future__ import annotations

import argparse
import json
from importlib import resources

import numpy as np

from ..faces.registry import make_backend
from .datasets import CALIBRATION_BYTE, Dataset, load_identification
from .duplicates import MIN_CORRELATION, SIZE, cross_identity_duplicates
from .embed import embed_paths
from .identify_eval import _unit

TARGET_FPIR = 3e-3
MIN_TPIR = 0.01
FILE = "default_tau.json"


def calibration_set(data_root: str | None = None) -> tuple[Dataset, list[dict]]:
    """The held-out LFW identities without their cross-identity duplicate photos, and the pairs dropped."""
    ds = load_identification("lfw", data_root, part="calibration")
    pairs = cross_identity_duplicates(ds.paths, ds.ids)
    drop = {k for i, j, _ in pairs for k in (i, j)}
    keep = [k for k in range(len(ds.paths)) if k not in drop]
    dropped = [{"images": [ds.paths[i].name, ds.paths[j].name], "correlation": c} for i, j, c in pairs]
    return Dataset(ds.name, [ds.paths[k] for k in keep], np.asarray(ds.ids)[keep], meta=ds.meta), dropped


def _dropped_source(dropped: list[dict]) -> dict:
    return {"dropped_duplicates": dropped,
            "duplicate_rule": f"different identities, grey {SIZE}×{SIZE} thumbnails correlate ≥ {MIN_CORRELATION}: "
                              "both images dropped (eval.duplicates)"}


def threshold(nonmated_best: np.ndarray, target: float, step: float) -> float:
    """The smallest τ on the grid of ``step`` with #(best ≥ τ) ≤ ⌊target·n⌋."""
    desc = np.sort(np.asarray(nonmated_best, dtype=np.float64))[::-1]
    k = int(np.floor(target * desc.size))
    return float((np.floor(desc[k] / step) + 1) * step) if k < desc.size else float(desc[-1])


def _rates(scores: np.ndarray, own: np.ndarray, mated: np.ndarray, hit_col: np.ndarray, tau: float):
    """(FPIR, TPIR) at ``tau``: non-mated = every search with its own identity's column removed; mated = the
    searches ``mated`` (not a gallery image), a hit when the best column is ``hit_col`` and reaches τ."""
    fpir = float((np.where(own, -np.inf, scores).max(axis=1) >= tau).mean())
    best = scores[mated].argmax(axis=1)
    hit = (best == hit_col[mated]) & (scores[mated].max(axis=1) >= tau)
    return fpir, float(hit.mean())


def calibrate(spec: dict, data_root: str | None = None, target: float = TARGET_FPIR) -> dict:
    """{"source": provenance, "tau": {key: {"tau", "fpir_calibration", "tpir_calibration"}}} for ``spec``."""
    from ..protocols.idface.centring import shipped_mean
    from ..protocols.idface.params import PARAMETER_SETS, IDFaceParams
    from ..scale.default_tau import idface_key

    backend = spec.get("name", "dlib-resnet128")
    ds, dropped = calibration_set(data_root)
    emb = embed_paths(ds.paths, spec, which="center")
    ids = np.asarray(ds.ids).astype(str)
    rows = np.flatnonzero(emb.found)
    gallery: dict[str, int] = {}
    for r in rows:
        gallery.setdefault(ids[r], int(r))
    g = np.array(sorted(gallery.values()))
    x = _unit(np.nan_to_num(emb.vectors, nan=1.0))
    own = ids[rows][:, None] == ids[g][None, :]  # each search's own identity column
    mated = ~np.isin(rows, g)                     # searches by an image that is not itself enrolled
    hit_col = own.argmax(axis=1)
    out: dict[str, dict] = {}

    def add(key: str, scores: np.ndarray, step: float) -> None:
        tau = threshold(np.where(own, -np.inf, scores).max(axis=1), target, step)
        fpir, tpir = _rates(scores, own, mated, hit_col, tau)
        if tpir < MIN_TPIR:
            return
        out[key] = {"tau": round(tau, 6), "fpir_calibration": round(fpir, 6), "tpir_calibration": round(tpir, 6)}

    cos = x[rows] @ x[g].T
    add("hers", cos, 1e-4)
    add("cryptomask", cos, 1e-4)
    dim = x.shape[1]
    mean = shipped_mean(backend)
    for centring in ("none", "shipped"):
        for lift in (None, 1024, 2048):
            width = lift or dim
            if width not in PARAMETER_SETS:
                continue
            for beta in PARAMETER_SETS[width][1]:
                p = IDFaceParams.for_dim(dim, beta, mean if centring == "shipped" else None, lift)
                z = (p.query_transform(x[rows]).astype(np.int64) @ p.enrol_transform(x[g]).astype(np.int64).T)
                add(idface_key(centring, lift, beta), z.astype(np.float64), 1.0)
    source = {"dataset": "lfw (grey), identities held out of every LFW evaluation: first byte of SHA-256(name) "
                         f"< {CALIBRATION_BYTE}",
              "identities": int(g.size), "searches": int(rows.size), "mated_searches": int(mated.sum()),
              "undetected": emb.undetected, **_dropped_source(dropped),
              "target_fpir": target, "face": "center", "backend_options": make_backend(**spec).options(),
              "command": "python -m privface.eval.default_tau"}
    return {"dim": dim, "source": source, "tau": out}


def verification(spec: dict, data_root: str | None = None, target: float | None = None) -> dict:
    """The 1:1 default of ``faces.thresholds`` for ``spec``, measured on the same held-out LFW identities over
    every pair of their images with a face (genuine: one identity): the largest distance on a 0.01 grid and the
    smallest cosine on a 1e-4 grid whose false-accept rate is at most ``target`` (``VERIFICATION_TARGET``), each
    with its FAR and FRR, and the distance's EER and EER threshold for comparison."""
    from ..faces.thresholds import VERIFICATION_TARGET
    from . import metrics

    target = VERIFICATION_TARGET if target is None else target
    ds, dropped = calibration_set(data_root)
    emb = embed_paths(ds.paths, spec, which="center")
    rows = np.flatnonzero(emb.found)
    ids = np.asarray(ds.ids).astype(str)[rows]
    i, j, genuine = metrics.all_pairs(ids)
    x = emb.vectors[rows].astype(np.float64)
    sq = (x * x).sum(axis=1)
    gram = x @ x.T  # ~2.7 M pairs of ~2 300 images: no pairs × dim copy
    d = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * gram, 0))[i, j]
    cos = (gram / np.sqrt(np.outer(sq, sq)))[i, j]
    k = int(np.floor(target * int((~genuine).sum())))  # at most k impostor pairs accepted
    imp_d, imp_c = np.sort(d[~genuine]), np.sort(cos[~genuine])[::-1]
    t = float(np.floor(imp_d[k] * 100) / 100)
    while (imp_d <= t).sum() > k:
        t = round(t - 0.01, 2)
    c = float(np.ceil(imp_c[k] * 1e4) / 1e4)
    while (imp_c >= c).sum() > k:
        c = round(c + 1e-4, 4)
    far, frr = metrics.far_frr(d, genuine, t)
    eer, eer_t = metrics.eer(d, genuine)
    return {"distance": t, "distance_far": round(far, 6), "distance_frr": round(frr, 6),
            "cosine": c, "cosine_far": round(float((cos[~genuine] >= c).mean()), 6),
            "cosine_frr": round(float((cos[genuine] < c).mean()), 6),
            "target_far": target, "eer": round(eer, 6), "eer_threshold": round(eer_t, 4),
            "genuine_pairs": int(genuine.sum()), "impostor_pairs": int((~genuine).sum()),
            "identities": int(np.unique(ids).size), "norm_median": round(float(np.median(np.sqrt(sq))), 4),
            **_dropped_source(dropped),
            "command": "python -m privface.eval.default_tau --verification"}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="dlib-resnet128")
    ap.add_argument("--data-root")
    ap.add_argument("--verification", action="store_true",
                    help="print the 1:1 default distance threshold for faces.thresholds (writes nothing)")
    a = ap.parse_args(argv)
    if a.verification:
        print(json.dumps(verification({"name": a.backend}, a.data_root)))
        return
    target = resources.files("privface.scale").joinpath(FILE)
    doc = json.loads(target.read_text()) if target.is_file() else {"backends": {}}
    doc["backends"][a.backend] = calibrate({"name": a.backend}, a.data_root)
    target.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["backends"][a.backend]["tau"]))


if __name__ == "__main__":
    main()
