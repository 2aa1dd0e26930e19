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
#: CS re-draws a mask whose rounding point lies within 2^-MARGIN_BITS of ½ (module docstring of ``he``): a fraction
#: 2^(1 − MARGIN_BITS) = 1/8 of the masks is drawn again.
MARGIN_BITS = 4
#: Modulus switching before the distances leave the CS (seed 001 §4.3's 2Nq bits, q → q' = 2^WIRE_BITS): every
#: c'_i is sent as ⌊q'·c/q⌉ mod q'. The verifier's extra phase error Σ_i s_i·ε_i + ε_0 (|ε| ≤ ½, s ternary) has
#: standard deviation ≈ √(2N/3/12) ≈ 15 at N = 4096, a plaintext step is q'/t = 2^12, so the 2^-MARGIN_BITS margin
#: the masks keep from every rounding point (256) is 17σ, and the HE noise before the switch adds ≈ 2^-19 of a step.
#: 4 bytes per residue instead of 4·L = 12 (and 5 at q' = 2^40 before).
WIRE_BITS = 32
WIRE_BYTES = 4
