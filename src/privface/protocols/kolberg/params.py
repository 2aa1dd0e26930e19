"""kolberg parameters (seed 002 §2.1–§2.2, Tab. 2–3): scheme, template shape, decision threshold."""
from __future__ import annotations

from dataclasses import dataclass

from ...faces.registry import DEFAULT_BACKEND
from ...faces.thresholds import operating_point, squared_quantized
from ...templates.quantize import IM2020_SCALE

CKKS, BFV, NTRU = "ckks", "bfv", "ntru"
SCHEMES = (CKKS, BFV, NTRU)



def default_thresholds(backend: str) -> dict[str, float]:
    """Each scheme's default threshold for ``backend`` (``faces.thresholds``): CKKS t², BFV ⌊(t·128)²⌋ of its
    shared distance t, NTRU its own Hamming threshold."""
    point = operating_point(backend)
    t = point.distance
    return {CKKS: round(t * t, 6), BFV: squared_quantized(t, IM2020_SCALE), NTRU: point.ntru}


DEFAULT_THRESHOLDS = default_thresholds(DEFAULT_BACKEND)
"""Accept when distance ≤ threshold, for the default backend (sface since issue 36). CKKS: squared Euclidean
distance of the float embeddings (sface 1.12² = 1.2544; dlib-resnet128 0.53² = 0.2809); BFV: of the ×128 quantised
templates (sface ⌊(1.12·128)²⌋ = 20552; dlib-resnet128 4602, im2020's τ) — both the backend's shared default
(``faces.thresholds``, the one `privface compare` uses); NTRU: Hamming distance of the LSSC templates (sface 119,
dlib-resnet128 44 = the all-pairs ORL EER threshold with LSSC_EDGES: a score of its own, not derived). ``privface
eval`` uses the ``--backend``'s. Another backend's:
``default_thresholds(backend)``, or ``KolbergParams(backend=…)``."""

LSSC_EDGES = (-0.06, 0.0, 0.06)
"""Inner edges of the four segments (seed 002 §2.1): ≈ the quartiles of dlib-resnet128 coordinates
(per-coordinate σ ≈ 0.09), so each segment holds about a quarter of the values. Values are clipped."""


@dataclass(frozen=True)
class KolbergParams:
    """One deployment: ``scheme`` (ckks|bfv|ntru), embedding ``dims``, ``threshold`` on the scheme's distance."""

    scheme: str = CKKS
    dims: int = 128
    threshold: float | None = None
    scale: int = IM2020_SCALE  # BFV: integer template ⌊128·x⌋
    lssc_edges: tuple[float, ...] = LSSC_EDGES  # NTRU: 3 bits per feature
    max_gallery: int = 100_000
    backend: str = DEFAULT_BACKEND  # the templates' face backend: its default thresholds apply when threshold is
    # None; enrolments and probes name it and a DB server refuses another (issue 36)

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if not 1 <= self.dims <= 4094:
            raise ValueError(f"dims must lie in [1, 4094], got {self.dims}")
        if self.threshold is not None and not self.threshold >= 0:
            raise ValueError(f"threshold must be ≥ 0, got {self.threshold}")

    @property
    def tau(self) -> float:
        return default_thresholds(self.backend)[self.scheme] if self.threshold is None else self.threshold

    @property
    def template_bits(self) -> int:
        """NTRU template length: 3 LSSC bits per feature."""
        return self.dims * (len(self.lssc_edges))
