"""What a template of one face pipeline does against a probe of another: the EER of mixed pairs.

``python -m privface.eval.mixed_backends orl --enrolled sface-lm68 --probe sface`` embeds the dataset with both
backends (through the embedding cache) and scores every ordered pair of distinct images (a, b) as the enrolled
backend's embedding of a against the probe backend's embedding of b — what an old record meets after the default
pipeline changed (issue 36: SFace's alignment moved from dlib's 68-point to its 5-point landmarks). It prints the
EER of those pairs and their FAR / FRR at the probe backend's shared default distance (``faces.thresholds``),
beside the same figures of each backend alone (all unordered pairs).
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ..faces.thresholds import default_threshold
from . import metrics
from .datasets import load
from .embed import embed_paths


def _figures(d: np.ndarray, genuine: np.ndarray, t: float | None) -> dict:
    eer, _ = metrics.eer(d, genuine)
    out = {"eer": round(float(eer), 6), "genuine_pairs": int(genuine.sum()), "impostor_pairs": int((~genuine).sum())}
    if t is not None:
        far, frr = metrics.far_frr(d, genuine, t)
        out.update(far_at_default=round(float(far), 6), frr_at_default=round(float(frr), 6))
    return out


def compute(dataset: str, enrolled: str, probe: str, data_root: str | None = None) -> dict:
    """{"mixed", enrolled, probe: figures} on every image both backends found a face in."""
    ds = load(dataset, data_root)
    which = ds.meta.get("face", "largest")
    a = embed_paths(ds.paths, {"name": enrolled}, which=which)
    b = embed_paths(ds.paths, {"name": probe}, which=which)
    keep = np.flatnonzero(a.found & b.found)
    ids = np.asarray(ds.ids)[keep]
    xa, xb = a.vectors[keep].astype(np.float64), b.vectors[keep].astype(np.float64)
    point = default_threshold(probe)
    t = None if point is None else point.distance
    i, j = np.nonzero(~np.eye(len(keep), dtype=bool))  # every ordered pair of distinct images
    mixed = np.linalg.norm(xa[i] - xb[j], axis=1)
    ui, uj, ug = metrics.all_pairs(ids)
    return {"dataset": ds.name, "images": int(keep.size), "enrolled": enrolled, "probe": probe,
            "mixed": _figures(mixed, ids[i] == ids[j], t),
            enrolled: _figures(np.linalg.norm(xa[ui] - xa[uj], axis=1), ug, t),
            probe: _figures(np.linalg.norm(xb[ui] - xb[uj], axis=1), ug, t),
            "default_distance": t,
            "command": f"python -m privface.eval.mixed_backends {dataset} --enrolled {enrolled} --probe {probe}"}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", help="orl, or a folder with one sub-folder per identity")
    ap.add_argument("--enrolled", default="sface-lm68")
    ap.add_argument("--probe", default="sface")
    ap.add_argument("--data-root")
    a = ap.parse_args(argv)
    print(json.dumps(compute(a.dataset, a.enrolled, a.probe, a.data_root)))


if __name__ == "__main__":
    main()
