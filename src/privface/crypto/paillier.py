"""Paillier encryption (seed 004 §2.1, Paillier 1999) with g = N + 1, CRT decryption and owner encryption.

Keys: N = pq with |p| = |q| (two top bits set, so N has exactly the requested length), g = N + 1,
hence g^m = 1 + mN (mod N²) and

    Enc(m; r) = (1 + mN) · r^N mod N²,   r ∈ Z*_N,   M = Z_N.

Decryption by CRT (as python-paillier, which the tests cross-check): m_p = L_p(c^(p−1) mod p²)·h_p
mod p with L_p(x) = (x − 1)/p and h_p = L_p(g^(p−1) mod p²)⁻¹ mod p; the same mod q; m = CRT(m_p, m_q).

Owner encryption (``PaillierPrivateKey.encrypt``). r^N mod p² depends only on r mod p and maps Z*_p
one-to-one onto the (p−1)-th roots of unity μ_{p−1} ⊂ Z*_{p²} (gcd(q, p−1) = 1). So does z ↦ z^p mod p²
(z^p ≡ z mod p by Fermat, and (z^p)^(p−1) = z^φ(p²) = 1). Hence for uniform z_p ∈ Z*_p, z_q ∈ Z*_q the CRT
of z_p^p mod p² and z_q^q mod q² is distributed exactly as r^N mod N² for uniform r: two |p|-bit
exponentiations modulo p², q² replace one |N|-bit exponentiation modulo N² (3–4× less work).

``RnPool`` precomputes r^N values ahead of time (seed 004 §9: encryption is dominated by r^N mod N²);
``OwnerShortExponentRn`` makes the key owner's (r, r^N) cheap (DJN10 §4.2; its docstring says who may use it).
"""
from __future__ import annotations

import secrets
from collections import deque

import gmpy2
from gmpy2 import mpz

from ..errors import CryptoError
from ._ciphertext import GroupCiphertext, GroupPrivateKey, GroupPublicKey
from ._format import fingerprint
from .joye_libert import fixed_base_pow, fixed_base_table
from .numbers import as_int, check_modulus_bits, crt, random_prime, random_unit
from .parallel import parallel_map


class PaillierCiphertext(GroupCiphertext):
    """c ∈ Z*_{N²}: ``c1 + c2``, ``c + m``, ``a * c``, ``-c``, ``c.rerandomize()``, ``to_bytes``/``from_bytes``."""

    __slots__ = ()

    def rerandomize(self, *, pool: RnPool | None = None) -> PaillierCiphertext:
        """c·r^N mod N²: same plaintext, fresh randomness (r^N from ``pool`` when given)."""
        pk = self.public_key
        rn = pk.random_rn() if pool is None else pool.take(pk)
        return self._trusted(pk, self.value * rn % pk.nsquare)


class PaillierPublicKey(GroupPublicKey):
    """pk = N (g = N + 1 implied). Build it from a received N with ``PaillierPublicKey(n)``."""

    SCHEME = "Paillier"
    TAG = b"P"
    CIPHERTEXT = PaillierCiphertext
    __slots__ = ("n", "nsquare", "bits", "fingerprint", "ciphertext_bytes", "insecure_test_params")

    def __init__(self, n, *, insecure_test_params: bool = False) -> None:
        n = as_int(n, "Paillier modulus N")
        if n < 15 or n % 2 == 0 or gmpy2.is_prime(n) or gmpy2.is_square(n):
            raise CryptoError("Paillier modulus N must be an odd product of two distinct primes")
        check_modulus_bits(n.bit_length(), insecure_test_params, self.SCHEME)
        self.n = n
        self.nsquare = n * n
        self.bits = n.bit_length()
        self.fingerprint = fingerprint(self.TAG, n)
        self.ciphertext_bytes = (self.nsquare.bit_length() + 7) // 8
        self.insecure_test_params = insecure_test_params

    @property
    def message_space(self) -> int:
        """|M| = N: plaintexts are residues mod N (``decrypt_signed`` maps them to (−N/2, N/2])."""
        return int(self.n)

    @property
    def group_modulus(self):
        return self.nsquare

    def plain_factor(self, m):
        """g^m = 1 + mN (mod N²) for 0 ≤ m < N."""
        return (1 + m * self.n) % self.nsquare

    def random_rn(self):
        """r^N mod N² for a fresh uniform r ∈ Z*_N (the costly part of encryption)."""
        return gmpy2.powmod(random_unit(self.n), self.n, self.nsquare)

    def encrypt(self, m, *, pool: RnPool | None = None) -> PaillierCiphertext:
        """Enc(m) = (1 + mN)·r^N mod N², m any integer (taken mod N); r^N from ``pool`` when given."""
        m = as_int(m, "plaintext") % self.n
        rn = self.random_rn() if pool is None else pool.take(self)
        return PaillierCiphertext._trusted(self, self.plain_factor(m) * rn % self.nsquare)

    def validate(self, value):
        """The value as mpz if it is a unit of Z_{N²} (0 < c < N², gcd(c, N) = 1), else CryptoError."""
        return self._unit(value, "Z_{N²}", "N²")

    def _public_values(self) -> tuple:
        return (self.n,)


