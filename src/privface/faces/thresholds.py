"""One default 1:1 decision threshold per face backend, shared by `privface compare`, the evaluations and every
protocol's default (issue 35 B5).

``DEFAULT_THRESHOLDS[backend]`` is one operating point — chosen for a false-accept rate of ``VERIFICATION_TARGET``
on data no evaluation uses — stated on the two scores the protocols decide on:

- ``distance``, the Euclidean distance of the embeddings (the backend's ``distance``; `compare`, ``privface.compare``):
  same person iff ≤ it. im2020's τ and kolberg's BFV threshold, on the squared distance of ×scale integer
  templates, are ``squared_quantized(distance, scale)`` = ⌊(t·scale)²⌋ (an integer SED is ≤ (t·scale)² exactly when
  it is ≤ this floor); kolberg's CKKS threshold, on the squared distance of the float embeddings, is t²;
- ``cosine``, the cosine of the embeddings (gsm's T′ on its unit-norm templates, seed 004 §2): same person iff ≥ it.
  For unit-norm embeddings it is 1 − t²/2; dlib's have norm ≈ 1.4, so it is measured at the same operating point.

Not derived from it, and calibrated on their own: kolberg's NTRU threshold (a Hamming distance of LSSC bits) and the
1:N thresholds of a gallery (``scale/default_tau.json``: a cosine chosen for a false-positive identification rate
over a whole gallery, hence stricter than this 1:1 one — dlib: 0.9619 against 0.9272).

A new backend adds one entry, measured the same way: ``python -m privface.eval.default_tau --verification
--backend NAME`` (all pairs of the LFW identities held out of every evaluation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

VERIFICATION_TARGET = 1e-3
"""The false-accept rate each default is chosen for (``eval.default_tau.verification``)."""


@dataclass(frozen=True)
class OperatingPoint:
    distance: float  # Euclidean distance of the embeddings: same person iff ≤
    cosine: float  # cosine of the embeddings: same person iff ≥


DEFAULT_THRESHOLDS: dict[str, OperatingPoint] = {
    # 2 700 596 impostor / 8 032 genuine pairs of 1 129 held-out LFW identities (grey, centre face): distance 0.53
    # FAR 8.9e-4, FRR 0.117; cosine 0.9272 FAR 1.0e-3, FRR 0.090. (dlib's published 0.6: FAR 1.0e-2 there.)
    "dlib-resnet128": OperatingPoint(distance=0.53, cosine=0.9272),
}
"""Backend name → its default operating point (module docstring)."""


def default_threshold(backend: str) -> OperatingPoint | None:
    """The shared default of ``backend``, or None when it has none (a trained PCA or a user's ONNX model)."""
    return DEFAULT_THRESHOLDS.get(backend)


def squared_quantized(t: float, scale: int) -> int:
    """⌊(t·scale)²⌋: the threshold on the squared distance of ×scale integer templates (im2020 τ, kolberg BFV)."""
    return math.floor(round((t * scale) ** 2, 9))
