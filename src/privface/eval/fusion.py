"""How to fuse several photos of one identity into one template (issue 37 item 1): measured, not assumed.

For every identity of a dataset with at least ``photos`` + 1 images, ``photos`` of them are enrolled and the rest
probe, over ``splits`` rotations of which images are enrolled. Fusions compared (``FUSIONS``): ``single`` (the first
photo only), ``mean`` (the normalised mean of the unit embeddings), ``medoid`` (the photo with the largest summed
cosine to the others). Figures per fusion: closed-set rank-1 of the mated probes, the EER of (probe, template)
cosines (mated against non-mated), and open-set TPIR at FPIR 1e-2 with the gallery's other identities as the
non-mated ones (leave-one-identity-out: a probe's own template is removed to make it non-mated).

    python -m privface.eval.fusion --dataset orl --photos 3 --json
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from . import metrics
from .datasets import load
from .embed import embed_paths

FUSIONS = ("single", "mean", "medoid")


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def fuse(rows: np.ndarray, how: str) -> np.ndarray:
    """One unit template from the (k, d) unit embeddings of one identity."""
    if how == "single":
        return rows[0]
    if how == "mean":
        return _unit(rows.mean(axis=0))
    if how == "medoid":
        return rows[int(np.argmax((rows @ rows.T).sum(axis=1)))]
    raise ValueError(f"fusion {how!r}: one of {FUSIONS}")


def evaluate(dataset: str = "orl", photos: int = 3, splits: int = 3, spec: dict | None = None,
             root=None, progress: bool = False) -> dict:
    ds = load(dataset, root)
    emb = embed_paths(ds.paths, spec or {}, progress=progress)
    x, ids = _unit(np.nan_to_num(emb.vectors, nan=1.0)), np.asarray(ds.ids).astype(str)
    people = [p for p in dict.fromkeys(ids) if np.sum((ids == p) & emb.found) > photos]
    out: dict = {"dataset": dataset, "photos": photos, "splits": splits, "identities": len(people),
                 "undetected": int(emb.undetected)}
    for how in FUSIONS:
        rank1, eers, tpirs = [], [], []
        for split in range(splits):
            templates, probes, owner = [], [], []
            for k, p in enumerate(people):
                rows = np.flatnonzero((ids == p) & emb.found)
                rows = np.roll(rows, -split * photos)
                templates.append(fuse(x[rows[:photos]], how))
                probes.extend(rows[photos:])
                owner.extend([k] * (len(rows) - photos))
            t, owner_a = np.stack(templates), np.asarray(owner)
            s = x[probes] @ t.T  # (probes, identities) cosines
            rank1.append(float(np.mean(np.argmax(s, axis=1) == owner_a)))
            mated = s[np.arange(len(owner_a)), owner_a]
            mask = np.ones_like(s, dtype=bool)
            mask[np.arange(len(owner_a)), owner_a] = False
            dist = 1 - np.r_[mated, s[mask]]
            eers.append(metrics.eer(dist, np.r_[np.ones(len(mated), bool), np.zeros(int(mask.sum()), bool)])[0])
            others = np.where(mask, s, -np.inf)
            best_other = others.max(axis=1)  # the probe's best score once its own identity is left out
            correct = np.argmax(s, axis=1) == owner_a
            at = metrics.tpir_at_fpir(s.max(axis=1), correct, best_other, [1e-2])
            tpirs.append(next(iter(at.values()))["tpir"])
        out[how] = {"rank1": round(float(np.mean(rank1)), 4), "eer": round(float(np.mean(eers)), 4),
                    "tpir_at_fpir_0.01": round(float(np.mean(tpirs)), 4)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="orl")
    p.add_argument("--photos", type=int, default=3)
    p.add_argument("--splits", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    result = evaluate(a.dataset, a.photos, a.splits, progress=not a.json)
    print(json.dumps(result) if a.json else json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
