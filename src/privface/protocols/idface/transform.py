"""IDFace almost-isometric transform and space-efficient encoding (seed 003 §4.1–§4.2).

* ``t_alpha``: top-α components by |x_i| → sign(x_i), the rest → 0 (Z_α, §4.1). Queries use T_β.
* ``separate``: x = x⁺ − x⁻ with x⁺, x⁻ ∈ {0, 1}^d (§4.2).
* ``encode`` / ``decode``: m binary vectors packed base p, x' = Σ_i p^{i} x_i (digit i = template i), p > every
  inner product that is later decoded. ⟨x', y⟩ = Σ_i p^{i} ⟨x_i, y⟩, so digits decode without carries.

Parameter sets (``IDFaceParams``): d = 512 — α = 341 and β ∈ {63, 127, 341} (seed 003 §5.1). d = 128 — the
same ratios: α = ⌊128·341/512⌋ = 85 (≈ 2d/3) and β = 2^{k−2} − 1 for the paper's 2^k − 1 (63 → 15, 127 → 31)
plus β = α = 85, so p = β + 1 keeps a whole number of bits as at d = 512. D = 1024 / 2048 — the dimensions of
the tight-frame lift (``lift.py``, our addition for 128-D embeddings): α = ⌊2D/3⌋ = 682 / 1365, β ∈ {α, 511 /
1023, 341 / 682}, chosen by the LFW sweep (``eval/idface_sweep.py``, README); the default β is α (the most
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


def _matrix(x, dim: int | None = None) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] == 0 or not np.issubdtype(x.dtype, np.number):
        raise TemplateError(f"expected templates as a (count, d) real array, got shape {x.shape}")
    if dim is not None and x.shape[1] != dim:
        raise TemplateError(f"expected d = {dim} coordinates, got {x.shape[1]}")
    if not np.all(np.isfinite(x)):
        raise TemplateError("templates have NaN or infinite coordinates")
    return x


def t_alpha(x, alpha: int) -> np.ndarray:
    """T_α (seed 003 §4.1): each row keeps the signs of its α largest-magnitude components, int8 in {−1, 0, 1}.

    Ties in |x_i| go to the lower index (stable sort), so the transform is deterministic. A zero component
    among the top α stays 0 (sign 0); unit-norm embeddings practically never have one.
    """
    x = _matrix(x)
    if not 1 <= alpha <= x.shape[1]:
        raise TemplateError(f"α must lie in [1, d = {x.shape[1]}], got {alpha}")
    top = np.argsort(-np.abs(x), axis=1, kind="stable")[:, :alpha]
    out = np.zeros(x.shape, dtype=np.int8)
    np.put_along_axis(out, top, np.sign(np.take_along_axis(x, top, axis=1)).astype(np.int8), axis=1)
    return out


def separate(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """z = z⁺ − z⁻ with z⁺, z⁻ ∈ {0, 1} (uint8), seed 003 §4.2."""
    return (z > 0).astype(np.uint8), (z < 0).astype(np.uint8)


def encode(bits: np.ndarray, base: int) -> np.ndarray:
    """Encode (§4.2): (m, …) binary digits → Σ_i p^{i}·bits[i] as uint64 (needs p^m < 2^64)."""
    m = bits.shape[0]
    if base ** m >= 1 << 64:
        raise TemplateError(f"{m} digits of base {base} do not fit 64 bits")
    out = np.zeros(bits.shape[1:], dtype=np.uint64)
    for i in range(m - 1, -1, -1):  # Horner
        out *= np.uint64(base)
        out += bits[i].astype(np.uint64)
    return out


def decode(values: np.ndarray, base: int, m: int) -> np.ndarray:
    """Decode (§4.2): uint64 values → (m, …) digits x_i = ⌊x'/p^{i}⌋ mod p (int64)."""
    v = np.asarray(values, dtype=np.uint64).copy()
    out = np.empty((m,) + v.shape, dtype=np.int64)
    if base & (base - 1) == 0:  # p = 2^k (β = 2^k − 1): shifts and masks, no 64-bit division
        k, mask = base.bit_length() - 1, np.uint64(base - 1)
        for i in range(m):
            out[i] = (v >> np.uint64(i * k)) & mask
        return out
    for i in range(m):
        out[i] = v % np.uint64(base)
        v //= np.uint64(base)
    return out


def plaintext_scores(gallery_t: np.ndarray, query_t: np.ndarray) -> np.ndarray:
    """⟨T_α(x_k), T_β(y)⟩ for every enrolled k (int64): the exact answer IDFace.IP_DB must decode."""
    return gallery_t.astype(np.int64) @ query_t.astype(np.int64).ravel()
