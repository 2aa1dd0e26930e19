"""BlindESED and unblinding (seed 000 §IV-B.3, eq. (4)–(5); correctness in §V-A)."""
from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...crypto import catalano_fiore as cf


@dataclass(frozen=True)
class Randomizers:
    """r0 ∈_R M_inv (odd: r0² is invertible mod 2^k) and r1 ∈_R M; the server's secret per attempt."""

    r0: int = field(repr=False)
    r1: int = field(repr=False)

    @classmethod
    def draw(cls, k: int) -> Randomizers:
        return cls(2 * secrets.randbelow(1 << (k - 1)) + 1, secrets.randbelow(1 << k))


def blind_esed(C: Sequence[cf.Level1], C2: Sequence[cf.Level1], rnd: Randomizers,
               workers: int | None = None, *, check=None) -> cf.Level2:
    """S* = (α*, β*): α* = r0²·(Enc(Σ ā_i²) ⊞ ⊞ 2ā_i·β̄_i) ⊞ Enc(r1) (eq. 4),
    β* = [(r0·β̄_i, 0)ᵀ] (eq. 5).

    Decrypts to s* = r0²·SED(Γ, Γ′) + r1 mod 2^k. Computed by ``cf.esed_scaled`` (one multi-exponentiation
    for α*, whose single fresh Enc^ carries r1 as well; the k columns on ``workers`` threads). ``check``
    validates each β'_i there (see ``esed_scaled``) for a C′ whose group membership is not yet checked.
    """
    return cf.esed_scaled(C, C2, rnd.r0, workers, plus=rnd.r1, check=check)


def unblind(blinded_score: int, rnd: Randomizers, k: int) -> int:
    """s = (s* − r1)/r0² mod 2^k."""
    space = 1 << k
    return (blinded_score - rnd.r1) * pow(rnd.r0 * rnd.r0, -1, space) % space


@dataclass(frozen=True)
class Decision:
    """The server's view of one attempt: s (leaks to the server in the basic mode), s ≤ max SED, r."""

    score: int = field(repr=False)
    in_range: bool
    accepted: bool


def decide(score: int, tau: int, max_sed: int) -> Decision:
    """r = T iff s < τ; an s outside [0, max SED] cannot come from two templates and is a failed attempt."""
    in_range = 0 <= score <= max_sed
    return Decision(score, in_range, in_range and score < tau)
