"""Plaintext sweep behind the docs' idface LFW tables: rank-1 of ⟨T_α(x), T_β(y)⟩ (the answer the encrypted
IDFace run returns exactly, ``mismatches_transformed`` = 0) for centrings × (α, β), and the tight-frame lift.

``python -m privface.eval.idface_sweep [--probes 2000 | --probes 0] [--lift D …] [--pairs α,β …]`` — the same
split and seeded sample as ``privface eval --dataset lfw --protocol idface --probes N`` (``identify_eval.select``;
``--probes 0``: every probe, as the eval without ``--probes``); prints JSON lines. The lift
(``protocols.idface.lift``, shipped mean): for each D, (α, β) from ``--pairs`` (default: α = ⌊2D/3⌋ with
β ∈ {α, 511, 341, 255} ∩ [1, α]).
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ..protocols.idface import t_alpha
from ..protocols.idface.centring import centre, mean_of, shipped_mean
from ..protocols.idface.lift import LIFT_SEED, lift
from .datasets import load_identification
from .identify_eval import _unit, select

PAIRS = [(85, 15), (85, 31), (85, 63), (85, 85), (76, 76), (64, 64), (96, 96), (128, 128)]


def _pairs(text: list[str] | None, dim: int) -> list[tuple[int, int]]:
    if text:
        return [(al, be) for al, be in (tuple(int(v) for v in p.split(",")) for p in text) if max(al, be) <= dim]
    alpha = 2 * dim // 3
    return [(alpha, b) for b in dict.fromkeys((alpha, 511, 341, 255)) if b <= alpha]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=2000, help="0: every probe")
    ap.add_argument("--data-root")
    ap.add_argument("--lift", type=int, nargs="*", default=[512, 1024, 2048])
    ap.add_argument("--pairs", nargs="*", help="α,β pairs for the lift (default: see the module docstring)")
    ap.add_argument("--seeds", type=int, nargs="*", default=[LIFT_SEED], help="lift frame seeds (spread)")
    ap.add_argument("--no-centrings", action="store_true", help="skip the d = 128 centring table")
    a = ap.parse_args(argv)
    ds = load_identification("lfw", a.data_root)
    sel = select(ds, {"name": "dlib-resnet128"}, probes=a.probes or None, workers=1)
    x, ids, g, m = _unit(np.nan_to_num(sel.vectors, nan=1.0)), ds.ids.astype(str), sel.gallery, sel.mated

    def rank1(G, Q) -> float:
        return round(float(np.mean(ids[g][np.argmax(G @ Q.T, axis=0)] == ids[m])), 4)

    def transformed(c, alpha, beta) -> float:
        return rank1(t_alpha(c[g], alpha).astype(np.int32), t_alpha(c[m], beta).astype(np.int32))

    print(json.dumps({"centring": "plaintext cosine", "rank1": rank1(x[g], x[m]), "gallery": int(g.size),
                      "mated": int(m.size)}))
    if not a.no_centrings:
        for name, mu in [("none", None), ("shipped", shipped_mean("dlib-resnet128")), ("gallery", mean_of(x[g]))]:
            c = x if mu is None else centre(x, mu)
            row = {"centring": name, "cosine": rank1(c[g], c[m])}
            row.update({f"{al},{be}": transformed(c, al, be) for al, be in PAIRS})
            print(json.dumps(row), flush=True)
    c = centre(x, shipped_mean("dlib-resnet128"))
    rows = np.r_[g, m]
    for dim in a.lift:
        for seed in a.seeds:
            e = np.zeros((x.shape[0], dim))
            e[rows] = lift(c[rows], c.shape[1], dim, seed)
            row = {"lift": dim, "seed": seed, "cosine": rank1(e[g], e[m])}
            row.update({f"{al},{be}": transformed(e, al, be) for al, be in _pairs(a.pairs, dim)})
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
