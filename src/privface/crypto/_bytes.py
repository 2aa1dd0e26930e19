"""Framing of the lattice/NTRU byte formats (internal): type, size limit and magic/version checks."""
from __future__ import annotations

from ..errors import CryptoError

#: Largest blob any lattice or NTRU loader accepts (a CKKS context with Galois keys stays far below).
MAX_BLOB = 64 << 20


def expect_magic(blob, magic: bytes, what: str) -> bytes:
    """The bytes after ``magic``; CryptoError if ``blob`` is not bytes, too large, or has another magic."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise CryptoError(f"{what} must be bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) > MAX_BLOB:
        raise CryptoError(f"{what}: {len(blob)} bytes is over the {MAX_BLOB}-byte limit")
    if not blob.startswith(magic):
        raise CryptoError(f"{what}: wrong magic/version (not a {what})")
    return blob[len(magic):]
