"""Plaintext sweep behind the README's idface LFW tables: rank-1 of ⟨T_α(x), T_β(y)⟩ (the answer the encrypted
IDFace run returns exactly, ``mismatches_transformed`` = 0) for centrings × (α, β), and the tight-frame lift.

``python -m privface.eval.idface_sweep [--probes 2000]`` — the same split and seeded sample as
``privface eval --dataset lfw --protocol idface --probes N`` (``identify_eval.select``); prints JSON lines.
The lift (an experiment, not part of the protocol): centred 128-D template · the first 128 rows of a seeded
random D×D orthogonal matrix (cosines preserved exactly), then T_α with α = ⌊2D/3⌋, β = α.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ..protocols.idface import t_alpha
from ..protocols.idface.centring import centre, mean_of, shipped_mean
from .datasets import load_identification
from .identify_eval import _unit, select

PAIRS = [(85, 15), (85, 31), (85, 63), (85, 85), (76, 76), (64, 64), (96, 96), (128, 128)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--data-root")
    ap.add_argument("--lift", type=int, nargs="*", default=[512, 1024, 2048])
    a = ap.parse_args(argv)
    ds = load_identification("lfw", a.data_root)
    sel = select(ds, {"name": "dlib-resnet128"}, probes=a.probes, workers=1)
    x, ids, g, m = _unit(np.nan_to_num(sel.vectors, nan=1.0)), ds.ids.astype(str), sel.gallery, sel.mated

    def rank1(G, Q) -> float:
        return round(float(np.mean(ids[g][np.argmax(G @ Q.T, axis=0)] == ids[m])), 4)

    def transformed(c, alpha, beta) -> float:
        return rank1(t_alpha(c[g], alpha).astype(np.int32), t_alpha(c[m], beta).astype(np.int32))

    print(json.dumps({"centring": "plaintext cosine", "rank1": rank1(x[g], x[m])}))
    for name, mu in [("none", None), ("shipped", shipped_mean("dlib-resnet128")), ("gallery", mean_of(x[g]))]:
        c = x if mu is None else centre(x, mu)
        row = {"centring": name, "cosine": rank1(c[g], c[m])}
        row.update({f"{al},{be}": transformed(c, al, be) for al, be in PAIRS})
        print(json.dumps(row), flush=True)
    c = centre(x, shipped_mean("dlib-resnet128"))
    for dim in a.lift:
        q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((dim, dim)))
        e = c @ q[:c.shape[1]]
        alpha = 2 * dim // 3
        print(json.dumps({"lift": dim, "alpha": alpha, "beta": alpha, "rank1": transformed(e, alpha, alpha)}), flush=True)


if __name__ == "__main__":
    main()
