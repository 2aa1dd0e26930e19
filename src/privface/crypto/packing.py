"""The GSM packing scheme (seed 004 §4, Fig. 2): n small plaintexts in one Paillier plaintext, with
component-wise products.

An (m, n, L, d) packing puts u_1..u_n ∈ Z_{2^m} into blocks of k = m + d + λ bits:

    Encode₁(u) = Σ_i 2^(k·t_i)·u_i,      Encode₂(u) = Σ_i 2^(k·2t_i)·u_i,

with t_i the block position of value i. Add₁/Add₂ are integer additions (⊞ on ciphertexts), Mult is the
integer product u*·v* (a ciphertext times a public encoding: scalar multiplication), and the products
u_i·v_i land in the blocks I = {2t_i}. Mask adds a random value to every other block (Fig. 2 writes
j ∈ I; the text and the simulator mean j ∉ I), so that decrypting reveals nothing about the cross terms
u_a·v_b beyond Decode₂.

Layouts. Block j of u*·v* holds Σ_{t_a + t_b = j} u_a·v_b, so block 2t_i holds u_i·v_i alone iff no a ≠ b
has t_a + t_b = 2t_i: the positions must contain no three-term arithmetic progression.

* ``"gsm"`` — t_i = 2^(i−1) − 1 (Fig. 2); a level-2 encoding spans 2^n − 1 blocks.
* ``"ternary"`` — t_i = the number whose base-3 digits are the binary digits of i − 1 (0, 1, 3, 4, 9,
  10, 12, 13, 27, …). No 3-term progression: if x + y = 2z with all base-3 digits in {0, 1}, the digit-wise
  sum x + y has no carries (digit sums ≤ 2) and 2z has digits in {0, 2}, so x and y agree in every digit:
  x = y. A level-2 encoding spans 2·t_n + 1 < 2·n^(log₂3) blocks — the "more compact placement" seed 004
  mentions, and it multiplies the values per ciphertext (``solve``).

Exactness. Mask draws each ρ_j uniformly from [0, 2^k − 2^(m+d)) instead of Z_{2^k}: a masked block
(content < 2^(m+d)) then never carries into its neighbour, so decoding is always exact, and the masked
block is within statistical distance 2^(m+d)/(2^k − 2^(m+d)) = 1/(2^λ − 1) of uniform — the paper's
security argument unchanged. ``solve`` picks d from the exact largest block value of the requested
operations, and requires a level-2 encoding to stay below 2^(L−1) ≤ N.
"""
from __future__ import annotations

import math
import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from ..errors import CryptoError
from .numbers import as_int

LAYOUTS = ("gsm", "ternary")


def positions(layout: str, n: int) -> tuple[int, ...]:
    """Block positions t_1..t_n of a layout (see the module docstring)."""
    if layout == "gsm":
        return tuple(2 ** (i - 1) - 1 for i in range(1, n + 1))
    if layout == "ternary":
        return tuple(int(format(i, "b"), 3) for i in range(n))
    raise CryptoError(f"unknown packing layout {layout!r}; choose one of {', '.join(LAYOUTS)}")


def max_terms_per_block(pos: Sequence[int]) -> int:
    """Largest number of products u_a·v_b (ordered pairs) that share one block of u*·v*."""
    return max(Counter(a + b for a in pos for b in pos).values())


