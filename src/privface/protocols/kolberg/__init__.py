"""kolberg — Kolberg et al., "Efficiency Analysis of Post-quantum-secure Face Template Protection Schemes based
on Homomorphic Encryption" (BIOSIG; seed 002 §2.1–§2.2): a DB server and an authentication server holding sk.

``DESCRIPTION`` declares, as data, the threat model, the leakage, the security levels and the parameters;
``privface protocols`` prints it.
"""
from ...crypto.lattice import BFV_128, CKKS_128, flood_sigma
from ...crypto.ntru import NTRU_1024
from .messages import (
                       AuthDecision,
                       Challenge,
                       ChallengeRequest,
                       DistanceBatch,
                       EnrolRequest,
                       EnrolResponse,
                       IdentifyRequest,
                       PublicKey,
                       Result,
                       VerifyRequest,
)
from .params import DEFAULT_THRESHOLDS, LSSC_EDGES, SCHEMES, KolbergParams
from .parties import CHUNK, AuthServer, Client, DBServer, plaintext_distance, protect

DESCRIPTION = {
    "name": "kolberg",
    "paper": "002: Kolberg et al. — Efficiency Analysis of Post-quantum-secure Face Template Protection "
             "Schemes based on Homomorphic Encryption (BIOSIG)",
    "task": "1:1 verification of a claimed ID and 1:N identification",
    "parties": ["Client", "DBServer", "AuthServer"],
    "threat_model": {
        "db_server": "honest-but-curious, may be compromised: holds only ciphertexts and the public key",
        "auth_server": "honest-but-curious, holds the secret key; must not collude with the DB server",
        "client": "honest (no proof that a probe comes from a face)",
        "freshness": "each verification answers a fresh 256-bit server nonce (verify/challenge), kept in the "
                     "caller's session and accepted once: a captured VerifyRequest is not accepted again. The nonce "
                     "travels beside the probe, not inside it: the probe is a public-key ciphertext anyone can "
                     "re-randomise, so a holder of a verify key who captured one can still answer a new challenge "
                     "with it (TLS keeps probes from being captured)",
    },
    "modes": {  # the schemes, `--scheme`; leakage common to all: see "leakage"
        "ckks": {"status": "implemented", "template": "float dlib embedding", "distance": "squared Euclidean",
                 "leakage": {"auth_server": [f"squared distances + N(0, σ²) flooding, σ = {flood_sigma():.2g}"]}},
        "bfv": {"status": "implemented", "template": "⌊128·x⌋ integers", "distance": "squared Euclidean (exact)",
                "leakage": {"auth_server": ["exact squared distances"]}},
        "ntru": {"status": "implemented", "template": "LSSC, 3 bits per feature", "distance": "Hamming via XOR",
                 "leakage": {"auth_server": ["Hamming distances", "positions where the LSSC bits differ"]}},
    },
    "leakage": {
        "db_server": ["subject ID claimed (verification)", "decision", "matched ID (identification)"],
        "auth_server": ["distances to every compared reference", "gallery size", "decision"],
        "client": ["decision", "matched ID (identification)"],
        "not_leaked_to_auth_server": ["which client asked", "subject IDs (random request id, random order)"],
    },
    "security_levels": [
        {"scheme": "ckks", "params": CKKS_128.name, "security_bits": CKKS_128.security_bits,
         "estimate": "HE standard table (SEAL CoeffModulus.MaxBitCount)"},
        {"scheme": "bfv", "params": BFV_128.name, "security_bits": BFV_128.security_bits,
         "estimate": "HE standard table (SEAL CoeffModulus.MaxBitCount)"},
        {"scheme": "ntru", "params": NTRU_1024.name, "security_bits": NTRU_1024.security_bits,
         "estimate": "core-SVP primal uSVP (crypto/ntru.py)"},
    ],
    "default_security_bits": 128,
    "parameters": {"default_thresholds": DEFAULT_THRESHOLDS, "lssc_edges": list(LSSC_EDGES),
                   "distances_per_batch": CHUNK},
    "steps": ["public-key", "enrol", "verify/challenge", "verify", "identify", "revoke", "auth/keys", "auth/decide",
              "auth/rotate/begin", "auth/rotate/reencrypt", "auth/rotate/activate", "auth/rotate/retire"],
    "roles": {"db": "privface serve --protocol kolberg --role db --auth-url URL",
              "auth": "privface serve --protocol kolberg --role auth"},
    "key_rotation": {"command": "privface rotate-keys --protocol kolberg --db URL --auth-url URL",
                     "method": "blind re-encryption: DB adds Enc_old(R), R uniform (BFV mod t, CKKS mod q, NTRU "
                               "bits); auth decrypts m ⊞ R and re-encrypts under the new key; DB removes Enc_new(R)",
                     "leakage": {"auth_server": ["gallery size", "m ⊞ R: uniform, independent of the templates"]},
                     "crash_safety": "per-record key versions, atomic replace, both keys until every record "
                                     "is on the new one, resumable"},
    "not_yet": ["authentication of the auth/rotate/* admin steps (issue 8)"],
}

__all__ = ["AuthDecision", "AuthServer", "Challenge", "ChallengeRequest", "Client", "DBServer", "DESCRIPTION",
           "DEFAULT_THRESHOLDS", "DistanceBatch", "EnrolRequest", "EnrolResponse", "IdentifyRequest", "KolbergParams",
           "LSSC_EDGES", "PublicKey", "Result", "SCHEMES", "VerifyRequest", "plaintext_distance", "protect"]