class PaillierPrivateKey(GroupPrivateKey):
    """sk = (p, q) with CRT constants. ``repr`` never shows them."""

    __slots__ = ("public_key", "p", "q", "psquare", "qsquare", "hp", "hq", "q_inv_p", "qsq_inv_psq")

    def __init__(self, public_key: PaillierPublicKey, p, q) -> None:
        p, q = as_int(p, "p"), as_int(q, "q")
        if p * q != public_key.n or p == q or not (gmpy2.is_prime(p) and gmpy2.is_prime(q)):
            raise CryptoError("p and q must be two distinct primes with p·q = N")
        if gmpy2.gcd(public_key.n, (p - 1) * (q - 1)) != 1:
            raise CryptoError("Paillier needs gcd(N, (p−1)(q−1)) = 1")
        self.public_key = public_key
        self.p, self.q = p, q
        self.psquare, self.qsquare = p * p, q * q
        g = public_key.n + 1
        self.hp = gmpy2.invert((gmpy2.powmod(g, p - 1, self.psquare) - 1) // p, p)
        self.hq = gmpy2.invert((gmpy2.powmod(g, q - 1, self.qsquare) - 1) // q, q)
        self.q_inv_p = gmpy2.invert(q, p)
        self.qsq_inv_psq = gmpy2.invert(self.qsquare, self.psquare)

    @classmethod
    def from_primes(cls, p, q, *, insecure_test_params: bool = False) -> PaillierPrivateKey:
        p, q = as_int(p, "p"), as_int(q, "q")
        return cls(PaillierPublicKey(p * q, insecure_test_params=insecure_test_params), p, q)

    def random_rn(self):
        """r^N mod N² for a fresh uniform r, by CRT from z_p^p mod p² and z_q^q mod q² (module docstring)."""
        rp = gmpy2.powmod(random_unit(self.p), self.p, self.psquare)
        rq = gmpy2.powmod(random_unit(self.q), self.q, self.qsquare)
        return crt(rp, rq, self.psquare, self.qsquare, self.qsq_inv_psq)

    def random_r_rn(self) -> tuple[mpz, mpz]:
        """(r, r^N mod N²) for a fresh uniform r ∈ Z*_N, by CRT, when the caller needs r itself (a witness).

        r^N mod p² depends only on r mod p and equals (r^q mod p)^p mod p² (r^(pq) ≡ r^q mod p; z ↦ z^p mod p²
        depends only on z mod p): two |p|-bit exponentiations per prime instead of one |N|-bit one mod N².
        """
        rp, rq = random_unit(self.p), random_unit(self.q)
        np_ = gmpy2.powmod(gmpy2.powmod(rp, self.q, self.p), self.p, self.psquare)
        nq_ = gmpy2.powmod(gmpy2.powmod(rq, self.p, self.q), self.q, self.qsquare)
        return (crt(rp, rq, self.p, self.q, self.q_inv_p),
                crt(np_, nq_, self.psquare, self.qsquare, self.qsq_inv_psq))

    def encrypt(self, m, *, pool: RnPool | None = None) -> PaillierCiphertext:
        """Enc(m) with the key owner's fast r^N (same distribution as ``PaillierPublicKey.encrypt``)."""
        pk = self.public_key
        m = as_int(m, "plaintext") % pk.n
        rn = self.random_rn() if pool is None else pool.take(pk)
        return PaillierCiphertext._trusted(pk, pk.plain_factor(m) * rn % pk.nsquare)

    def decrypt(self, c: PaillierCiphertext) -> int:
        """Dec(c) ∈ [0, N) by CRT (``decrypt_signed``: in (−N/2, N/2])."""
        c = self._own(c)
        return int(crt(self._half(c, 0), self._half(c, 1), self.p, self.q, self.q_inv_p))

    def decrypt_many(self, cs: list[PaillierCiphertext], workers: int | None = None) -> list[int]:
        """[Dec(c) for c in cs] with the 2·len(cs) CRT halves (mod p², mod q²) on ``workers`` threads (None:
        one per core) — one decryption takes about half the time on two cores."""
        vals = [self._own(c) for c in cs]
        halves = parallel_map(lambda job: self._half(*job), [(v, i) for v in vals for i in (0, 1)], workers)
        return [int(crt(halves[2 * j], halves[2 * j + 1], self.p, self.q, self.q_inv_p)) for j in range(len(vals))]

    def _half(self, c, which: int):
        """m mod p (which = 0) or m mod q (1): L_p(c^(p−1) mod p²)·h_p mod p (module docstring)."""
        p, psq, h = (self.p, self.psquare, self.hp) if which == 0 else (self.q, self.qsquare, self.hq)
        return (gmpy2.powmod(c, p - 1, psq) - 1) // p * h % p


class OwnerShortExponentRn:
    """(r, r^N mod N²) for the key owner's own encryptions, as r = h^s mod N and r^N = (h^N)^s with h ← Z*_N
    drawn once and s uniform of ⌈|N|/2⌉ bits (Damgård, Jurik, Nielsen, "A generalization of Paillier's
    public-key system with applications to electronic voting", IJIS 2010, §4.2): 8-bit fixed-base tables
    (``joye_libert.fixed_base_table``) of h mod N and of h^N mod p², mod q² (CRT, half-size moduli) turn each
    pair into 3·⌈|N|/16⌉ multiplications.

    Assumption added (DJN10 §4.2): (h^N)^s for such short s is indistinguishable from r^N with r uniform in
    Z*_N — for an adversary who does *not* know the factorisation. Hence only the key owner may use it (its
    ciphertexts face others); a party encrypting under someone else's key must not (that key's owner can
    choose p − 1 smooth, take discrete logarithms and solve for what the randomness hides). Proofs that use r
    as a witness mask it with a fresh uniform unit (z = u·Π r_i^e_i of seed 004 Fig. 9), so they stay ZK."""

    __slots__ = ("_sk", "exponent_bits", "_tn", "_tp", "_tq")

    def __init__(self, sk: PaillierPrivateKey) -> None:
        if not isinstance(sk, PaillierPrivateKey):
            raise CryptoError(f"OwnerShortExponentRn needs a PaillierPrivateKey, got {type(sk).__name__}")
        n = sk.public_key.n
        self._sk, self.exponent_bits = sk, -(-sk.public_key.bits // 2)
        h = random_unit(n)
        self._tn, self._tp, self._tq = parallel_map(
            lambda job: fixed_base_table(job[0], self.exponent_bits, job[1]),
            [(h, n), (gmpy2.powmod(h, n, sk.psquare), sk.psquare), (gmpy2.powmod(h, n, sk.qsquare), sk.qsquare)])

    @property
    def public_key(self) -> PaillierPublicKey:
        return self._sk.public_key

    def random_r_rn(self) -> tuple[mpz, mpz]:
        """(r, r^N mod N²) = (h^s mod N, (h^N)^s mod N²) for a fresh s ← [0, 2^⌈|N|/2⌉)."""
        sk, s = self._sk, secrets.randbits(self.exponent_bits)
        rn = crt(fixed_base_pow(self._tp, s, sk.psquare), fixed_base_pow(self._tq, s, sk.qsquare),
                 sk.psquare, sk.qsquare, sk.qsq_inv_psq)
        return fixed_base_pow(self._tn, s, sk.public_key.n), rn

    def random_rn(self) -> mpz:
        return self.random_r_rn()[1]

    def __repr__(self) -> str:
        return f"OwnerShortExponentRn(key={self.public_key.fingerprint.hex()}, exponent_bits={self.exponent_bits})"


class RnPool:
    """Precomputed r^N mod N² values for one key, each handed out once (never reuse r).

    Built from a private key it uses the owner's CRT shortcut. ``fill`` may run ahead of time or in
    a background thread; ``take`` pops a value, or computes a fresh one when the pool is empty.
    """

    __slots__ = ("_key", "public_key", "_values")

    def __init__(self, key: PaillierPublicKey | PaillierPrivateKey, size: int = 0) -> None:
        if not isinstance(key, (PaillierPublicKey, PaillierPrivateKey)):
            raise CryptoError(f"RnPool needs a Paillier key, got {type(key).__name__}")
        self._key = key
        self.public_key = key if isinstance(key, PaillierPublicKey) else key.public_key
        self._values: deque = deque()
        self.fill(size)

    def fill(self, count: int) -> None:
        for _ in range(int(as_int(count, "count"))):
            self._values.append(self._key.random_rn())

    def take(self, public_key: PaillierPublicKey | None = None) -> mpz:
        if public_key is not None and public_key != self.public_key:
            raise CryptoError("this r^N pool belongs to a different Paillier key")
        try:
            return self._values.popleft()
        except IndexError:
            return self._key.random_rn()

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"RnPool(key={self.public_key.fingerprint.hex()}, size={len(self)})"


def generate_paillier_keypair(bits: int = 2048, *, insecure_test_params: bool = False, blum: bool = False
                              ) -> tuple[PaillierPublicKey, PaillierPrivateKey]:
    """(pk, sk) with an exactly `bits`-bit N = pq, |p| = |q| = bits/2. 2048 → 112-bit, 3072 → 128-bit security.

    ``blum=True`` draws p ≡ q ≡ 3 (mod 4) (a Paillier–Blum modulus), which the modulus proof Π_epk of gsm
    (CGGMP20 Fig. 16, ``protocols.gsm.zk``) needs.
    """
    bits = int(as_int(bits, "bits"))
    if bits % 2 or bits < 16:
        raise CryptoError(f"Paillier modulus bits must be even and at least 16, got {bits}")
    check_modulus_bits(bits, insecure_test_params, PaillierPublicKey.SCHEME)
    while True:
        low, low_bits = (3, 2) if blum else (1, 1)
        p, q = random_prime(bits // 2, low, low_bits), random_prime(bits // 2, low, low_bits)
        if p != q and gmpy2.gcd(p * q, (p - 1) * (q - 1)) == 1:
            break
    sk = PaillierPrivateKey.from_primes(p, q, insecure_test_params=insecure_test_params)
    return sk.public_key, sk
