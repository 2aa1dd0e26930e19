"""hers — the HERS baseline as seed 003 §3 describes it: database encryption (ENC_DB, IP_DB; Alg. 1–2) over
CKKS slots and the two-server identification of §3.2 (``LocalServer`` with pk and the encrypted database,
``KeyServer`` with sk returning only the best index above τ, or reject).

``DESCRIPTION`` declares, as data, the threat model, the leakage, the security level and the parameters.
"""
from .params import HERS_CKKS, HERS_ERROR, QUERY_SCALE_BITS
from .parties import LOCAL_SERVER_LEAKAGE, THREAT_MODEL, Decision, KeyServer, LocalServer, identify
from .scheme import HERS, CKKSScores, HERSBlock, HERSKey

DESCRIPTION = {
    "name": "hers",
    "paper": "003: IDFace (§3.1 HERS as a database encryption scheme, §3.2 local server + key server)",
    "task": "1:N identification",
    "parties": ["LocalServer", "KeyServer"],
    "threat_model": THREAT_MODEL,
    "modes": {"ckks": {"status": "implemented", "params": HERS_CKKS.name, "packing": "one column per ciphertext",
                       "leakage": {"key_server": ["all matching scores (not released)"]}}},
    "leakage": {
        "local_server": LOCAL_SERVER_LEAKAGE,
        "key_server": ["every matching score (decrypted, never released)", "gallery size"],
    },
    "security_levels": [{"scheme": "ckks", "params": HERS_CKKS.name, "security_bits": HERS_CKKS.security_bits,
                         "estimate": "HE standard table (SEAL CoeffModulus.MaxBitCount)"}],
    "default_security_bits": 128,
    "parameters": {"poly_modulus_degree": HERS_CKKS.poly_modulus_degree, "slots": HERS_CKKS.poly_modulus_degree // 2,
                   "coeff_modulus_bits": list(HERS_CKKS.coeff_modulus_bits),
                   "template_scale_bits": HERS_CKKS.scale_bits,
                   "query_scale_bits": QUERY_SCALE_BITS, "score_error_bound": HERS_ERROR},
    "steps": ["enrol (ENC_DB per block of 4096)", "identify (IP_DB → key server → index or reject)"],
    "galleries": "persisted by privface.scale.gallery (block-atomic, resumable); Ray sharding in scale.sharded",
    "http_roles": "protocol ident (service/bindings/hers.py): key server (attach, decide: chunked IP_DB message) "
                  "and local server (identify), for hers and idface-ckks galleries",
    "not_yet": ["encrypted queries"],
}

__all__ = ["CKKSScores", "DESCRIPTION", "Decision", "HERS", "HERSBlock", "HERSKey", "HERS_CKKS", "HERS_ERROR",
           "KeyServer", "LocalServer", "QUERY_SCALE_BITS", "identify"]
