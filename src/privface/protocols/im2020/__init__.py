"""im2020 — Im, Jeon, Lee, "Practical Privacy-Preserving Face Authentication for Smartphones Secure Against
Malicious Clients" (IEEE TIFS 2020; seed 000 §III–§VII).

``DESCRIPTION`` declares, as data, the threat model, the leakage, the security levels and the parameters;
``privface protocols`` prints it.
"""
from .blind import Decision, Randomizers, blind_esed, decide, unblind
from .messages import (
    AuthChallenge,
    AuthFinish,
    AuthResult,
    AuthStart,
    ClientKey,
    CompareChallenge,
    CompareFinish,
    CompareRequest,
    EnrolRequest,
    EnrolResponse,
    RevokeChallenge,
    Revoked,
    RevokeProof,
    RevokeRequest,
    RevokeResponse,
    RevokeStart,
    SignedEnrolRequest,
    TPImageRequest,
    TPRequest,
    TPResponse,
)
from .params import DEFAULT_TAU, SECURITY_LEVELS, Im2020Params
from .parties import AuthSession, Client, CompareSession, RevokeSession, Server, SubjectExistsError, TrustedParty

_P = Im2020Params()

DESCRIPTION = {
    "name": "im2020",
    "paper": "000: Im, Jeon, Lee — Practical Privacy-Preserving Face Authentication for Smartphones "
             "Secure Against Malicious Clients (IEEE TIFS 2020)",
    "task": "1:1 verification of a claimed ID",
    "parties": ["Client", "Server", "TrustedParty (optional, §VII)"],
    "threat_model": {
        "server": "honest-but-curious (HBCS, Thm. 2)",
        "client": "malicious: MC1 learns nothing beyond r (Thm. 3); MC2 without Γ passes with "
                  "probability ≤ c + τ/|M| (Thm. 4)",
        "trusted_party": "trusted to check that Γ comes from a face, then encrypts and signs (§VII)",
    },
    "modes": {
        "basic": {"status": "implemented",
                  "leakage": {"server": ["squared Euclidean distance s", "decision r", "subject ID"],
                              "client": ["decision r"]}},
        "secure-comparison": {"status": "implemented (§VII Fig. 8: crypto/compare.py garbled circuit + OT)",
                              "leakage": {"server": ["decision r", "subject ID"], "client": ["decision r"]},
                              "compare_bits": "the full k (default; a forged s* passes with probability τ/2^k) "
                                              "or 64 (τ/2^64, ~4× cheaper)"},
    },
    "security_levels": [
        {"security_bits": bits, "jl_modulus_bits": p.bits, "k_message_bits": p.k}
        for bits, p in SECURITY_LEVELS.items()
    ],
    "default_security_bits": _P.security_bits,
    "parameters": {
        "template_dims": _P.dims,
        "quantization_scale": _P.scale,
        "coordinate_bound": _P.max_abs,
        "max_sed": _P.max_sed,
        "tau": _P.tau,
        "tau_source": "EER threshold of `privface eval --dataset orl --json` (threshold_quantized); "
                      "override with --tau / Im2020Params(tau=…)",
        "k_rule": "k ≥ bits(max SED) + λ, so SED never wraps and τ/2^k ≤ 2^−λ",
        "randomizers": "r0 ∈ M_inv (odd), r1 ∈ M, fresh per attempt",
        "tp_signature": "ECDSA P-256 / SHA-256 over ID‖C‖pk‖serial‖expires; the server refuses an expired one "
                        "and one whose serial is not above the last it stored for the ID (kept after revocation)",
        "registration": "create-only: an enrolled ID is replaced only by a caller allowed to (admin key)",
        "public_key_sizes": "exactly the configured N bits and k",
        "revocation": "by proof of key possession: the server sends c = Enc(ρ), ρ ∈_R M, with a SHA-256 commitment "
                      "to the answer; the client returns ρ = Dec(c) only if it opens the commitment (any enrol "
                      "key); without the proof only an admin key may revoke",
    },
    "steps": ["enrol", "auth/start", "auth/finish", "revoke/start", "revoke/finish", "revoke"],
    "steps_secure_comparison": ["enrol", "auth/start", "auth/compare", "auth/finish", "revoke/start",
                                "revoke/finish", "revoke"],
}

__all__ = [
    "AuthChallenge", "AuthFinish", "AuthResult", "AuthSession", "AuthStart", "ClientKey", "Client", "CompareChallenge",
    "CompareFinish", "CompareRequest", "CompareSession", "DEFAULT_TAU",
    "DESCRIPTION", "Decision", "Im2020Params", "Randomizers", "EnrolRequest", "EnrolResponse",
    "RevokeChallenge", "RevokeProof", "RevokeRequest", "RevokeResponse", "RevokeSession", "RevokeStart", "Revoked",
    "SECURITY_LEVELS", "Server", "SignedEnrolRequest",
    "SubjectExistsError", "TPImageRequest", "TPRequest", "TPResponse",
    "TrustedParty",
    "blind_esed", "decide", "unblind",
]
