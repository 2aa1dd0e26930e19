"""idface-paillier in persisted galleries (seed 003 §4.3, §5): key records and the stored block representation.

* **pk record**: N as big-endian bytes (⌈|N|/8⌉; 256 bytes at the seed's 2048-bit N). **sk record** (key store
  only): p ‖ q, each big-endian in half the width of N; loading checks p·q = N and that both are prime.
* **Block array**: a ``PaillierBlock``'s C^σ_j (σ ∈ {+, −}, j < width) as fixed-width big-endian bytes —
  numpy ``uint8`` of shape (2, width, ⌈|N²|/8⌉), so blocks go through the same ≤ 32 MiB pieces and commit
  record (dtype, shape, SHA-256) as the CKKS galleries.
* **Validation on load**: every ciphertext must be a unit of Z_{N²} — 0 < c < N² **and** gcd(c, N) = 1
  (``PaillierPublicKey.validate``) — before IP_DB multiplies it in; a damaged one is a ``GalleryError``.
"""
from __future__ import annotations

import gmpy2
import numpy as np

from ..crypto.paillier import PaillierPrivateKey, PaillierPublicKey, generate_paillier_keypair
from ..errors import CryptoError, PrivfaceError
from ..protocols.idface.paillier import PaillierBlock, PaillierScores
from .layout import GalleryError

BITS, TOY_BITS = 2048, 512
"""Seed 003 §5's 2048-bit modulus (112-bit security); 512 bits only behind ``insecure_test_params``."""


def generate_keypair(insecure_test_params: bool) -> tuple[PaillierPublicKey, PaillierPrivateKey]:
    return generate_paillier_keypair(TOY_BITS if insecure_test_params else BITS,
                                     insecure_test_params=insecure_test_params)


def public_to_bytes(pk: PaillierPublicKey) -> bytes:
    return int(pk.n).to_bytes((pk.bits + 7) // 8, "big")


def public_from_bytes(raw: bytes, insecure_test_params: bool) -> PaillierPublicKey:
    """N from its record; CryptoError if it is not a plausible modulus (or below 2048 bits without the flag)."""
    if not raw or raw[0] == 0:
        raise CryptoError("Paillier public key record is empty or not minimal")
    return PaillierPublicKey(int.from_bytes(raw, "big"), insecure_test_params=insecure_test_params)


def secret_to_bytes(sk: PaillierPrivateKey) -> bytes:
    half = (sk.public_key.bits + 1) // 2
    width = (half + 7) // 8
    return int(sk.p).to_bytes(width, "big") + int(sk.q).to_bytes(width, "big")


def secret_from_bytes(pk: PaillierPublicKey, raw: bytes) -> PaillierPrivateKey:
    """sk = (p, q) from its record; CryptoError unless p·q = N with p, q distinct primes."""
    if len(raw) % 2 or not raw:
        raise CryptoError("Paillier secret key record has an odd or zero length")
    h = len(raw) // 2
    return PaillierPrivateKey(pk, int.from_bytes(raw[:h], "big"), int.from_bytes(raw[h:], "big"))


def block_shape(pk: PaillierPublicKey, width: int) -> tuple[int, int, int]:
    return (2, width, pk.ciphertext_bytes)


def block_to_array(block: PaillierBlock, pk: PaillierPublicKey) -> np.ndarray:
    """C^σ_j as a (2, width, ciphertext bytes) uint8 array of big-endian values."""
    nb = pk.ciphertext_bytes
    raw = b"".join(int(c).to_bytes(nb, "big") for column in block.columns for c in column)
    return np.frombuffer(raw, dtype=np.uint8).reshape(2, len(block.columns[0]), nb)


def block_from_array(arr: np.ndarray, count: int, pk: PaillierPublicKey, what: str) -> PaillierBlock:
    """The block back from its array, every ciphertext checked to be a unit of Z_{N²} (GalleryError if not)."""
    columns = []
    for sign in range(arr.shape[0]):
        column = []
        for j in range(arr.shape[1]):
            try:
                column.append(pk.validate(gmpy2.mpz(int.from_bytes(arr[sign, j].tobytes(), "big"))))
            except CryptoError:
                raise GalleryError(f"{what}: ciphertext {sign}/{j} is not a unit of Z_N² (0 < c < N², "
                                   "gcd(c, N) = 1)") from None
        columns.append(column)
    return PaillierBlock(columns, count)


def scores_to_bytes(msg: PaillierScores, pk: PaillierPublicKey) -> bytes:
    """(ct⁺, ct⁻) per block as fixed-width big-endian values (the ident wire's ``ScoreChunk.residues``)."""
    nb = pk.ciphertext_bytes
    return b"".join(int(c).to_bytes(nb, "big") for pair in msg.values for c in pair)


def scores_from_bytes(raw: bytes, counts: list[int], pk: PaillierPublicKey) -> PaillierScores:
    """The inverse of ``scores_to_bytes``; PrivfaceError on a wrong length, CryptoError on a non-unit."""
    nb = pk.ciphertext_bytes
    if len(raw) != 2 * nb * len(counts):
        raise PrivfaceError(f"{len(raw)} ciphertext bytes, expected {2 * nb * len(counts)}")
    cts = [pk.validate(gmpy2.mpz(int.from_bytes(raw[i:i + nb], "big"))) for i in range(0, len(raw), nb)]
    return PaillierScores(list(zip(cts[0::2], cts[1::2])), list(counts))


def concat_scores(parts: list[PaillierScores]) -> PaillierScores:
    """Shards' IP_DB messages in block order: the message one process builds over all blocks."""
    return PaillierScores([v for p in parts for v in p.values], [c for p in parts for c in p.counts])
