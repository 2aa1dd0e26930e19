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

Two more per-backend values sit beside it, because they are scores of their own, not derived from it:

- ``ntru``, kolberg's NTRU threshold, a Hamming distance of LSSC bits (seed 002 §2.1): same person iff ≤ it; the
  all-pairs ORL EER threshold with ``kolberg.params.LSSC_EDGES`` (``python -m privface.eval.verification_defaults``,
  the procedure of dlib's 44);
- ``norm_range``, the L2 norms of Γ/scale that im2020's trusted party (§VII template check) admits: a margin around
  the norms the backend's embeddings have (``verification_defaults`` prints the ORL range), so that a zero, tiny,
  saturated or random vector falls outside.

Not held here: the 1:N thresholds of a gallery (``scale/default_tau.json``: a cosine chosen for a false-positive
identification rate over a whole gallery, hence stricter than this 1:1 one — dlib: 0.9557 against 0.9272).

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
    ntru: int  # kolberg NTRU: Hamming distance of the LSSC templates: same person iff ≤
    norm_range: tuple[float, float]  # im2020 §VII: the norms of Γ/scale the trusted party admits


DEFAULT_THRESHOLDS: dict[str, OperatingPoint] = {
    # 2 691 294 impostor / 8 032 genuine pairs of 1 125 held-out LFW identities (grey, centre face; the two photos
    # filed under two names dropped, eval.duplicates): distance 0.53 FAR 8.9e-4, FRR 0.117; cosine 0.9272 FAR 1.0e-3,
    # FRR 0.090 (the same with those photos kept). (dlib's published 0.6: FAR 1.0e-2 there.)
    # ntru: ORL all-pairs EER threshold (EER 1.47 %). norm_range: ORL's norms lie in [1.27, 1.57].
    "dlib-resnet128": OperatingPoint(distance=0.53, cosine=0.9272, ntru=44, norm_range=(1.0, 2.0)),
    # sface (dlib's 5-point landmarks since issue 36), the same pairs: distance 1.12 FAR 7.9e-4, FRR 0.0133; cosine
    # 0.3668 FAR 1.0e-3, FRR 0.0121 (EER 0.76 %).
    # ntru: ORL all-pairs EER threshold (EER 0.32 %). norm_range: unit embeddings; ×128-quantized, ORL's norms lie
    # in [0.988, 1.012].
    "sface": OperatingPoint(distance=1.12, cosine=0.3668, ntru=120, norm_range=(0.9, 1.1)),
    # sface-lm68 (SFace on dlib's 68-point landmarks, a measurement option): sface's row before issue 36 moved it to
    # the 5-point landmarks — the same pairs: distance 1.12 FAR 7.8e-4, FRR 0.0127; cosine 0.3661 FAR 1.0e-3,
    # FRR 0.0116 (EER 0.73 %); ntru: ORL all-pairs EER threshold (EER 0.23 %); ORL's ×128 norms in [0.991, 1.011].
    "sface-lm68": OperatingPoint(distance=1.12, cosine=0.3661, ntru=119, norm_range=(0.9, 1.1)),
}
"""Backend name → its default operating point (module docstring)."""


def default_threshold(backend: str) -> OperatingPoint | None:
    """The shared default of ``backend``, or None when it has none (a trained PCA or a user's ONNX model)."""
    return DEFAULT_THRESHOLDS.get(backend)


def operating_point(backend: str) -> OperatingPoint:
    """The shared default of ``backend``; a ValueError naming the backends that have one otherwise (a protocol's
    default threshold needs one: give the threshold explicitly for a trained PCA or a user's ONNX model)."""
    point = DEFAULT_THRESHOLDS.get(backend)
    if point is None:
        raise ValueError(f"no default threshold for face backend {backend!r} (defaults exist for "
                         f"{', '.join(sorted(DEFAULT_THRESHOLDS))}): give the threshold explicitly")
    return point


def squared_quantized(t: float, scale: int) -> int:
    """⌊(t·scale)²⌋: the threshold on the squared distance of ×scale integer templates (im2020 τ, kolberg BFV)."""
    return math.floor(round((t * scale) ** 2, 9))
