"""Joye–Libert encryption from 2^k-th power residue symbols (Joye & Libert, EUROCRYPT 2013; journal
version Benhamouda, Herranz, Joye, Libert 2017) — the LHE that seed 000 instantiates (§II-B, §VI).

KeyGen: primes p ≡ 1 (mod 2^k) and q ≡ 3 (mod 4) of equal length, N = pq, and y with Legendre symbols
(y/p) = (y/q) = −1 (so y ∈ J_N \\ QR_N). pk = (N, y, k), sk = p, message space M = Z_{2^k}.

    Enc(m; x) = y^m · x^(2^k) mod N,   x ∈ Z*_N.

Dec: with p' = (p − 1)/2^k, g = y^p' mod p has order exactly 2^k (y is a non-residue mod p), and
c^p' = g^m (mod p) because x^(2^k·p') = x^(p−1) = 1. m is the discrete logarithm of c^p' to the base g
in the cyclic group of order 2^k, by Pohlig–Hellman split in halves (``_dlog``, in the native core:
native/src/jl.rs): the low half from h^(2^(n/2)), then the high half from h·g^(−low) (one multiplication
per byte of low, from precomputed tables), down to w-bit pieces (w = ⌈k/16⌉, at least 8) read from a
2^w-entry table — about (k/2)·log₂(k/w) squarings mod p instead of the k²/2 of the bit-by-bit algorithm in
the paper.
``decrypt_many`` runs the c^p' and the logarithms of many ciphertexts on several threads; the owner's
``encrypt_many`` batches encryption (fixed-base tables for y, one squaring mod q — see its docstring).

Decryption is blinded: c is multiplied by a fresh ρ = x^(2^k) mod p before the exponentiation, which leaves
c^p' unchanged (ρ^p' = x^(p−1) = 1), so the time of GMP's variable-time powmod with the secret p' no longer
depends on a ciphertext that the other party chose (the base blinding that RSA-CRT needs against Brumley and
Boneh's remote timing attack, USENIX Security 2003). The unit check mod q is blinded by a square the same way.
The ρ come from the pool that ``precompute_randomness`` fills, or are made on the spot.

Homomorphic: c₁·c₂ encrypts m₁ + m₂, c^a encrypts a·m, c⁻¹ encrypts −m (mod 2^k). Every ciphertext has
Jacobi symbol (c/N) = +1, which validation checks together with 0 < c < N and gcd(c, N) = 1.

Uniform encryption (seed 000 Def. 3, used by Thm. 4): C_m = y^m·H with H = {x^(2^k)} a subgroup of Z*_N,
so every C_m is a coset of H — the same size for every m, pairwise disjoint because g has order 2^k,
and x ↦ Enc(m; x) hits each element of C_m equally often. The tests check this exhaustively on toy keys.

Parameter sets (``JL_112``, ``JL_128``). N is 2048 / 3072 bits for 112 / 128-bit security (NIST SP
800-57, factoring N breaks the scheme). The primes are unbalanced: |p| = 3|N|/8 (768 / 1152 bits), |q| the
rest. Decryption works modulo p alone, with exponent p' of |p| − k bits, so a smaller p makes every
decryption about 2.4× cheaper (768- vs 1024-bit modulus, 632- vs 888-bit exponent); the server's work
modulo N does not change. Safety of the smaller factor: the number field sieve on N costs the same, and
the elliptic-curve method must find a prime of ≥ |N|/3 bits, the size accepted for three-prime RSA at these
modulus sizes (OpenSSL allows three primes below 4096 bits; Hinek, "On the security of multi-prime RSA",
J. Math. Cryptology 2008). ``JLParams(bits, k)`` without ``p_bits`` keeps the balanced shape of the paper.
The message length k is bounded on both sides:

* k ≤ |p|·|q|/|N| − λ. p ≡ 1 (mod 2^k) reveals the k low bits of p (and N ≡ q mod 2^k those of q);
  Coppersmith's method factors N once the unknown part of a factor of size N^β is below N^(β²), so the
  other |p| − k − |p|²/|N| bits must cost at least 2^λ to guess (the same bound from q's side):
  k ≤ 768·1280/2048 − 112 = 368 (2048 bits), k ≤ 1152·1920/3072 − 128 = 592 (3072 bits); a balanced
  key gives the larger |N|/4 − λ, which is what a public key alone (|p| unknown) is checked against.
* k ≥ λ + 24. Seed 000 Thm. 4 bounds a malicious client's forgery by c + τ/|M| with τ the decision
  threshold on the squared distance. Its 128-D ×128-quantised templates have SED ≤ 2^23
  (``privface.templates.bits``), so 2^k ≥ 2^(λ+24) keeps τ/|M| ≤ 2^−λ for every possible τ, and
  SED < 2^k never wraps.

Hence k = 136 at 2048 bits and k = 152 at 3072 bits (seed 000 used k = 96 at λ = 80).
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpz

from ..errors import CryptoError
from ._ciphertext import GroupCiphertext, GroupPrivateKey, GroupPublicKey
from ._format import fingerprint
from .native import ext
from .numbers import as_int, check_modulus_bits, crt, random_below_many, random_prime, random_unit, security_bits
from .parallel import gil_held, thread_map


@dataclass(frozen=True)
class JLParams:
    """A Joye–Libert parameter set: modulus bits, message bits k (M = Z_{2^k}) and the size of p (None:
    balanced, |N|/2)."""

    bits: int
    k: int
    p_bits: int | None = None

    @property
    def security_bits(self) -> int:
        return security_bits(self.bits)


JL_112 = JLParams(bits=2048, k=136, p_bits=768)
JL_128 = JLParams(bits=3072, k=152, p_bits=1152)


def _check_k(bits: int, k: int, insecure_test_params: bool, p_bits: int | None = None) -> None:
    """k against the Coppersmith bound k ≤ |p|·|q|/|N| − λ (module docstring); balanced when p_bits is None."""
    if k < 1 or k > (bits if p_bits is None else p_bits) - 2:
        raise CryptoError(f"Joye–Libert message bits k={k} do not fit a {bits}-bit modulus")
    p_bits = bits // 2 if p_bits is None else p_bits
    lam = security_bits(bits)
    limit = p_bits * (bits - p_bits) // bits - lam
    if not insecure_test_params and k > limit:
        raise CryptoError(
            f"Joye–Libert: k={k} reveals too many low bits of p for a {bits}-bit modulus with a {p_bits}-bit p "
            f"(need k ≤ |p|·|q|/|N| − λ = {limit})"
        )


def _p_bits(params: JLParams, insecure_test_params: bool) -> int:
    """|p| for a parameter set: between |N|/3 (the smallest prime factor accepted at this modulus size, see
    the module docstring) and |N|/2."""
    bits = int(params.bits)
    if params.p_bits is None:
        return bits // 2
    p_bits = int(params.p_bits)
    low = 16 if insecure_test_params else -(-bits // 3)
    if not low <= p_bits <= bits // 2:
        raise CryptoError(f"Joye–Libert: |p| = {p_bits} bits must lie in [{low}, {bits // 2}] for a {bits}-bit N")
    return p_bits


class JoyeLibertCiphertext(GroupCiphertext):
    """c ∈ J_N ⊂ Z*_N: ``c1 + c2``, ``c + m``, ``a * c``, ``-c``, ``c.rerandomize()``, ``to_bytes``/``from_bytes``."""

    __slots__ = ()


class JoyeLibertPublicKey(GroupPublicKey):
    """pk = (N, y, k)."""

    SCHEME = "Joye-Libert"
    TAG = b"J"
    CIPHERTEXT = JoyeLibertCiphertext
    __slots__ = ("n", "y", "k", "two_k", "bits", "fingerprint", "ciphertext_bytes", "insecure_test_params")

    def __init__(self, n, y, k: int, *, insecure_test_params: bool = False) -> None:
        n, y, k = as_int(n, "Joye–Libert modulus N"), as_int(y, "y"), int(as_int(k, "k"))
        if n < 15 or n % 2 == 0 or gmpy2.is_prime(n):
            raise CryptoError("Joye–Libert modulus N must be an odd product of two primes")
        check_modulus_bits(n.bit_length(), insecure_test_params, self.SCHEME)
        _check_k(n.bit_length(), k, insecure_test_params)
        if not 0 < y < n or gmpy2.jacobi(y, n) != 1:
            raise CryptoError("Joye–Libert y must lie in J_N (0 < y < N, Jacobi symbol +1)")
        self.n, self.y, self.k = n, y, k
        self.two_k = mpz(1) << k
        self.bits = n.bit_length()
        self.fingerprint = fingerprint(self.TAG, n, y, k)
        self.ciphertext_bytes = (self.bits + 7) // 8
        self.insecure_test_params = insecure_test_params

    @property
    def message_space(self) -> int:
        """|M| = 2^k."""
        return int(self.two_k)

    @property
    def group_modulus(self):
        return self.n

    def plain_factor(self, m):
        """y^m mod N."""
        return gmpy2.powmod(self.y, m, self.n)

    def encrypt(self, m) -> JoyeLibertCiphertext:
        """Enc(m) = y^m · x^(2^k) mod N for a fresh x ∈ Z*_N; m is taken mod 2^k."""
        m = as_int(m, "plaintext") % self.two_k
        return JoyeLibertCiphertext._trusted(self, self.encrypt_with(m, random_unit(self.n)))

    def encrypt_with(self, m, x):
        """Enc(m; x) as an integer, for a given x ∈ Z*_N. Only for tests that enumerate x (Def. 3)."""
        return self.plain_factor(m) * gmpy2.powmod(x, self.two_k, self.n) % self.n

    def validate(self, value):
        """The value as mpz if 0 < c < N, gcd(c, N) = 1 and (c/N) = +1, else CryptoError."""
        c = as_int(value, "Joye-Libert ciphertext")
        if not 0 < c < self.n:
            raise CryptoError("Joye-Libert ciphertext is outside Z_N for this key (must satisfy 0 < c < N)")
        j = gmpy2.jacobi(c, self.n)  # 0 exactly when gcd(c, N) ≠ 1: no separate gcd needed
        if j == 0:
            raise CryptoError("Joye-Libert ciphertext is not a unit of Z_N (gcd(c, N) ≠ 1)")
        if j != 1:
            raise CryptoError("Joye-Libert ciphertext has Jacobi symbol −1: not in the ciphertext group J_N")
        return c

    def in_range(self, values) -> list[JoyeLibertCiphertext]:
        """Ciphertexts for received integers checked only for 0 < c < N: the unit and J_N tests of ``validate``
        are left to the caller, who must run them before any result leaves (``catalano_fiore.esed_scaled``'s
        ``check`` overlaps them with its exponentiations). CryptoError names the first value out of range."""
        out = []
        for i, v in enumerate(values):
            c = as_int(v, "Joye-Libert ciphertext")
            if not 0 < c < self.n:
                raise CryptoError(f"Joye-Libert ciphertext {i} is outside Z_N for this key (must satisfy 0 < c < N)")
            out.append(JoyeLibertCiphertext._trusted(self, c))
        return out

    def _public_values(self) -> tuple:
        return (self.n, self.y, self.k)

    def _repr_fields(self) -> dict:
        return {"k": self.k}


class JoyeLibertPrivateKey(GroupPrivateKey):
    """sk = p (q kept for the owner's CRT encryption). ``repr`` never shows them."""

    __slots__ = ("public_key", "p", "q", "p_prime", "q_inv_p", "_g", "_dlog_tables", "_enc_tables",
                 "_pool")

    def __init__(self, public_key: JoyeLibertPublicKey, p, q) -> None:
        p, q = as_int(p, "p"), as_int(q, "q")
        k = public_key.k
        if p * q != public_key.n or p == q or not (gmpy2.is_prime(p) and gmpy2.is_prime(q)):
            raise CryptoError("p and q must be two distinct primes with p·q = N")
        if p % public_key.two_k != 1 or q % 4 != 3:
            raise CryptoError("Joye–Libert needs p ≡ 1 (mod 2^k) and q ≡ 3 (mod 4)")
        if gmpy2.legendre(public_key.y, p) != -1 or gmpy2.legendre(public_key.y, q) != -1:
            raise CryptoError("Joye–Libert y must be a quadratic non-residue modulo p and modulo q")
        self.public_key = public_key
        self.p, self.q = p, q
        self.p_prime = (p - 1) >> k
        self.q_inv_p = gmpy2.invert(q, p)
        g = gmpy2.powmod(public_key.y, self.p_prime, p)  # order exactly 2^k
        self._g = g
        self._dlog_tables = None  # built on first decryption (``_tables``)
        self._enc_tables: list | None = None  # built on first batched owner encryption (``encrypt_many``)
        self._pool: deque = deque()  # precomputed x^(2^k) mod p (``precompute_randomness``)

    @classmethod
    def from_primes(cls, p, q, k: int, y=None, *, insecure_test_params: bool = False) -> JoyeLibertPrivateKey:
        """A key from given primes (tests); y is drawn when not given."""
        p, q = as_int(p, "p"), as_int(q, "q")
        if y is None:
            y = _draw_y(p, q)
        return cls(JoyeLibertPublicKey(p * q, y, k, insecure_test_params=insecure_test_params), p, q)

    def encrypt(self, m) -> JoyeLibertCiphertext:
        """Enc(m) by the key owner: y^m·x^(2^k) computed mod p and mod q (x uniform by CRT) and combined."""
        pk = self.public_key
        m = as_int(m, "plaintext") % pk.two_k
        cp = gmpy2.powmod(pk.y, m, self.p) * gmpy2.powmod(random_unit(self.p), pk.two_k, self.p) % self.p
        cq = gmpy2.powmod(pk.y, m, self.q) * gmpy2.powmod(random_unit(self.q), pk.two_k, self.q) % self.q
        return JoyeLibertCiphertext._trusted(pk, crt(cp, cq, self.p, self.q, self.q_inv_p))

    def encrypt_many(self, ms, workers: int | None = None) -> list[JoyeLibertCiphertext]:
        """[Enc(m) for m in ms] by the key owner, batched: y^m mod p and mod q from fixed-base tables, the
        x^(2^k) mod p on ``workers`` threads.

        Mod q a single squaring replaces x^(2^k): q ≡ 3 (mod 4) makes Z*_q = {±1} × QR_q with −1 a non-residue,
        so {x^(2^k)} = QR_q = {x²} (both maps uniform onto it), and y^m·QR_q = (−1)^m·QR_q since y is a
        non-residue mod q. Hence c mod q = (−1)^m·x² has exactly the distribution of y^m·x^(2^k) mod q.
        """
        pk = self.public_key
        ms = [int(as_int(m, "plaintext") % pk.two_k) for m in ms]
        p, q = self.p, self.q
        tp = self._enc_tables or self._build_enc_tables()
        pooled = self._take_randomness(len(ms))
        xp = [None] * len(pooled) + [x + 1 for x in random_below_many(p - 1, len(ms) - len(pooled))]
        xs = list(zip(xp, pooled + [None] * (len(ms) - len(pooled)),
                      [x + 1 for x in random_below_many(q - 1, len(ms))]))

        def run(chunk):
            fresh = gmpy2.powmod_base_list([x for _, (x, r, _) in chunk if r is None], pk.two_k, p)  # no GIL
            fresh = iter(fresh)
            out = []
            with gil_held():
                for m, (_, r, xq) in chunk:
                    cp = fixed_base_pow(tp, m, p) * (next(fresh) if r is None else r) % p
                    cq = xq * xq % q
                    if m & 1:
                        cq = q - cq
                    out.append(JoyeLibertCiphertext._trusted(pk, crt(cp, cq, p, q, self.q_inv_p)))
            return out

        return thread_map(run, list(zip(ms, xs)), workers, chunk=16)

    def precompute_randomness(self, count: int, workers: int | None = None) -> int:
        """Top the pool of randomness up to ``count`` values x^(2^k) mod p (fresh uniform x, each used by exactly
        one later ``encrypt_many`` encryption or decryption blinding, then discarded): the message-independent
        part of owner encryption and of decryption, done ahead of time (off-line/on-line encryption, as
        Paillier's r^N pools in seed 004 §9). Returns how many were added."""
        need = int(count) - len(self._pool)
        if need <= 0:
            return 0
        xs = [x + 1 for x in random_below_many(self.p - 1, need)]
        self._pool.extend(thread_map(lambda c: gmpy2.powmod_base_list(c, self.public_key.two_k, self.p),
                                     xs, workers))
        return need

    def _take_randomness(self, count: int) -> list:
        out: list = []
        while len(out) < count:
            try:
                out.append(self._pool.popleft())
            except IndexError:
                break
        return out

    def _build_enc_tables(self):
        self._enc_tables = fixed_base_table(self.public_key.y % self.p, self.public_key.k, self.p)
        return self._enc_tables

    def decrypt(self, c: JoyeLibertCiphertext) -> int:
        """Dec(c) ∈ [0, 2^k) (``decrypt_signed``: in (−2^(k−1), 2^(k−1)]): discrete log of c^p' mod p to
        the base g (``_dlog``)."""
        (rho,) = self._blinds(1)
        h = gmpy2.powmod(self._own(c) * rho % self.p, self.p_prime, self.p)  # = g^m (module docstring: blinding)
        return self._dlog([h], self._dlog_tables or self._tables())[0]

    def decrypt_many(self, cs, workers: int | None = None) -> list[int]:
        """[Dec(c) for c in cs]: the c^p' mod p (gmpy2.powmod_base_list) and the discrete logs on ``workers``
        threads."""
        return self._decrypt_values([self._own(c) for c in cs], workers, check=False)

    def decrypt_values(self, values, workers: int | None = None) -> list[int]:
        """[Dec(c) for c in values] for received integers, each checked to be a ciphertext (0 < c < N, a unit,
        Jacobi symbol +1) inside the decryption threads, with the key owner's shortcut: (c/N) = (c/p)·(c/q)
        and (c/p) = c^((p−1)/2) = (c^p')^(2^(k−1)) = (−1)^Dec(c), so only (c mod q / q) is computed.
        CryptoError names the first bad index."""
        n = self.public_key.n
        vals = [as_int(v, "Joye-Libert ciphertext") for v in values]
        for i, c in enumerate(vals):
            if not 0 < c < n:
                raise CryptoError(f"Joye-Libert ciphertext {i} is outside Z_N for this key (must satisfy 0 < c < N)")
        return self._decrypt_values(vals, workers, check=True)

    def _decrypt_values(self, values: list, workers: int | None, check: bool) -> list[int]:
        p, q, pp = self.p, self.q, self.p_prime
        tables = self._dlog_tables or self._tables()

        pooled = self._take_randomness(len(values))
        rhos = pooled + [None] * (len(values) - len(pooled))

        def run(chunk):
            start, vals = chunk[0][0], [c for _, (c, _) in chunk]
            fresh = iter(self._fresh_blinds(sum(r is None for _, (_, r) in chunk)))
            blinded = [c * (next(fresh) if r is None else r) % p for _, (c, r) in chunk]
            hs = gmpy2.powmod_base_list(blinded, pp, p)  # = c^p' (module docstring); GIL released (pool threads)
            if check:  # (c·x²/q) = (c/q)
                xs = random_below_many(q - 1, len(vals))
                lqs = [gmpy2.legendre(c * (x + 1) ** 2 % q, q) for c, x in zip(vals, xs)]
                for i, (h, lq) in enumerate(zip(hs, lqs)):
                    if h == 0 or lq == 0:  # h = 0 iff p | c; (c/q) = 0 iff q | c
                        raise CryptoError(f"Joye-Libert ciphertext {start + i} is not a unit of Z_N")
            ms = self._dlog(hs, tables)
            if check:
                for i, (m, lq) in enumerate(zip(ms, lqs)):
                    if lq != (-1 if m & 1 else 1):
                        raise CryptoError(f"Joye-Libert ciphertext {start + i} has Jacobi symbol −1: not in J_N")
            return ms

        return thread_map(run, list(enumerate(zip(values, rhos))), workers, chunk=8)

    def _blinds(self, count: int) -> list:
        """count blinding factors x^(2^k) mod p: from the pool, the rest made now."""
        pooled = self._take_randomness(count)
        return pooled + self._fresh_blinds(count - len(pooled))

    def _fresh_blinds(self, count: int) -> list:
        if count <= 0:
            return []
        return gmpy2.powmod_base_list([x + 1 for x in random_below_many(self.p - 1, count)], self.public_key.two_k,
                                      self.p)

    def _tables(self):
        """(w, native tables) for ``_dlog``, built on first use with w = ⌈k/16⌉ (at least 8)."""
        if self._dlog_tables is None:
            k = self.public_key.k
            self._dlog_tables = self._build_tables(min(k, max(8, -(-k // 16))))
        return self._dlog_tables

    def precompute(self, *, background: bool = True) -> None:
        """Build the larger discrete-log tables (w = ⌈k/8⌉ when that is at most 18: 2^17 entries for k = 136)
        that save a recursion level of each logarithm; with ``background`` on
        a daemon thread, swapped in when ready. For long-lived key owners (a client that authenticates
        repeatedly, the evaluation sweep); one-shot decryptions do not need it."""
        k = self.public_key.k
        w = -(-k // 8)
        if w > 18 or w <= self._tables()[0]:
            return

        def build():
            self._dlog_tables = self._build_tables(w)

        if background:
            threading.Thread(target=build, name="privface-jl-tables", daemon=True).start()
        else:
            build()

    def _build_tables(self, w: int):
        """The native tables (native/src/jl.rs): the leaf table maps (g^(2^(k−w)))^i ↦ i for i < 2^w; for every
        inner node size n of the recursion, T_n[j][v] = g_n^(−v·2^(8j)) with g_n = g^(2^(k−n)), so that
        g_n^(−lo) costs one multiplication per byte of lo. Built with the GIL released."""
        size = (int(self.p).bit_length() + 7) // 8
        return w, ext.JLDlog(int(self.p).to_bytes(size, "big"), int(self._g).to_bytes(size, "big"),
                             self.public_key.k, w)

    def _dlog(self, hs: list, tables) -> list[int]:
        """[m for h in hs] with h = g^m, 0 ≤ m < 2^k: the native Pohlig–Hellman recursion (module docstring),
        the GIL released."""
        size = (int(self.p).bit_length() + 7) // 8
        m_bytes = (self.public_key.k + 7) // 8
        try:
            out = tables[1].dlog(b"".join(int(h).to_bytes(size, "big") for h in hs))
        except ValueError as e:  # h outside <g>: only for a value that is no ciphertext (p | c)
            raise CryptoError(f"Joye-Libert decryption: {e}") from None
        return [int.from_bytes(out[i:i + m_bytes], "little") for i in range(0, len(out), m_bytes)]


def fixed_base_table(base, bits: int, modulus) -> list[list]:
    """T[j][v] = base^(v·2^(8j)) mod X for j < ⌈bits/8⌉, v < 256 (``fixed_base_pow``)."""
    rows = []
    b = mpz(base)
    for _ in range(-(-bits // 8)):
        row, t = [mpz(1)], mpz(1)
        for _ in range(255):
            t = t * b % modulus
            row.append(t)
        rows.append(row)
        b = t * b % modulus  # base^(256·2^(8j))
    return rows


def fixed_base_pow(table: list[list], e: int, modulus):
    """base^e mod X for 0 ≤ e < 2^(8·len(table)): one multiplication per non-zero byte of e."""
    acc = None
    for row in table:
        if e & 255:
            acc = row[e & 255] if acc is None else acc * row[e & 255] % modulus
        e >>= 8
    return mpz(1) if acc is None else acc


def _draw_y(p, q) -> mpz:
    n = p * q
    while True:
        y = random_unit(n)
        if gmpy2.legendre(y, p) == -1 and gmpy2.legendre(y, q) == -1:
            return y


def generate_joye_libert_keypair(params: JLParams = JL_112, *, insecure_test_params: bool = False
                                 ) -> tuple[JoyeLibertPublicKey, JoyeLibertPrivateKey]:
    """(pk, sk) for a parameter set: ``JL_112`` (default), ``JL_128``, or JLParams(bits, k) in tests. N has
    exactly ``bits`` bits, p has ``p_bits`` and q the rest."""
    bits, k = int(params.bits), int(params.k)
    if bits % 2 or bits < 16:
        raise CryptoError(f"Joye–Libert modulus bits must be even and at least 16, got {bits}")
    check_modulus_bits(bits, insecure_test_params, JoyeLibertPublicKey.SCHEME)
    p_bits = _p_bits(params, insecure_test_params)
    _check_k(bits, k, insecure_test_params, p_bits)
    while True:
        p = random_prime(p_bits, low=1, low_bits=k)
        q = random_prime(bits - p_bits, low=3, low_bits=2)
        if q != p and (p * q).bit_length() == bits:
            break
    sk = JoyeLibertPrivateKey.from_primes(p, q, k, insecure_test_params=insecure_test_params)
    return sk.public_key, sk
