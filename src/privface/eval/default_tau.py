"""Make the shipped default 1:N thresholds τ (``scale/default_tau.json``) on data no evaluation uses.

``python -m privface.eval.default_tau`` embeds the LFW identities held out of every LFW evaluation
(``datasets.lfw_calibration``, about 20 % of the people) and, per 1:N scheme and idface setting, sets τ
so that at most ``TARGET_FPIR`` of non-mated searches are accepted. Each held-out identity's first image with
a face is enrolled; every image of every held-out identity is searched against that gallery **without its own
identity** (a non-mated search, seed 003 §5.2's open-set rule: accept iff the best score ≥ τ), and against the
full gallery for the calibration TPIR. Scores are the ones S_key decides on: the cosine for hers and cryptomask
(seed 001 §3.4 quantises it, a shift below 1e-4), the integer ⟨T_α(x), T_β(y)⟩ for idface after its centring
and lift. ``TARGET_FPIR`` lies below the 1e-2 goal: FPIR grows with the gallery (the evaluation's is larger),
and LFW's few mislabelled duplicates (one photo under two names) sit at the top of the non-mated scores.
A setting whose τ accepts (almost) no mated search either (``MIN_TPIR``) gets no default: it must be given τ.
"""
from __future__ import annotations

import argparse
import json
from importlib import resources

import numpy as np

from ..faces.registry import make_backend
from .datasets import CALIBRATION_BYTE, load_identification
from .embed import embed_paths
from .identify_eval import _unit

TARGET_FPIR = 3e-3
MIN_TPIR = 0.01
FILE = "default_tau.json"


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
    ds = load_identification("lfw", data_root, part="calibration")
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
              "undetected": emb.undetected,
              "target_fpir": target, "face": "center", "backend_options": make_backend(**spec).options(),
              "command": "python -m privface.eval.default_tau"}
    return {"dim": dim, "source": source, "tau": out}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="dlib-resnet128")
    ap.add_argument("--data-root")
    a = ap.parse_args(argv)
    target = resources.files("privface.scale").joinpath(FILE)
    doc = json.loads(target.read_text()) if target.is_file() else {"backends": {}}
    doc["backends"][a.backend] = calibrate({"name": a.backend}, a.data_root)
    target.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["backends"][a.backend]["tau"]))


if __name__ == "__main__":
    main()
