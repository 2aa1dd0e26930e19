"""cryptomask — CryptoMask (seed 001): BFV coefficient encoding with a d-coefficient buffer (§4.1), enrolment
with the merge indicator (Alg. 1), the gallery kept under the verifier's key (§4.5) so one ciphertext product per
gallery ciphertext needs no key switching, templates cut into slices of 8 columns whose products are summed before
the distances of 8 stacks are packed into one ciphertext (PackLWEs), masking
(Alg. 2), and secure result revealing (Alg. 3: comparison, B2A, sum, final comparison) on Ferret's silent
correlated OTs hashed into random OTs (``crypto.ferret``; or SoftSpokenOT / IKNP extension, ``ot=``), so the
verifier learns one bit: whether some enrolled face matches.

``DESCRIPTION`` declares, as data, the threat model, the leakage, the security level and the parameters.
"""
from .encoding import SCALE_BITS, rows_per_poly, slices
from .he import CloudServer, DataProvider, VerifierHE
from .params import C0_BITS, C1_BITS, CM_BFV, COMPARE_BITS, MARGIN_BITS, T_BITS, WIRE_BITS
from .parties import LEAKAGE, THREAT_MODEL, CryptoMask, KeyGenerator, Run

DESCRIPTION = {
    "name": "cryptomask",
    "paper": "001: CryptoMask (§2.2 Cheetah encoding, §4.1 buffer, Alg. 1 enrolment, Alg. 2 distances, "
             "Alg. 3 revealing)",
    "task": "1:N identification, 1-bit answer",
    "parties": ["KeyGenerator", "DataProvider", "CloudServer", "Verifier"],
    "threat_model": THREAT_MODEL,
    "modes": {"sec4.5-gallery-under-sk_v": {"status": "implemented", "params": CM_BFV.name,
                                            "packing": "slices of D = 8 columns (d padded), one ciphertext "
                                                       "per slice, δ = N/D − 1 templates per stack (§4.1); "
                                                       "the distances of D stacks in one (PackLWEs)",
                                            "leakage": LEAKAGE}},
    "leakage": LEAKAGE,
    "security_levels": [{"scheme": "bfv", "params": CM_BFV.name, "security_bits": CM_BFV.security_bits,
                         "estimate": "HE standard table (SEAL CoeffModulus.MaxBitCount): log q = 109 at N = 4096"},
                        {"scheme": "ot",
                         "params": "edwards25519 base OT + SoftSpokenOT (κ = 128, k = 4) bootstrap + Ferret (EMP's "
                                   "regular-noise primal LPN set, d = 10; semi-honest), AES-128 TCCR",
                         "security_bits": 128}],
    "default_security_bits": 128,
    "parameters": {"poly_modulus_degree": CM_BFV.poly_modulus_degree,
                   "coeff_modulus_bits": list(CM_BFV.coeff_modulus_bits),
                   "plain_modulus": CM_BFV.plain_modulus, "scale_bits": SCALE_BITS, "ring_bits": T_BITS,
                   "compare_ring_bits": COMPARE_BITS,
                   "rows_per_ciphertext_d128": rows_per_poly(CM_BFV.poly_modulus_degree, 128),
                   "slices_d128": slices(128),
                   "security": "128-bit classical (HE standard, Albrecht et al. 2018, Tab. 1: log qP ≤ 109 at "
                               "N = 4096, ternary secret); qP = 27 + 27 + 27 data bits + a 28-bit special prime",
                   "gallery_modulus_bits": 54, "query_modulus_bits": 109,
                   "sec4.5": "gallery switched to sk_v once and kept at p₁ = q₀q₁ (54 bits), lifted over "
                             "Q = q₀q₁q₂P (109 bits); query: R₀^σ = Enc(p₂·π(b_σ)), R₁^σ = Enc(p₂·π(b_σ)·s_v) "
                             "per slice and Z = Enc(0) under sk_v at Q, uniform halves from a 32-byte seed; "
                             "every answer re-randomised with u·Z + e",
                   "packing": "PackLWEs (Chen, Dai, Kim, Song 2021, Alg. 2) at q₀q₁ over the subring Z[X^D]: log₂ D "
                              "Galois keys under sk_v (gadget digits [c]_{q₀}, [c]_{q₁}, special prime P) issued by "
                              "the KG with k_sw, (D − 1)/D key switches per stack, one (c₀, c₁) per D "
                              "stacks",
                   "wire_modulus_bits": WIRE_BITS, "mask_margin_bits": MARGIN_BITS,
                   "compressed_bits": {"c0": C0_BITS, "c1": C1_BITS},
                   "communication": "distances packed, modulus-switched to q' = 2^32 and compressed before they "
                                    "leave the CS (§4.5, as Cheetah: the high 21 bits of the masked c₀, c₁ "
                                    "switched to 2^29; 50 bits per coefficient: 25 600 B per pack of D·δ = 4 088 "
                                    "templates at d = 128); "
                                    "Alg. 3 in one batch, in process and over HTTP (round trips independent "
                                    "of the gallery; over HTTP 1 + 1 + 10 exchanges, large messages streamed "
                                    "as frames)"},
    "steps": ["setup (KG: keys, k_sw to CS; SoftSpokenOT base OTs and Ferret's bootstrap; Ferret refills between "
              "identifications)", "enrol (Alg. 1, merge indicator)",
              "identify (Alg. 2 distances → Alg. 3 revealing → 1 bit)",
              "over HTTP: privface serve --protocol cryptomask --role cs; "
              "the verifier: identify --protocol cryptomask (Ferret pools per verifier key kept by the CS in memory: "
              "ot/setup, ot/finish once, ot/refill between identifications; protocols.cryptomask.pools)"],
    "variants": {"w": "Alg. 2 + Alg. 3: the verifier learns one bit (default)",
                 "wo": "CryptoMask-WO (§5, Fig. 2): no masking and no Alg. 3; the verifier decrypts every distance "
                       "and names the best entry, as HERS' key server does (in process and identify --gallery)"},
    "not_yet": ["§4.5's compressed decryption shares (q' = 2^30 at most: −0.5 B per entry)"],
}

__all__ = ["CM_BFV", "CloudServer", "CryptoMask", "DESCRIPTION", "DataProvider", "KeyGenerator", "Run", "VerifierHE"]
