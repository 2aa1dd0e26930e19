"""One photo under two names: pixel-level near-duplicates across identities, dropped from calibration data.

LFW holds a few photos filed under two people's names (``Carlos_Beltran_0001`` is ``Raul_Ibanez_0001``). In a
calibration set such a pair is a "non-mated" search that any face model scores as a match, so it, not the model,
sets a threshold chosen for a false-positive rate of 1e-3. The rule here looks only at pixels, never at an
embedding, so it is the same for every backend:

each image becomes a ``SIZE``×``SIZE`` grey thumbnail (box filter over the whole image), centred and scaled to unit
norm; two images of *different* identities whose thumbnails correlate ≥ ``MIN_CORRELATION`` are the same photo,
and both are dropped (which name is right is unknown). On the held-out LFW identities the two such pairs correlate
1.0 and 0.997; the next cross-identity pair 0.902, and no two photos of one person exceed 0.931.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

SIZE = 32
MIN_CORRELATION = 0.98


def thumbnails(paths: Sequence[str | os.PathLike], size: int = SIZE) -> np.ndarray:
    """(n, size²): each image's grey ``size``×``size`` box-filtered thumbnail, zero mean, unit norm."""
    from PIL import Image

    t = np.stack([np.asarray(Image.open(p).convert("L").resize((size, size), Image.Resampling.BOX),
                             dtype=np.float64).ravel() for p in paths])
    t -= t.mean(axis=1, keepdims=True)
    return t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)


def cross_identity_duplicates(paths: Sequence[str | os.PathLike], ids: Sequence,
                              min_correlation: float = MIN_CORRELATION) -> list[tuple[int, int, float]]:
    """(i, j, correlation), i < j, for every pair of images of different identities that are the same photo."""
    ids = np.asarray(ids).astype(str)
    t = thumbnails(paths)
    out = []
    for i in range(len(t)):  # one row at a time: n² floats never held at once
        c = t[i + 1:] @ t[i]
        for k in np.flatnonzero((c >= min_correlation) & (ids[i + 1:] != ids[i])):
            out.append((i, i + 1 + int(k), round(float(c[k]), 4)))
    return out
