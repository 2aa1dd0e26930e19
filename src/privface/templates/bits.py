"""Bit-length accounting: how large can a score get, and how many plaintext bits hold it.

A homomorphic score is only correct if it never wraps around the plaintext modulus. For
d-dimensional integer templates with every coordinate in [lo, hi]:

* squared Euclidean distance, SED(v, u) = Σ (v_i − u_i)² (seed 000 §II-A;
  seed 002 §2.1 for integer templates) is at most d·(hi − lo)²;
* inner product ⟨v, u⟩ (seed 001 §4.1, seed 003 §3.1) lies in d·[min c, max c] with
  c = {lo·lo, lo·hi, hi·hi} (the products at the corners of the box).

Example (seed 000 §IV-B.2 with dlib's 128-D embedding, coordinates in [−1, 1], ×128):
coordinates in [−128, 128], SED ≤ 128·256² = 2²³ (24 unsigned bits), |IP| ≤ 128·128² = 2²¹
(23 bits with a sign bit). Seed 003 §4.2: ternary templates with α nonzeros give IP ∈ [−α, α].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import TemplateError
from .quantize import _int_param

Op = Literal["sed", "ip"]


def bits_needed(value: int, signed: bool = False) -> int:
    """Bits to represent every integer in [0, value] (unsigned) or [−value, value] (signed).

    Two's complement: unsigned needs value.bit_length() bits (at least 1); signed adds one sign bit.
    """
    v = _int_param(value, "value", minimum=0)
    return max(1, v.bit_length()) + (1 if signed else 0)


@dataclass(frozen=True)
class Bounds:
    """Every coordinate of a d-dimensional integer template lies in [lo, hi]."""

    d: int
    lo: int
    hi: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "d", _int_param(self.d, "d", minimum=1))
        object.__setattr__(self, "lo", _int_param(self.lo, "lo"))
        object.__setattr__(self, "hi", _int_param(self.hi, "hi"))
        if self.lo > self.hi:
            raise TemplateError(f"empty coordinate range: lo={self.lo} > hi={self.hi}")

    @classmethod
    def symmetric(cls, d: int, max_abs: int) -> Bounds:
        """Coordinates in [−max_abs, max_abs], e.g. max_abs=128 for seed 000's ×128 quantisation."""
        m = _int_param(max_abs, "max_abs", minimum=0)
        return cls(d, -m, m)

    @classmethod
    def from_bits(cls, d: int, bits: int, signed: bool = True) -> Bounds:
        """Coordinates that are b-bit integers: [−2^(b−1), 2^(b−1)−1] signed, [0, 2^b−1] unsigned."""
        b = _int_param(bits, "bits", minimum=2 if signed else 1)
        return cls(d, -(2 ** (b - 1)), 2 ** (b - 1) - 1) if signed else cls(d, 0, 2**b - 1)

    @property
    def max_abs(self) -> int:
        return max(abs(self.lo), abs(self.hi))

    @property
    def max_squared_distance(self) -> int:
        """Largest SED, attained by v = (hi, …, hi), u = (lo, …, lo)."""
        return self.d * (self.hi - self.lo) ** 2

    @property
    def inner_product_range(self) -> tuple[int, int]:
        """Smallest and largest ⟨v, u⟩; both attained by constant vectors at corners of the box."""
        corners = (self.lo * self.lo, self.lo * self.hi, self.hi * self.hi)
        return self.d * min(corners), self.d * max(corners)

    @property
    def max_inner_product(self) -> int:
        """Largest |⟨v, u⟩| = d·max_abs²."""
        return self.d * self.max_abs**2

    def plaintext_bits(self, op: Op = "sed", signed: bool | None = None) -> int:
        """Plaintext bits that hold every score of kind ``op`` without wrap-around.

        signed=None picks the natural choice: no sign bit for SED (never negative), a sign bit for
        IP when it can be negative. signed=True forces a sign bit (e.g. for a centred modulus).
        """
        if op == "sed":
            return bits_needed(self.max_squared_distance, signed=bool(signed))
        if op == "ip":
            low, high = self.inner_product_range
            if signed is None:
                signed = low < 0
            if low < 0 and not signed:
                raise TemplateError(
                    f"inner products range down to {low}; an unsigned plaintext cannot hold them"
                )
            return bits_needed(max(-low, high), signed=signed)
        raise TemplateError(f"op must be 'sed' or 'ip', got {op!r}")


def max_squared_distance(d: int, max_abs: int) -> int:
    """Largest SED of d-dim templates with coordinates in [−max_abs, max_abs]: d·(2·max_abs)²."""
    return Bounds.symmetric(d, max_abs).max_squared_distance


def max_inner_product(d: int, max_abs: int) -> int:
    """Largest |⟨v, u⟩| of d-dim templates with coordinates in [−max_abs, max_abs]: d·max_abs²."""
    return Bounds.symmetric(d, max_abs).max_inner_product


def plaintext_bits(d: int, max_abs: int, op: Op = "sed", signed: bool | None = None) -> int:
    """Plaintext bits for SED or IP of d-dim templates with coordinates in [−max_abs, max_abs]."""
    return Bounds.symmetric(d, max_abs).plaintext_bits(op, signed)