@dataclass(frozen=True)
class PackingParams:
    """An (m, n, L, d) packing with statistical security λ (``lam``) and a layout."""

    m: int
    n: int
    d: int
    lam: int
    L: int
    layout: str = "gsm"

    def __post_init__(self) -> None:
        for name, low in (("m", 1), ("n", 1), ("d", 0), ("lam", 1), ("L", 2)):
            object.__setattr__(self, name, int(as_int(getattr(self, name), name)))
            if getattr(self, name) < low:
                raise CryptoError(f"packing parameter {name} must be at least {low}, got {getattr(self, name)}")
        positions(self.layout, 1)  # validates the layout name
        if self.level2_bits > self.L - 1:
            raise CryptoError(
                f"a level-2 encoding of {self.n} values needs {self.level2_bits} bits, more than the "
                f"L − 1 = {self.L - 1} bits below N"
            )

    @property
    def k(self) -> int:
        """Block size k = m + d + λ."""
        return self.m + self.d + self.lam

    @cached_property
    def positions(self) -> tuple[int, ...]:
        return positions(self.layout, self.n)

    @property
    def product_positions(self) -> tuple[int, ...]:
        """I: the blocks holding u_i·v_i (and the Encode₂ values)."""
        return tuple(2 * t for t in self.positions)

    @property
    def level2_blocks(self) -> int:
        return 2 * self.positions[-1] + 1

    @property
    def level2_bits(self) -> int:
        return self.k * self.level2_blocks

    def check_fits(self, modulus: int) -> None:
        """CryptoError unless every encoding of these parameters is below ``modulus`` (e.g. Paillier's N)."""
        if 1 << self.level2_bits > int(modulus):
            raise CryptoError(f"packed plaintexts need {self.level2_bits} bits; the modulus is too small")


def solve(m: int, L: int, lam: int, ell: int, *, add1: int = 1, scalar_bits: int = 0,
          add2: int | None = None, layout: str = "gsm") -> PackingParams:
    """The packing with the most values per ciphertext for ℓ-vectors of m-bit values in L-bit plaintexts.

    Operations supported without overflow: sums of ``add1`` level-1 encodings, times a public constant
    of ``scalar_bits`` bits (0: none), multiplied (Mult) by a fresh level-1 encoding, and ``add2`` such
    products summed — by default ⌈ℓ/n⌉, an inner product of two ℓ-vectors (seed 004 Π₁; count every
    further level-2 encoding added as one more product). d is the exact bit length of the largest block
    minus m (seed 004 §5 bounds it by m + log n + log t + 2).
    """
    m, L, lam, ell = (int(as_int(v, name)) for v, name in ((m, "m"), (L, "L"), (lam, "lam"), (ell, "ell")))
    add1, scalar_bits = int(as_int(add1, "add1")), int(as_int(scalar_bits, "scalar_bits"))
    if min(m, lam, ell, add1) < 1 or scalar_bits < 0 or (add2 is not None and int(add2) < 1):
        raise CryptoError("m, λ, ℓ, add1 (and add2 if given) must be positive, scalar_bits non-negative")
    value = 2**m - 1
    level1 = add1 * value * max(1, 2**scalar_bits - 1)
    best = None
    for n in range(1, ell + 1):
        pos = positions(layout, n)
        if (m + lam) * (2 * pos[-1] + 1) > L - 1:
            break  # no d ≥ 0 fits, and positions only grow with n
        terms = math.ceil(ell / n) if add2 is None else int(add2)
        largest = max(level1, terms * max_terms_per_block(pos) * level1 * value)
        d = max(0, largest.bit_length() - m)
        if (m + d + lam) * (2 * pos[-1] + 1) <= L - 1:
            best = PackingParams(m=m, n=n, d=d, lam=lam, L=L, layout=layout)
    if best is None:
        raise CryptoError(f"not even one {m}-bit value fits an {L}-bit plaintext with λ = {lam}")
    return best


# ---------------------------------------------------------------- Fig. 2


def _values(params: PackingParams, values: Sequence[int], bits: int) -> list[int]:
    vals = [int(as_int(v, "packed value")) for v in values]
    if len(vals) > params.n:
        raise CryptoError(f"at most n = {params.n} values fit one encoding, got {len(vals)}")
    if any(not 0 <= v < 2**bits for v in vals):
        raise CryptoError(f"packed values must lie in [0, 2^{bits})")
    return vals


def _pack(params: PackingParams, vals: list[int], blocks: Sequence[int]) -> int:
    return sum(v << (params.k * t) for v, t in zip(vals, blocks))


def _unpack(params: PackingParams, x, blocks: Sequence[int], total_blocks: int, level: int) -> list[int]:
    x = int(as_int(x, "encoding"))
    if not 0 <= x < 1 << (params.k * total_blocks):
        raise CryptoError(f"not a level-{level} encoding for these parameters (out of range: wrapped or negative?)")
    mask = (1 << params.k) - 1
    return [(x >> (params.k * t)) & mask for t in blocks]


