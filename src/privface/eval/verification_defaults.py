"""The two per-backend values of ``faces.thresholds`` that are not the shared operating point: kolberg's NTRU
threshold and the norm range of im2020's §VII template check.

``python -m privface.eval.verification_defaults orl --backend sface`` embeds ORL (through the embedding cache) and
prints, over all its pairs (1 800 genuine, 78 000 impostor):

- ``ntru``: the plaintext EER threshold of the Hamming distance of the LSSC templates with ``LSSC_EDGES`` (seed
  002 §2.1), floored — the procedure of dlib-resnet128's shipped 44;
- ``template_norm_range``: the range of ‖Γ/scale‖ of the ×128-quantized embeddings, which the entry's
  ``norm_range`` must hold with a margin.

The shared operating point itself (distance, cosine) is ``default_tau --verification``'s, on the held-out LFW
identities. ORL is disjoint from LFW.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ..faces.registry import make_backend
from ..protocols.kolberg import KolbergParams, plaintext_distance, protect
from ..templates import IM2020_SCALE, quantize
from . import metrics
from .datasets import load
from .embed import embed_paths


def compute(dataset: str, spec: dict, data_root: str | None = None) -> dict:
    """{"ntru", "ntru_eer", "template_norm_range", "source"} for ``spec``'s backend on ``dataset``."""
    ds = load(dataset, data_root)
    which = ds.meta.get("face", "largest")
    emb = embed_paths(ds.paths, spec, which=which)
    keep = np.flatnonzero(emb.found)
    x = emb.vectors[keep].astype(np.float64)
    i, j, genuine = metrics.all_pairs(np.asarray(ds.ids)[keep])
    norms = np.linalg.norm(quantize(x, IM2020_SCALE) / IM2020_SCALE, axis=1)
    p = KolbergParams(scheme="ntru", dims=x.shape[1])
    t = np.array([protect(p, r) for r in x])
    ham = np.array([plaintext_distance(p, t[a], t[b]) for a, b in zip(i, j)], dtype=np.float64)
    eer, thr = metrics.eer(ham, genuine)
    return {"ntru": int(np.floor(thr)), "ntru_eer": round(float(eer), 6),
            "template_norm_range": [round(float(norms.min()), 4), round(float(norms.max()), 4)],
            "source": {"dataset": ds.name, "images": int(keep.size), "undetected": emb.undetected,
                       "genuine_pairs": int(genuine.sum()), "impostor_pairs": int((~genuine).sum()),
                       "face": which, "backend_options": make_backend(**spec).options(),
                       "command": f"python -m privface.eval.verification_defaults {dataset} "
                                  f"--backend {spec['name']}"}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", help="orl, or a folder with one sub-folder per identity")
    ap.add_argument("--backend", default="dlib-resnet128")
    ap.add_argument("--data-root")
    a = ap.parse_args(argv)
    print(json.dumps(compute(a.dataset, {"name": a.backend}, a.data_root)))


if __name__ == "__main__":
    main()
