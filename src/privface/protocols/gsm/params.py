"""gsm parameters (seed 004 §5–§7 "Parameter Selection", §9): ℓ, m, λ, the Paillier size, ζ and T.

Templates are signed m-bit vectors of exact norm ζ = 2^(m−1) − 1 (``templates.fixed_norm``). The packing
needs values in Z_{2^m}, so both parties shift by c = 2^(m−1): u′ = u + c·1, w′ = w + c·1, and

    ⟨u, w⟩ = ⟨u′, w′⟩ − c·S_u − c·S_w + ℓc²,      S_u = Σu′_i, S_w = Σw′_i.

The terminal gets ⟦S_u⟧ in the first message (the provider sums the enrolment ciphertexts) and folds the
rest into the round-2 ciphertext, which decodes to J = ⟨u, w⟩ + ζ² ∈ [0, 2ζ²] (Cauchy–Schwarz: |⟨u, w⟩| ≤ ζ²,
so IP_max = ζ² here rather than §6's loose 2^(2mℓ)). The decision is ⟨u, w⟩ ≥ T with T = ⌈T′·ζ²⌉ (§2).

Packing (seed 004 §4, ``crypto.packing``): k = m + d + λ; d is the smallest value such that every
non-slot block of Σ_j u*_j·(a·w*_j) stays below 2^(m+d) (so ``mask_offset`` never carries) and every
slot, and the decoded sum X, stay below 2^k (``slot_shares``). Π2/Π3 multiply by a < 2^λ and add
b < 2^(bits(a·J_max) + λ) (and pad < 2^(bits(J_max) + λ)), as §6/§7 prescribe. n is the number of values
per ciphertext that minimises t = ⌈ℓ/n⌉ with k·(level-2 blocks) ≤ log₂N − 2.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...crypto.packing import PackingParams, max_terms_per_block, positions
from ...errors import ProtocolError
from ...faces.registry import DEFAULT_BACKEND
from ...faces.thresholds import DEFAULT_THRESHOLDS, operating_point
from ...templates.fixed_norm import zeta

VARIANTS = ("pi1", "pi2", "pi3")
PAILLIER_BITS = 3072
"""§9: "a security level analogous to 3072 bit RSA" (128-bit, docs/architecture.md: ≥ 112)."""
TOY_PAILLIER_BITS = 1024
"""Tests only (``insecure_test_params``)."""
LAMBDA = 40
"""§9: statistical security parameter λ = 40."""
DEFAULT_COS_THRESHOLD = DEFAULT_THRESHOLDS[DEFAULT_BACKEND].cosine
"""T′ on the cosine of m = 16 templates for the default backend: its shared default (``faces.thresholds``, the
operating point of `privface compare`'s distance, stated as a cosine). ``GsmParams(backend=…)`` takes that
backend's (dlib-resnet128: 0.9272; until issue 35 it was 0.9277, the EER threshold over all 79 800 ORL pairs;
`privface eval --protocol gsm` reports that as ``cos_threshold_eer`` for the pairs it runs). Override with
GsmParams(cos_threshold=…) / --cos-threshold."""


def default_cos_threshold(backend: str) -> float:
    """T′ for ``backend``: its shared default cosine (``faces.thresholds``)."""
    return operating_point(backend).cosine


TEMPLATE_LIFETIME = 365 * 24 * 3600
"""Seconds a provider-signed first message stays valid (the terminal refuses it afterwards)."""


@dataclass(frozen=True)
class GsmParams:
    ell: int = 128
    m: int = 16
    lam: int = LAMBDA
    paillier_bits: int = PAILLIER_BITS
    layout: str = "ternary"
    cos_threshold: float = None  # type: ignore[assignment]  # None: the backend's default (__post_init__)
    insecure_test_params: bool = field(default=False)
    lifetime: int = TEMPLATE_LIFETIME
    backend: str = DEFAULT_BACKEND  # the templates' face backend: T′ defaults to its shared cosine; a device's key
    # file names it and a device loaded with another backend's parameters is refused (issue 36)

    @classmethod
    def toy(cls, **kw) -> GsmParams:
        """Tiny insecure Paillier keys for fast tests."""
        kw.setdefault("paillier_bits", TOY_PAILLIER_BITS)
        return cls(insecure_test_params=True, **kw)

    def __post_init__(self) -> None:
        if self.cos_threshold is None:  # frozen: set the backend's default once, so the field is always a float
            object.__setattr__(self, "cos_threshold", default_cos_threshold(self.backend))
        if not 1 <= self.ell <= 4096:
            raise ValueError(f"ℓ must lie in [1, 4096], got {self.ell}")
        zeta(self.m)  # validates m
        if self.lam < 8:
            raise ValueError(f"λ must be at least 8, got {self.lam}")
        if not 0.0 < self.cos_threshold <= 1.0:
            raise ValueError(f"the cosine threshold T′ must lie in (0, 1], got {self.cos_threshold}")
        if self.paillier_bits < 2048 and not self.insecure_test_params:
            raise ValueError(f"{self.paillier_bits}-bit Paillier is below 112-bit security; "
                             "use ≥ 2048 (default 3072) or insecure_test_params in tests")

    @property
    def zeta(self) -> int:
        return zeta(self.m)

    @property
    def offset(self) -> int:
        """c = 2^(m−1): u′ = u + c ∈ [1, 2^m − 1]."""
        return 1 << (self.m - 1)

    @property
    def threshold(self) -> int:
        """T = ⌈T′·ζ²⌉ (§2): match iff ⟨u, w⟩ ≥ T."""
        return math.ceil(self.cos_threshold * self.zeta**2)

    @property
    def j_max(self) -> int:
        """J = ⟨u, w⟩ + ζ² ≤ 2ζ²."""
        return 2 * self.zeta**2

    @property
    def s_max(self) -> int:
        """B = c·ℓ·(2^m − 1) ≥ c·S_u: the terminal adds ⟦B − c·S_u⟧, a non-negative plaintext."""
        return self.offset * self.ell * (2**self.m - 1)

    @property
    def a_bits(self) -> int:
        """Π2/Π3: a ∈ [1, 2^λ)."""
        return self.lam

    @property
    def b_bits(self) -> int:
        """Π2/Π3: b < 2^(bits(a·J_max) + λ), statistically hiding a·J."""
        return self.lam + self.j_max.bit_length() + self.lam

    @property
    def pad_bits(self) -> int:
        """Π3: pad < 2^(bits(J_max) + λ)."""
        return self.j_max.bit_length() + self.lam

    @property
    def circuit_bits(self) -> int:
        """Π3 circuit width w = bits(J_max) + λ (= pad_bits) of a·IP + b and Y. The device's Y enters mod 2^w
        and its X mod 2^x_bits (``x_bits``): pad and b are uniform mod 2^w (their ranges are multiples of
        2^w), so X, Y hide J and a; IP′ = X′ − pad mod 2^x_bits is range-checked to [0, J_max], so a forged
        IP′ = J + δ has 0 < |δ| < 2^x_bits and passes a·IP′ + b ≡ Y′ (mod 2^w) only by guessing a·δ mod
        2^w, and the 2^λ − 1 values of a give distinct a·δ (|a₁ − a₂|·|δ| < 2^λ·2^x_bits = 2^w):
        probability ≤ 1/(2^λ − 1)."""
        return self.pad_bits

    @property
    def x_bits(self) -> int:
        """Π3: width of X, pad, T and IP in the circuit, bits(J_max): J ≤ J_max fits, so IP = X − pad mod
        2^x_bits is exact. X needs no λ extra bits there — the device already holds the whole integer
        J + pad, which the λ bits of pad beyond x_bits hide — and the λ bits of w cover the MAC check alone
        (``circuit_bits``). 31 + 71 OT inputs instead of 2·71 at m = 16, and a 31-bit × λ multiplier."""
        return self.j_max.bit_length()

    def x_max(self, variant: str) -> int:
        """Largest value the device decodes: J (Π1), a·J + b (Π2), max(J + pad, a·J + b) (Π3)."""
        if variant == "pi1":
            return self.j_max
        aj_b = (2**self.a_bits - 1) * self.j_max + 2**self.b_bits - 1
        return aj_b if variant == "pi2" else max(aj_b, self.j_max + 2**self.pad_bits - 1)

    def min_d(self, variant: str, n: int) -> int:
        """The smallest padding d for n values per ciphertext (module docstring)."""
        check_variant(variant)
        t = math.ceil(self.ell / n)
        scale = 1 if variant == "pi1" else 2**self.a_bits - 1
        v2 = (2**self.m - 1) ** 2
        cross = t * max_terms_per_block(positions(self.layout, n)) * v2 * scale
        slot = t * v2 * scale + scale * self.s_max
        return max(0, cross.bit_length() - self.m,
                   slot.bit_length() - self.m - self.lam, self.x_max(variant).bit_length() - self.m - self.lam)

    def packing(self, modulus_bits: int, variant: str, n: int | None = None) -> PackingParams:
        """The packing for an N of ``modulus_bits`` bits: the given n, or the one with fewest ciphertexts."""
        if n is not None:
            return self._packing(modulus_bits, variant, n)
        best = None
        for n in range(1, self.ell + 1):
            try:
                p = self._packing(modulus_bits, variant, n)
            except ProtocolError:
                break  # blocks only grow with n
            if best is None or math.ceil(self.ell / n) < math.ceil(self.ell / best.n):
                best = p
        if best is None:
            raise ProtocolError(f"no {variant} packing fits a {modulus_bits}-bit Paillier modulus")
        return best

    def _packing(self, modulus_bits: int, variant: str, n: int) -> PackingParams:
        d = self.min_d(variant, n)
        blocks = 2 * positions(self.layout, n)[-1] + 1
        if (self.m + d + self.lam) * blocks > modulus_bits - 2:
            raise ProtocolError(f"{n} values per ciphertext do not fit a {modulus_bits}-bit modulus")
        return PackingParams(m=self.m, n=n, d=d, lam=self.lam, L=modulus_bits - 1, layout=self.layout)


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise ProtocolError(f"unknown gsm variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    return variant
