"""gsm — Agrawal et al., "Game-Set-MATCH: Using Mobile Devices for Seamless External-Facing Biometric
Matching" (CCS; seed 004 §2–§9): a device holds its encrypted template, an external terminal matches a
fresh capture against it by cosine similarity, a service provider enrols devices.

``DESCRIPTION`` declares, as data, the threat model, the leakage, the security level and the parameters;
``privface protocols`` prints it.
"""
from . import zk
from .messages import (
    Challenge,
    Claim,
    CompareChallenge,
    CompareFinish,
    CompareRequest,
    Decision,
    EnrolRequest,
    LegacyTemplate,
    MatchStart,
    Presented,
    ProviderKey,
    Reply,
    Template,
    read_template,
)
from .params import LAMBDA, PAILLIER_BITS, VARIANTS, GsmParams
from .parties import Device, Enrolled, EnrolSession, ServiceProvider, Terminal, TerminalSession

_P = GsmParams()

DESCRIPTION = {
    "name": "gsm",
    "paper": "004: Agrawal et al. — Game-Set-MATCH: Using Mobile Devices for Seamless External-Facing "
             "Biometric Matching (CCS)",
    "task": "1:1 matching of a terminal's capture against the template on the user's device (cosine similarity)",
    "parties": ["Device", "Terminal", "ServiceProvider"],
    "threat_model": {
        "terminal_and_provider": "semi-honest, possibly colluding (§3)",
        "device": "pi1: semi-honest (Thm. 1); pi2, pi3: malicious (Thm. 2, 3) — a forged round-3 value is "
                  "caught (⊥) with probability ≥ 1 − 2^−λ; the template's norm relies on the §8 enrolment "
                  "proofs Π_en (§8: Π_epk, Fig. 9, Fig. 10) the provider verifies before signing (gsm.zk)",
    },
    "modes": {  # the variants, `--variant`
        "pi1": {"status": "implemented (§5 Fig. 3); off on a service terminal unless --allow-variant pi1, and then "
                          "its answer is the device's claim (gsm.Claim), never counted nor audited as accepted",
                "rounds": 3,
                "leakage": {"device": ["inner product ⟨u, w⟩"], "terminal": ["decision"]}},
        "pi2": {"status": "implemented (§6 Fig. 4), enrolment Π_en with the §8 proofs", "rounds": 4,
                "leakage": {"device": ["decision"], "terminal": ["inner product ⟨u, w⟩", "decision"]}},
        "pi3": {"status": "implemented (§7 Fig. 5–6: crypto/compare.py garbled circuit "
                          "+ Naor–Pinkas OT on edwards25519)",
                "rounds": 5, "leakage": {"device": ["decision"], "terminal": ["decision"]}},
    },
    "security_levels": [{"security_bits": 128, "paillier_modulus_bits": PAILLIER_BITS, "statistical_lambda": LAMBDA}],
    "default_security_bits": 128,
    "parameters": {
        "ell": _P.ell,
        "m": _P.m,
        "zeta": _P.zeta,
        "template": "signed m-bit vector with Σu_i² = ζ² exactly (templates/fixed_norm.py), shifted by 2^(m−1)",
        "cos_threshold": _P.cos_threshold,
        "threshold": _P.threshold,
        "threshold_rule": "T = ⌈T′·ζ²⌉, T′ = EER threshold of the plaintext cosine on ORL at this m",
        "packing": "seed 004 §4 with the compact ternary layout (crypto/packing.py); n, d per variant",
        "signature": "Ed25519 over the first message m1 (provider → device → terminal), with expiry",
        "ip_max": "ζ² (Cauchy–Schwarz for norm-ζ templates)",
        "ot": "Naor–Pinkas two-message OT on edwards25519 (libsodium; the sender's keys on curve25519-dalek): CDH, "
              "SHAKE-256 as a random oracle",
        "garbling": "free-XOR + half-gates, generator half-gates for a·IP (a is the terminal's): AES-128 as an "
                    "ideal permutation",
        "device_randomness": "Π_en-Enc r = h^s mod N, s of ⌈|N|/2⌉ bits: DJN10 §4.2 short-exponent assumption "
                             "(against the provider, who lacks the factorisation); every other r^N is uniform",
    },
    "enrolment": {"rounds": 2, "steps": ["enrol/start: epk, ⟦u_i⟧, Π_epk, Fig. 9 → Fig. 10 challenge",
                                         "enrol/finish: Fig. 10 response → signed m1"],
                  "proofs": zk.PROOFS},
    "steps": ["enrol", "m1 (reusable)", "round 2", "round 3", "round 4 (pi2)", "rounds 4–5 (pi3)"],
}

__all__ = [
    "Challenge", "Claim", "CompareChallenge", "CompareFinish", "CompareRequest", "DESCRIPTION", "Decision", "Device",
    "EnrolRequest", "EnrolSession", "Enrolled", "GsmParams", "LAMBDA", "LegacyTemplate", "MatchStart", "PAILLIER_BITS",
    "Presented", "ProviderKey", "Reply", "ServiceProvider", "Template", "Terminal", "TerminalSession", "VARIANTS",
    "read_template", "zk",
]
