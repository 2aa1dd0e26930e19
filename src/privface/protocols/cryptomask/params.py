"""CryptoMask parameters (seed 001 §5: N = 4096, t of 20 bits, q of 109 bits, 128-bit security).

``CM_BFV``: N = 4096, coefficient modulus 27·27·27 (+ a 28-bit special prime P) = 109 bits, t = 2^20 (the ring
Z_{2^20} that Alg. 3's shares live in, §3.3). log q = 109 is the HE standard's bound for 128-bit classical
security at N = 4096 with a ternary secret (Albrecht et al. 2018, Tab. 1; SEAL's ``CoeffModulus.MaxBitCount``),
the same total as the paper's 60 + 49. With §4.5 (``he``) the gallery sits at p₁ = q₀q₁ (54 bits) under sk_v and
the query rows at Q = q₀q₁q₂P (109 bits): primes below 2^29 let the native core run its NTTs and products on
32-bit lanes; the noise stays far below a plaintext step (the tests decrypt every distance exactly; measured noise:
docs/protocols/cryptomask.md).
"""
from __future__ import annotations

import math

from ...crypto.lattice import BFV, LatticeParams

CM_BFV = LatticeParams("bfv-4096-cryptomask", BFV, 4096, (27, 27, 27, 28), plain_modulus=1 << 20)
#: Toy parameters for tests only (behind insecure_test_params): N = 2048 with the same prime sizes.
CM_BFV_TOY = LatticeParams("bfv-2048-cryptomask-toy", BFV, 2048, (27, 27, 27, 28), plain_modulus=1 << 20)
T_BITS = 20
#: Alg. 3's comparison ring 2^COMPARE_BITS: the sign of z = d − ts read from its shares' low COMPARE_BITS bits (an
#: 18-bit millionaires' comparison instead of 19) is exact while |z| < 2^(COMPARE_BITS − 1): |d| ≤ (2^8 + √d/2)² ≈
#: 2^16.06 for unit vectors at d = 128 (``encoding.SCALE_BITS``) and the verifier's |ts| ≤ ``TS_BOUND``.
COMPARE_BITS = 19
TS_BOUND = 1 << 17
#: B2A/sum ring: 2^32 > any gallery size, so the sum of the match bits never wraps (Alg. 3 line 6).
SUM_BITS = 32
#: The CS's mask keeps t·u'/q' mod 1 out of [½ − 2^-MARGIN_BITS, ½ + 2^-MARGIN_BITS) (``he`` module docstring), so
#: the verifier's share is exact while its phase error e has |e| < 2^-MARGIN_BITS of a plaintext step (1 024 at q' =
#: 2^32). 2 is the widest band that still leaves one choice of the compressed c₀ in every step (``C0_BITS``).
MARGIN_BITS = 2
#: Modulus switching before the distances leave the CS (seed 001 §4.3's 2Nq bits, q → q' = 2^WIRE_BITS): every
#: c'_i is ⌊q'·c/q⌉ mod q'; a plaintext step is q'/t = 2^12.
WIRE_BITS = 32
#: §4.5's compressed ciphertexts (as Cheetah sends them): only the high bits of both parts travel.
#: c₀: the CS picks the masked c'₀ + u' among multiples of 2^(WIRE_BITS − C0_BITS) = 2^11 — the band above is exactly
#: that wide, so one multiple per step is refused and the dropped bits add no error (its share accounts for them);
#: with one bit fewer (multiples of 2^12, one per step) a c'₀ whose only multiple falls in the band has no choice.
C0_BITS = T_BITS + MARGIN_BITS - 1
#: c₁: switched straight to 2^C1_BITS; the verifier's phase error grows to ε₀ + 2^(WIRE_BITS − C1_BITS)·Σ_i s_i·ε_i
#: (|ε| ≤ ½). The bound (``failure_log2``, docs/protocols/cryptomask.md "Compressed distances"): below 2^-40 per entry
#: for a secret of Hamming weight h ≤ 3 400 at 29 bits (SEAL's uniform ternary s_v: h ≈ 2N/3 = 2 731 ± 30); at 28
#: bits only for h ≤ 860.
C1_BITS = 29
#: Bits per (c₀, c₁) coefficient on the wire: 50 instead of 2·32.
PACK_BITS = C0_BITS + C1_BITS
#: Per-entry failure the widths are chosen for.
FAILURE_LOG2 = -40


def failure_log2(c1_bits: int, weight: int, margin_bits: int = MARGIN_BITS) -> float:
    """log₂ of the bound on P(|e| ≥ 2^-margin_bits of a step) per entry for the compressed c₁ at ``c1_bits`` and a
    secret of Hamming ``weight``: e = ε₀ + 2^k·Σ_{s_i ≠ 0} ±ε_i (k = WIRE_BITS − c1_bits, ε uniform on [−½, ½], mean
    0); a uniform variable on [−½, ½] is sub-Gaussian with variance proxy 1/12 (sinh x / x ≤ e^{x²/6}), so
    P(|Σ| ≥ a) ≤ 2·exp(−6a²/h), with a = (2^(WIRE_BITS − T_BITS − margin_bits) − ½ − 1)/2^k (½ for ε₀, 1 for the
    HE noise, ≈ 2^-7 here, and the float switch's 2^-12)."""
    k = WIRE_BITS - c1_bits
    a = ((1 << (WIRE_BITS - T_BITS - margin_bits)) - 1.5) / (1 << k)
    return (1 - 6 * a * a / weight / math.log(2)) if a > 0 else 0.0
