"""im2020 parameters: security levels (Joye–Libert sizes), template shape and the decision threshold τ."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...crypto.joye_libert import JL_112, JL_128, JLParams
from ...faces.registry import BACKENDS, DEFAULT_BACKEND
from ...faces.thresholds import operating_point, squared_quantized
from ...templates.bits import Bounds, bits_needed
from ...templates.quantize import IM2020_SCALE


def default_tau(backend: str, scale: int = IM2020_SCALE) -> int:
    """τ for ``backend``: ⌊(t·scale)²⌋ of its shared default distance t (``faces.thresholds``: dlib-resnet128 0.53
    → 4602 ≈ 2^12.17, seed 000 Table II's 2^12.2; sface 1.12 → 20552)."""
    return squared_quantized(operating_point(backend).distance, scale)


DEFAULT_TAU = default_tau(DEFAULT_BACKEND)
"""τ of the default backend (sface since issue 36: ⌊(1.12·128)²⌋ = 20552), the shared default distance
(``faces.thresholds``, the one `privface compare` uses) on the im2020 scale; ``default_tau("dlib-resnet128")`` = 4602
is seed 000's setting (Table II: 2^12.2). Override with ``Im2020Params(tau=…)`` / ``--tau``."""

SECURITY_LEVELS: dict[int, JLParams] = {112: JL_112, 128: JL_128}
TOY_JL = JLParams(bits=512, k=48)  # tests only, with insecure_test_params=True
MODES = ("basic", "secure-comparison")
COMPARE_BITS = (64, None)
"""Secure-comparison circuit widths: 64 (s*, r1, r0_inv reduced mod 2^64 — valid since 2^64 | 2^k and
SED < 2^64; a forged s* passes with probability τ/2^64) or None = the full message space k (τ/2^k)."""


@dataclass(frozen=True)
class Im2020Params:
    """Template shape (dims, |Γ_i| ≤ max_abs after ×scale), τ, and the Joye–Libert parameter set.

    The message bits k must exceed the SED bits by the security margin so that SED never wraps mod 2^k
    and the forgery bound τ/|M| of Thm. 4 stays below 2^−λ (λ = 16 for toy keys).
    """

    jl: JLParams = JL_112
    dims: int = 128
    max_abs: int = IM2020_SCALE
    scale: int = IM2020_SCALE
    tau: int = None  # type: ignore[assignment]  # None: default_tau(backend), set in __post_init__
    insecure_test_params: bool = field(default=False)
    mode: str = "basic"
    compare_bits: int | None = None
    backend: str = DEFAULT_BACKEND
    """The face backend of the templates (issue 36): enrolments and probes name it, a server refuses another."""

    @classmethod
    def for_level(cls, security_bits: int, **kw) -> Im2020Params:
        if security_bits not in SECURITY_LEVELS:
            raise ValueError(f"security level must be one of {sorted(SECURITY_LEVELS)}, got {security_bits}")
        return cls(jl=SECURITY_LEVELS[security_bits], **kw)

    @classmethod
    def toy(cls, **kw) -> Im2020Params:
        """Tiny insecure keys for fast tests."""
        return cls(jl=TOY_JL, insecure_test_params=True, **kw)

    @property
    def bounds(self) -> Bounds:
        return Bounds.symmetric(self.dims, self.max_abs)

    @property
    def max_sed(self) -> int:
        return self.bounds.max_squared_distance

    @property
    def security_bits(self) -> int:
        return self.jl.security_bits

    @property
    def min_k(self) -> int:
        """k ≥ bits(max SED) + λ (λ taken as 16 for toy keys)."""
        return bits_needed(self.max_sed) + max(self.security_bits, 16)

    @property
    def circuit_bits(self) -> int:
        """The width of the secure-comparison circuit (seed 000 §VII Fig. 8)."""
        return self.jl.k if self.compare_bits is None else min(self.compare_bits, self.jl.k)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.tau is None:
            object.__setattr__(self, "tau", default_tau(self.backend, self.scale))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.compare_bits not in COMPARE_BITS:
            raise ValueError(f"compare_bits must be 64 or None (the full k), got {self.compare_bits!r}")
        if self.max_sed.bit_length() >= self.circuit_bits:
            raise ValueError(f"a {self.circuit_bits}-bit comparison cannot hold the SED bound {self.max_sed}")
        if not 0 < self.tau <= self.max_sed:
            raise ValueError(f"τ must lie in (0, {self.max_sed}], got {self.tau}")
        if self.jl.k < self.min_k:
            raise ValueError(f"k = {self.jl.k} is below the {self.min_k} bits the SED bound and λ need")
