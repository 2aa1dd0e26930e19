"""Make the shipped IDFace centring mean (``protocols/idface/centring_mean.json``) from a public dataset.

``python -m privface.eval.centring_mean orl`` embeds ORL with dlib-resnet128 (through the embedding cache) and
writes μ = mean of the unit-normalised embeddings with its provenance. ORL (Olivetti Research Laboratory,
40 subjects) is disjoint from LFW, the identification evaluation set, so the LFW figures do not use their own
statistics.
"""
from __future__ import annotations

import argparse
import json
from importlib import resources

import numpy as np

from ..faces.registry import make_backend
from ..protocols.idface.centring import MEANS_FILE, mean_of
from .datasets import load
from .embed import embed_paths


def compute(dataset: str, spec: dict, data_root: str | None = None) -> dict:
    """{"mean": [...], provenance…} for ``spec``'s backend on ``dataset``."""
    ds = load(dataset, data_root)
    which = ds.meta.get("face", "largest")
    emb = embed_paths(ds.paths, spec, which=which)
    mu = mean_of(emb.vectors[emb.found])
    return {"dataset": ds.name, "images": int(emb.found.sum()), "subjects": ds.subjects,
            "undetected": emb.undetected, "face": which, "backend_options": make_backend(**spec).options(),
            "mean_norm": round(float(np.linalg.norm(mu)), 6),
            "command": f"python -m privface.eval.centring_mean {dataset}",
            "mean": [round(float(v), 8) for v in mu]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", help="orl, or a folder with one sub-folder per identity")
    ap.add_argument("--backend", default="dlib-resnet128")
    ap.add_argument("--data-root")
    a = ap.parse_args(argv)
    target = resources.files("privface.protocols.idface").joinpath(MEANS_FILE)
    doc = json.loads(target.read_text()) if target.is_file() else {"means": {}}
    doc["means"][a.backend] = compute(a.dataset, {"name": a.backend}, a.data_root)
    target.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v for k, v in doc["means"][a.backend].items() if k != "mean"}))


if __name__ == "__main__":
    main()
