"""Shared by the crypto core (internal): security policy, random primes and units, CRT, byte format.

Randomness comes from `secrets` only; big-integer arithmetic from gmpy2 (GMP).
"""
from __future__ import annotations

import hashlib
import os
import secrets
from concurrent.futures import ThreadPoolExecutor

import gmpy2
from gmpy2 import mpz

from ..errors import CryptoError

#: Smallest modulus for factoring-based schemes without the test switch: 112-bit security.
MIN_MODULUS_BITS = 2048
#: Modulus size → security bits for factoring-based schemes (NIST SP 800-57 Part 1 Rev. 5, Table 2).
SECURITY_BITS = {2048: 112, 3072: 128, 7680: 192, 15360: 256}


def security_bits(modulus_bits: int) -> int:
    """Security of a factoring-based modulus of this size (0 below 2048 bits)."""
    return max((s for b, s in SECURITY_BITS.items() if modulus_bits >= b), default=0)


def check_modulus_bits(bits: int, insecure_test_params: bool, scheme: str) -> None:
    """Refuse moduli under 2048 bits unless a test asks for them explicitly."""
    if bits < MIN_MODULUS_BITS and not insecure_test_params:
        raise CryptoError(
            f"{scheme}: a {bits}-bit modulus is below 112-bit security; use at least "
            f"{MIN_MODULUS_BITS} bits (3072 for 128-bit), or insecure_test_params=True in tests"
        )


def as_int(value, what: str) -> mpz:
    """An int (or mpz) as mpz; anything else (bool, float, str, bytes) is a CryptoError."""
    if isinstance(value, bool) or not isinstance(value, (int, type(mpz(0)))):
        raise CryptoError(f"{what} must be an integer, got {type(value).__name__}")
    return mpz(value)


def random_prime(bits: int, low: int = 1, low_bits: int = 1) -> mpz:
    """Uniform random prime of exactly `bits` bits with its two top bits set and p ≡ low (mod 2^low_bits).

    Two top bits set make the product of two such primes exactly 2·bits long. Rejection sampling
    (not next_prime) keeps the choice uniform among the admissible primes.
    """
    if low % 2 == 0 or not 0 < low < 2**low_bits or low_bits > bits - 3:
        raise CryptoError(f"no {bits}-bit prime ≡ {low} mod 2^{low_bits} can be drawn")
    top = 3 << (bits - 2)
    for _ in range(100 * bits):  # ≈ 0.35·bits candidates expected; the cap only stops impossible toy requests
        x = ((secrets.randbits(bits) | top) >> low_bits << low_bits) | low
        if gmpy2.is_prime(x):
            return mpz(x)
    raise CryptoError(f"found no {bits}-bit prime ≡ {low} mod 2^{low_bits}; choose more bits")


def random_unit(n) -> mpz:
    """Uniform element of Z*_n."""
    while True:
        r = secrets.randbelow(n)
        if r and gmpy2.gcd(r, n) == 1:
            return mpz(r)


def crt(xp, xq, p, q, q_inv_p) -> mpz:
    """The x mod p·q with x ≡ xp (mod p), x ≡ xq (mod q), given q_inv_p = q⁻¹ mod p (Garner)."""
    return xq + q * ((xp - xq) * q_inv_p % p)


def centered(m, modulus) -> int:
    """The representative of m mod `modulus` in (−modulus/2, modulus/2]."""
    m = int(m) % int(modulus)
    return m - int(modulus) if m > int(modulus) // 2 else m


def release_gil() -> None:
    """Let gmpy2 drop the GIL during big-integer operations in the calling thread (thread-pool initializer).

    gmpy2 keeps the GIL by default; with ``allow_release_gil`` its mpz operations (powmod, mul, mod)
    run outside it, so base decryptions in a thread pool use several cores.
    """
    gmpy2.get_context().allow_release_gil = True


def parallel_map(fn, items, workers: int | None) -> list:
    """[fn(x) for x in items] on ``workers`` threads (None: one per core; 1: serial) with gmpy2 off the GIL."""
    items = list(items)
    workers = (os.cpu_count() or 1) if workers is None else int(as_int(workers, "workers"))
    if workers < 1:
        raise CryptoError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), initializer=release_gil) as pool:
        return list(pool.map(fn, items))


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
