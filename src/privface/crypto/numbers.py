"""Number theory for the factoring-based schemes: the security policy for moduli, random primes and units,
CRT, centred residues, batched inversion and multi-exponentiation.

Randomness comes from `secrets` only; big-integer arithmetic from gmpy2 (GMP).
"""
from __future__ import annotations

import secrets

import gmpy2
from gmpy2 import mpz

from ..errors import CryptoError
from .parallel import default_workers, parallel_map

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


def random_below_many(n, count: int) -> list[mpz]:
    """``count`` integers in [0, n) from one CSPRNG read: each is a (|n| + 64)-bit string reduced mod n,
    within statistical distance 2^−64 of uniform (NIST SP 800-90A Rev. 1 §A.5.1, the simple modular
    method) — one system call instead of one or more per value."""
    n = int(n)
    if n < 1:
        raise CryptoError("random_below_many needs n ≥ 1")
    size = (n.bit_length() + 64 + 7) // 8
    blob = secrets.token_bytes(size * count)
    return [mpz(int.from_bytes(blob[i * size:(i + 1) * size], "big") % n) for i in range(count)]


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


def batch_invert(values: list, modulus) -> list:
    """[v⁻¹ mod X] with one inversion and 3(n − 1) multiplications (Montgomery's trick)."""
    if not values:
        return []
    prefix = [mpz(values[0])]
    for v in values[1:]:
        prefix.append(prefix[-1] * v % modulus)
    try:
        inv = gmpy2.invert(prefix[-1], modulus)
    except ZeroDivisionError:
        raise CryptoError("batch inversion of a non-unit") from None
    out = [None] * len(values)
    for i in range(len(values) - 1, 0, -1):
        out[i] = inv * prefix[i - 1] % modulus
        inv = inv * values[i] % modulus
    out[0] = inv
    return out


def multiexp(bases: list, exponents: list, modulus, window: int | None = None, workers: int | None = 1):
    """Π b_i^(e_i) mod X for non-negative e_i by Pippenger's bucket method: per ``window``-bit digit
    position, bucket the bases by digit and sum the buckets by running products — about
    (max bits / window)·(n + 2^(window+1)) multiplications instead of n full exponentiations. The window
    defaults to the one minimising that count for each chunk; with ``workers`` > 1 (and at least 64 bases)
    one chunk of bases per thread."""
    if len(bases) != len(exponents):
        raise CryptoError("multiexp needs as many exponents as bases")
    pairs = [(b, int(e)) for b, e in zip(bases, exponents)]
    if any(e < 0 for _, e in pairs):
        raise CryptoError("multiexp exponents must be non-negative")
    pairs = [(b, e) for b, e in pairs if e]
    w = default_workers(workers)
    if w > 1 and len(pairs) >= 64:
        acc = mpz(1)
        for part in parallel_map(lambda chunk: _pippenger(chunk, modulus, window), [pairs[i::w] for i in range(w)], w):
            acc = acc * part % modulus
        return acc
    return _pippenger(pairs, modulus, window)


def _pippenger(pairs: list, modulus, window: int | None):
    bits = max((e.bit_length() for _, e in pairs), default=0)
    if window is None:  # the cheapest per the cost (bits/window)·(n + 2^(window+1)) of the loop below
        window = min(range(1, 9), key=lambda c: -(-max(bits, 1) // c) * (len(pairs) + (2 << c)))
    mask = (1 << window) - 1
    acc = mpz(1)
    for pos in range((bits - 1) // window * window if bits else -1, -1, -window):
        if acc != 1:
            acc = gmpy2.powmod(acc, 1 << window, modulus)
        buckets: list = [None] * (mask + 1)
        for b, e in pairs:
            d = (e >> pos) & mask
            if d:
                buckets[d] = b if buckets[d] is None else buckets[d] * b % modulus
        running = total = None  # Σ_d d·bucket_d as Π running products, from the top bucket down
        for d in range(mask, 0, -1):
            if buckets[d] is not None:
                running = buckets[d] if running is None else running * buckets[d] % modulus
            if running is not None:
                total = running if total is None else total * running % modulus
        if total is not None:
            acc = acc * total % modulus
    return acc % modulus
