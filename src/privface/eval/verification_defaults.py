"""Make a backend's 1:1 default thresholds (``verification_defaults.json``) the way dlib-resnet128's were made.

``python -m privface.eval.verification_defaults orl --backend sface`` embeds ORL (through the embedding cache)
and, over all its pairs (1 800 genuine, 78 000 impostor), takes the plaintext EER threshold of each template
the protocols decide on — the procedure behind dlib's shipped values, which this command reproduces:

- ``threshold``: Euclidean distance of the embeddings (`privface compare`, ``Backend.threshold``);
- ``im2020_tau``: squared distance of the ×``im2020_scale`` templates, ⌊EER threshold⌋ (seed 000 §IV-B.2;
  dlib 4777, ``threshold_quantized`` of ``privface eval``), with the range of ‖Γ/scale‖ that §VII's trusted-party
  template check (``im2020.parties.NORM_RANGE``) must admit;
- ``gsm_cos_threshold``: T′ on the cosine of m-bit fixed-norm templates, m = 16 and 8 (seed 004 §2,
  ``gsm_eval.cosine_threshold``; dlib 0.9277);
- ``kolberg``: CKKS squared distance (dlib 0.2935), BFV squared distance of ⌊128·x⌋ (= im2020_tau), NTRU Hamming
  distance of the LSSC templates with ``LSSC_EDGES`` (seed 002 §2.1; dlib 44), with the embedding's coordinate
  quartiles that the LSSC edges are meant to match.

ORL is disjoint from LFW, where the 1:N thresholds are set (``default_tau``) and the evaluations run.
"""
from __future__ import annotations

import argparse
import json
from importlib import resources

import numpy as np

from ..faces.registry import make_backend
from ..protocols.kolberg import KolbergParams, plaintext_distance, protect
from ..templates import quantize
from . import metrics
from .datasets import load
from .embed import embed_paths
from .gsm_eval import cosine_threshold, gsm_templates

FILE = "verification_defaults.json"
IM2020_SCALE = 128


def _sq(a: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    d = a[i].astype(np.float64) - a[j].astype(np.float64)
    return (d * d).sum(axis=1)


def compute(dataset: str, spec: dict, data_root: str | None = None) -> dict:
    """{thresholds…, "source": provenance} for ``spec``'s backend on ``dataset`` (all pairs of found faces)."""
    ds = load(dataset, data_root)
    which = ds.meta.get("face", "largest")
    emb = embed_paths(ds.paths, spec, which=which)
    keep = np.flatnonzero(emb.found)
    x = emb.vectors[keep].astype(np.float64)
    ids = np.asarray(ds.ids)[keep]
    i, j, genuine = metrics.all_pairs(ids)
    eer, thr = metrics.eer(np.sqrt(_sq(x, i, j)), genuine)
    q = quantize(x, IM2020_SCALE)
    eer_q, thr_q = metrics.eer(_sq(q, i, j), genuine)
    norms = np.linalg.norm(q / IM2020_SCALE, axis=1)
    found = np.ones(len(x), bool)
    gsm = {f"m={m}": cosine_threshold(gsm_templates(x, found, m), found, i, j, genuine, m) for m in (16, 8)}
    kolberg = {"ckks": round(float(metrics.eer(_sq(x, i, j), genuine)[1]), 6), "bfv": int(np.floor(thr_q))}
    p = KolbergParams(scheme="ntru", dims=x.shape[1])
    t = np.array([protect(p, r) for r in x])
    ham = np.array([plaintext_distance(p, t[a], t[b]) for a, b in zip(i, j)], dtype=np.float64)
    eer_ntru, thr_ntru = metrics.eer(ham, genuine)
    kolberg["ntru"] = int(np.floor(thr_ntru))
    return {
        "threshold": round(float(thr), 6), "eer": round(float(eer), 6),
        "im2020_scale": IM2020_SCALE, "im2020_tau": int(np.floor(thr_q)),
        "im2020_eer_quantized": round(float(eer_q), 6),
        "im2020_template_norm_range": [round(float(norms.min()), 4), round(float(norms.max()), 4)],
        "gsm_cos_threshold": gsm,
        "kolberg": kolberg, "kolberg_ntru_eer": round(float(eer_ntru), 6),
        "coordinate_quartiles": [round(float(v), 4) for v in np.quantile(x, [0.25, 0.5, 0.75])],
        "source": {"dataset": ds.name, "images": int(keep.size), "undetected": emb.undetected,
                   "genuine_pairs": int(genuine.sum()), "impostor_pairs": int((~genuine).sum()), "face": which,
                   "backend_options": make_backend(**spec).options(),
                   "command": f"python -m privface.eval.verification_defaults {dataset} --backend {spec['name']}"},
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", help="orl, or a folder with one sub-folder per identity")
    ap.add_argument("--backend", default="dlib-resnet128")
    ap.add_argument("--data-root")
    a = ap.parse_args(argv)
    target = resources.files("privface.eval").joinpath(FILE)
    doc = json.loads(target.read_text()) if target.is_file() else {"backends": {}}
    doc["backends"][a.backend] = compute(a.dataset, {"name": a.backend}, a.data_root)
    target.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["backends"][a.backend]))


if __name__ == "__main__":
    main()
