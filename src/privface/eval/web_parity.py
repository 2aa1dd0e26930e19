"""Parity of the browser's face templates with Python's (issue 19's `bench web --parity` figures).

Given the descriptors Python's `dlib-resnet128` backend computes and those the browser pipeline
(web/src/face) computes for the same images, report how far apart they are and whether the im2020
decisions they lead to agree: the ×128 floor quantisation of seed 000 §IV-B.2, squared Euclidean
distances of the integer templates against τ (the protocol's decision rule), and the EER of the
browser's float descriptors over all pairs.
"""
from __future__ import annotations

import numpy as np

from ..protocols.im2020.params import DEFAULT_TAU
from ..templates.quantize import quantize
from .metrics import all_pairs, eer, pair_distances


def parity_summary(python: np.ndarray, browser: list[np.ndarray | None], ids: np.ndarray,
                   tau: int = DEFAULT_TAU) -> dict:
    """python: n×128 descriptors; browser: n descriptors or None where the browser found no face;
    ids: the subject of each image. Pairs and decisions cover the images both sides embedded."""
    python = np.asarray(python, np.float64)
    ids = np.asarray(ids)
    found = np.array([b is not None for b in browser])
    out: dict[str, float | int] = {"images": int(len(browser)), "undetected_browser": int((~found).sum())}
    if not found.any():
        return out
    br = np.stack([np.asarray(b, np.float64) for b in browser if b is not None])
    py = python[found]
    l2 = np.linalg.norm(br - py, axis=1)
    qb, qp = quantize(br), quantize(py)
    out.update(max_l2=float(l2.max()), median_l2=float(np.median(l2)),
               quantized_equal_frac=float((qb == qp).mean()))
    i, j, genuine = all_pairs(ids[found])
    sed_b = ((qb[i] - qb[j]) ** 2).sum(axis=1)
    sed_p = ((qp[i] - qp[j]) ** 2).sum(axis=1)
    out.update(pairs=int(i.size), decisions_equal_frac=float(((sed_b < tau) == (sed_p < tau)).mean()),
               eer_browser=float(eer(pair_distances(br, i, j), genuine)[0]),
               eer_python=float(eer(pair_distances(py, i, j), genuine)[0]))
    return out
