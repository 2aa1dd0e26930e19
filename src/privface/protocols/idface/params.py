"""IDFace parameters (seed 003 §4.1–§4.3, §5.1).

Parameter sets (``IDFaceParams``): d = 512 — α = 341 and β ∈ {63, 127, 341} (seed 003 §5.1). d = 128 — the
same ratios: α = ⌊128·341/512⌋ = 85 (≈ 2d/3) and β = 2^{k−2} − 1 for the paper's 2^k − 1 (63 → 15, 127 → 31)
plus β = α = 85, so p = β + 1 keeps a whole number of bits as at d = 512. D = 1024 / 2048 — the dimensions of
the tight-frame lift (``lift.py``, our addition for 128-D embeddings): α = ⌊2D/3⌋ = 682 / 1365, β ∈ {α, 511 /
1023, 341 / 682}, chosen by the LFW sweep (``eval/idface_sweep.py``, docs: idface page); the default β is α (the most
accurate; the lift exists for accuracy).

Base p. ct⁺ = ⟨z⁺, x⁺⟩ + ⟨z⁻, x⁻⟩ and ct⁻ = ⟨z⁺, x⁻⟩ + ⟨z⁻, x⁺⟩ are counts of at most min(α, β) positions,
so p = min(α, β) + 1. (The paper's Paillier counts 342/293 for β = 63/127 use p = β, which overflows a digit
when all β query signs agree with the template; here m = 341/292/243 at 2048 bits.)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import TemplateError
from .centring import centre
from .lift import LIFT_SEED, check_lift, lift
from .transform import _matrix, t_alpha

#: (α, allowed β) per dimension: seed 003 §5.1 for d = 512, scaled by the same ratios for d = 128; the lift
#: dimensions 1024 and 2048 (α = ⌊2D/3⌋, β by measurement).
PARAMETER_SETS = {512: (341, (63, 127, 341)), 128: (85, (15, 31, 85)), 1024: (682, (682, 511, 341)),
                  2048: (1365, (1365, 1023, 682))}
#: ``for_dim``'s default β: the fastest of the paper's sets; α itself for the lift dimensions.
DEFAULT_BETA = {512: 63, 128: 15, 1024: 682, 2048: 1365}


@dataclass(frozen=True)
class IDFaceParams:
    """d, α (enrolment), β (query); ``base`` p = min(α, β) + 1; ``mean``: the centring mean μ applied before
    T_α / T_β (``centring.centre``), or None to transform the templates as given; ``lift``: D, the dimension
    of the tight-frame lift applied after centring (``lift.py``, seeded by ``lift_seed``), or None. With a
    lift, α and β count positions among D = ``width`` coordinates, and every block has 2·D ciphertexts."""

    dim: int
    alpha: int
    beta: int
    mean: tuple[float, ...] | None = field(default=None, repr=False)
    lift: int | None = None
    lift_seed: int = LIFT_SEED

    def __post_init__(self) -> None:
        if self.lift is not None:
            check_lift(self.dim, self.lift, self.lift_seed)
        w = self.width
        if not (1 <= self.alpha <= w and 1 <= self.beta <= w):
            raise TemplateError(f"IDFace needs 1 ≤ α, β ≤ {'D' if self.lift else 'd'}, got α={self.alpha}, "
                                f"β={self.beta}, {'D' if self.lift else 'd'}={w}")
        if self.mean is not None:
            mu = np.asarray(self.mean, dtype=np.float64)
            if mu.shape != (self.dim,) or not np.all(np.isfinite(mu)):
                raise TemplateError(f"the centring mean must be {self.dim} finite numbers")
            object.__setattr__(self, "mean", tuple(float(v) for v in mu))

    @classmethod
    def for_dim(cls, dim: int, beta: int | None = None, mean=None, lift: int | None = None,
                lift_seed: int | None = None) -> IDFaceParams:
        """The documented parameter set for d ∈ {128, 512} (β defaults to the fastest, 63 / 15), or — with
        ``lift`` = D ∈ {1024, 2048} — the set of the lift dimension D (β defaults to α; the frame's seed to
        ``LIFT_SEED``)."""
        width = dim if lift is None else lift
        if width not in PARAMETER_SETS:
            raise TemplateError(f"IDFace parameter sets exist for {'D' if lift else 'd'} ∈ "
                                f"{sorted(PARAMETER_SETS)}, got {width}")
        alpha, betas = PARAMETER_SETS[width]
        beta = DEFAULT_BETA[width] if beta is None else beta
        if beta not in betas:
            raise TemplateError(f"β for {'D' if lift else 'd'} = {width} must be one of {betas}, got {beta}")
        return cls(dim, alpha, beta, None if mean is None else tuple(np.asarray(mean, dtype=np.float64).ravel()),
                   lift, LIFT_SEED if lift_seed is None else lift_seed)

    @property
    def width(self) -> int:
        """The transformed templates' length: D with a lift, else d (columns of the encrypted database)."""
        return self.dim if self.lift is None else self.lift

    def _prepared(self, x):
        if self.mean is None and self.lift is None:
            return x
        x = _matrix(x, self.dim)
        if self.mean is not None:
            x = centre(x, self.mean)
        return x if self.lift is None else lift(x, self.dim, self.lift, self.lift_seed)

    def enrol_transform(self, x) -> np.ndarray:
        """T_α(x), after centring and lifting when ``mean`` / ``lift`` are set (IDFace.ENC_DB's first step)."""
        return t_alpha(self._prepared(x), self.alpha)

    def query_transform(self, y) -> np.ndarray:
        """T_β(y), after centring and lifting when ``mean`` / ``lift`` are set (IDFace.IP_DB's first step)."""
        return t_alpha(self._prepared(y), self.beta)

    @property
    def base(self) -> int:
        return min(self.alpha, self.beta) + 1

    def templates_per_slot(self, payload_bits: int) -> int:
        """m: the most digits with p^m ≤ 2^payload_bits."""
        m, p = 0, self.base
        while p ** (m + 1) <= 1 << payload_bits:
            m += 1
        return m
