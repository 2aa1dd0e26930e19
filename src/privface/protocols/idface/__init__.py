"""idface — IDFace (seed 003 §4): almost-isometric transform T_α / T_β, ± separation, space-efficient
Encode/Decode, and IDFace.ENC_DB / IP_DB with additions only, over CKKS (coefficient packing) and Paillier,
in the two-server deployment of §3.2 (``hers.LocalServer`` / ``hers.KeyServer``).

``DESCRIPTION`` declares, as data, the threat model, the leakage, the security levels and the parameters.
"""
from ..hers.parties import LOCAL_SERVER_LEAKAGE, THREAT_MODEL, Decision, KeyServer, LocalServer, identify
from .ckks import IDFACE_CKKS, NOISE_BITS, PAYLOAD_BITS, IDFaceCKKS, IDFaceCKKSKey
from .lift import LIFT_SEED
from .paillier import IDFacePaillier, IDFacePaillierKey, PaillierScores
from .params import PARAMETER_SETS, IDFaceParams
from .transform import decode, encode, plaintext_scores, separate, t_alpha

DESCRIPTION = {
    "name": "idface",
    "paper": "003: IDFace — HE-based secure and efficient face identification (§4)",
    "task": "1:N identification",
    "parties": ["LocalServer", "KeyServer"],
    "threat_model": THREAT_MODEL,
    "modes": {
        "ckks": {"status": "implemented", "params": IDFACE_CKKS.name, "packing": f"coefficients, Δ = 2^{NOISE_BITS}, "
                 f"{PAYLOAD_BITS} payload bits",
                 "leakage": {"key_server": ["all ⟨T_α(x), T_β(y)⟩ (not released)"]}},
        "paillier": {"status": "implemented", "params": "2048-bit N", "packing": "one integer per ciphertext",
                     "leakage": {"key_server": ["all ⟨T_α(x), T_β(y)⟩ (not released)"]}},
    },
    "leakage": {
        "local_server": LOCAL_SERVER_LEAKAGE,
        "key_server": ["every transformed inner product ⟨T_α(x), T_β(y)⟩ (never released)", "gallery size"],
    },
    "security_levels": [
        {"scheme": "ckks", "params": IDFACE_CKKS.name, "security_bits": IDFACE_CKKS.security_bits,
         "estimate": "HE standard table (SEAL CoeffModulus.MaxBitCount)"},
        {"scheme": "paillier", "params": "2048-bit", "security_bits": 112, "estimate": "NIST SP 800-57"},
    ],
    "default_security_bits": 112,
    "parameters": {"sets": {d: {"alpha": a, "beta": list(b)} for d, (a, b) in PARAMETER_SETS.items()},
                   "base": "p = min(α, β) + 1",
                   "centring": "optional mean μ subtracted (then renormalised) before T_α/T_β: the backend's "
                               "shipped mean (centring_mean.json, dlib-resnet128 from ORL) or the gallery's",
                   "lift": "optional, our addition (not in seed 003): after centring, x ↦ x·F with F ∈ R^{d×D} "
                           "orthonormal rows from a fixed seed (lift.py), then T_α/T_β in D dimensions; inner "
                           "products preserved exactly; the eval's default for d = 128 is D = 2048 "
                           "(α = β = 1365)"},
    "steps": ["enrol (T_α, Encode, ENC_DB)", "identify (T_β, IP_DB → key server → index or reject)"],
    "galleries": "idface-ckks and idface-paillier persisted by privface.scale.gallery (block-atomic, resumable; "
                 "the centring mean and the lift's D and seed are recorded and applied to every query; Paillier "
                 "blocks as fixed-width big-endian ciphertexts, each checked to be a unit of Z_N² on load: "
                 "scale.paillier_blocks); Ray sharding in scale.sharded; HTTP roles: privface serve --protocol "
                 "ident --role key|local (both)",
    "not_yet": [],
}

__all__ = ["DESCRIPTION", "Decision", "IDFACE_CKKS", "IDFaceCKKS", "IDFaceCKKSKey", "IDFacePaillier",
           "IDFacePaillierKey", "IDFaceParams", "KeyServer", "LIFT_SEED", "LocalServer", "PARAMETER_SETS",
           "PaillierScores",
           "decode", "encode", "identify", "plaintext_scores", "separate", "t_alpha"]
