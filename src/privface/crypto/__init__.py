"""Crypto core: schemes only, no protocol logic (docs/architecture.md). This part is the additively homomorphic half:

* ``paillier`` — Paillier (seed 004 §2.1) with CRT decryption, owner encryption and r^N pools;
* ``joye_libert`` — Joye–Libert LHE over Z_{2^k} (the base scheme of seed 000), ``JL_112`` / ``JL_128``;
* ``catalano_fiore`` — the Catalano–Fiore transform and the improved transform HE′ (seed 000 §II-C, §IV-A)
  over any ``lhe`` base scheme;
* ``packing`` — the GSM packing scheme (seed 004 §4) and its parameter solver;
* ``ot``, ``garble``, ``compare`` — Naor–Pinkas OT, half-gates garbled circuits and the two-party secure
  comparison built from them (seed 000 §VII Fig. 8, seed 004 §7); import them by module.

The lattice half, imported by module: ``lattice`` (CKKS/BFV on SEAL through tenseal.sealapi, 128-bit) and
``ntru`` (XOR-homomorphic NTRU for binary templates), seed 002 §2.2.

Keys below 2048 bits exist only with ``insecure_test_params=True``.
"""
from .joye_libert import (
    JL_112,
    JL_128,
    JLParams,
    JoyeLibertCiphertext,
    JoyeLibertPrivateKey,
    JoyeLibertPublicKey,
    generate_joye_libert_keypair,
)
from .lhe import LHECiphertext, LHEPrivateKey, LHEPublicKey
from .numbers import MIN_MODULUS_BITS, SECURITY_BITS, security_bits
from .paillier import (
    PaillierCiphertext,
    PaillierPrivateKey,
    PaillierPublicKey,
    RnPool,
    generate_paillier_keypair,
)

__all__ = [
    "JL_112",
    "JL_128",
    "JLParams",
    "JoyeLibertCiphertext",
    "JoyeLibertPrivateKey",
    "JoyeLibertPublicKey",
    "LHECiphertext",
    "LHEPrivateKey",
    "LHEPublicKey",
    "MIN_MODULUS_BITS",
    "PaillierCiphertext",
    "PaillierPrivateKey",
    "PaillierPublicKey",
    "RnPool",
    "SECURITY_BITS",
    "generate_joye_libert_keypair",
    "generate_paillier_keypair",
    "security_bits",
]
