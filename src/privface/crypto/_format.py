"""The byte format of every serialized group ciphertext (internal to the crypto core)."""
from __future__ import annotations

import hashlib

from gmpy2 import mpz

from ..errors import CryptoError

# ------------------------------------------------------------------ byte format
# Every serialized ciphertext: b"PF" | scheme tag (1 byte) | format version (1 byte) |
# key fingerprint (8 bytes) | value, big-endian, fixed length for the key.

MAGIC = b"PF"
VERSION = 1
HEADER_BYTES = 12


def fingerprint(tag: bytes, *values) -> bytes:
    """8-byte key identifier: SHA-256 over the scheme tag and the public values (not a secret)."""
    h = hashlib.sha256(MAGIC + tag)
    for v in values:
        v = int(v)
        h.update(v.to_bytes((v.bit_length() + 7) // 8 or 1, "big"))
    return h.digest()[:8]


def pack(tag: bytes, key_fingerprint: bytes, value, length: int) -> bytes:
    return MAGIC + tag + bytes([VERSION]) + key_fingerprint + int(value).to_bytes(length, "big")


def unpack(tag: bytes, key_fingerprint: bytes, data, length: int, scheme: str) -> mpz:
    """The value of a serialized ciphertext, after checking type, exact length, header and key."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CryptoError(f"{scheme} ciphertext must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) != HEADER_BYTES + length:
        raise CryptoError(f"{scheme} ciphertext must be {HEADER_BYTES + length} bytes for this key, got {len(data)}")
    if data[:2] != MAGIC or data[2:3] != tag:
        raise CryptoError(f"not a serialized {scheme} ciphertext (bad header)")
    if data[3] != VERSION:
        raise CryptoError(f"unsupported {scheme} ciphertext format version {data[3]}")
    if data[4:12] != key_fingerprint:
        raise CryptoError(f"{scheme} ciphertext was made under a different public key")
    return mpz(int.from_bytes(data[HEADER_BYTES:], "big"))