def encode1(params: PackingParams, values: Sequence[int]) -> int:
    """Encode₁(u_1..u_n) = Σ 2^(k·t_i)·u_i, u_i ∈ Z_{2^m} (fewer than n values: the rest are 0)."""
    return _pack(params, _values(params, values, params.m), params.positions)


def encode1_vector(params: PackingParams, vector: Sequence[int]) -> list[int]:
    """(u_1*, …, u_t*) for an ℓ-vector, t = ⌈ℓ/n⌉ (seed 004 Fig. 3, enrolment step 1)."""
    n = params.n
    return [encode1(params, vector[i:i + n]) for i in range(0, len(vector), n)]


def decode1(params: PackingParams, x: int) -> list[int]:
    """Decode₁: the n blocks at t_i (values after Add₁ / constant multiplication, each < 2^k)."""
    return _unpack(params, x, params.positions, params.positions[-1] + 1, 1)


def encode2(params: PackingParams, values: Sequence[int]) -> int:
    """Encode₂(u_1..u_n) = Σ 2^(k·2t_i)·u_i: a level-2 encoding (values below 2^(m+d))."""
    return _pack(params, _values(params, values, params.m + params.d), params.product_positions)


def decode2(params: PackingParams, x: int) -> list[int]:
    """Decode₂: the n blocks in I = {2t_i} of a (masked) level-2 encoding."""
    return _unpack(params, x, params.product_positions, params.level2_blocks, 2)


def add1(u: int, v: int) -> int:
    """Add₁ (on ciphertexts: ⊞)."""
    return u + v


add2 = add1  # Add₂ is the same integer addition on level-2 encodings


def mult(u: int, v: int) -> int:
    """Mult(u*, v*) = u*·v*, a level-2 encoding (on a ciphertext: scalar multiplication by the public v*)."""
    return u * v


def mask_offset(params: PackingParams) -> int:
    """The random part of Mask: Σ_{j ∉ I} 2^(k·j)·ρ_j, ρ_j ∈_R [0, 2^k − 2^(m+d)). Add it to a ciphertext."""
    span = (1 << params.k) - (1 << (params.m + params.d))
    wanted = set(params.product_positions)
    return sum(secrets.randbelow(span) << (params.k * j) for j in range(params.level2_blocks) if j not in wanted)


def mask(params: PackingParams, w: int) -> int:
    """Mask(w̃) = w̃ + mask_offset: every block outside I becomes statistically uniform; Decode₂ is unchanged."""
    return w + mask_offset(params)


# ---------------------------------------------------------------- slot sums (seed 004 Fig. 3–5)


def slot_shares(params: PackingParams, total: int) -> int:
    """Σ_i 2^(k·2t_i)·ρ_i with ρ_i uniform in Z_{2^k} and Σρ_i ≡ ``total`` (mod 2^k).

    Seed 004 Fig. 3 step 3 (total = 0: the zero-sum ρ that hide the per-slot products u_i·w_i; a public
    constant folded into the shares costs nothing). Each slot then holds content + ρ_i < 2^(k+1): its
    carry (at most 1) enters the masked block above it, which ``mask_offset`` leaves room for, so
    ``decode2_sum`` reads Σ(slots) mod 2^k exactly. Needs a level-2 encoding of at most L − 1 bits plus
    that one carry below the modulus (``level2_bits`` ≤ log₂N − 1).
    """
    modulus = 1 << params.k
    rho = [secrets.randbelow(modulus) for _ in range(params.n - 1)]
    rho.append((int(total) - sum(rho)) % modulus)
    return _pack(params, rho, params.product_positions)


def decode2_sum(params: PackingParams, x: int) -> int:
    """Σ_{i ∈ I} block_i(x) mod 2^k: the sum of the slots of a masked level-2 encoding (seed 004 Fig. 3
    round 3, IP = Σ IP_i), reading each k-bit block and ignoring the carries ``slot_shares`` causes."""
    x = int(as_int(x, "encoding"))
    if x < 0:
        raise CryptoError("a level-2 encoding is non-negative")
    mask = (1 << params.k) - 1
    return sum((x >> (params.k * j)) & mask for j in params.product_positions) & mask
