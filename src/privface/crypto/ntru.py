"""NTRU encryption of binary templates with XOR-homomorphic addition (seed 002 §2.2; Kolberg et al., WIFS 2019).

Written by hand (numpy): no maintained Python library offers NTRU with p = 2 and homomorphic addition.

Ring R_q = Z_q[X]/(X^N + 1), N = 1024, q = 12289 (prime, ≡ 1 mod 2N), message modulus p = 2 (HPS98 with p = 2):

    keygen   F, g ← ternary {−1, 0, 1}^N,  f = 1 + 2F (f ≡ 1 mod 2; resampled until f⁻¹ mod q exists),
             h = 2·g·f⁻¹ mod q
    encrypt  e = r·h + m mod q,  r ← ternary, m ∈ {0, 1}^N (one block; longer templates use ⌈bits/N⌉ blocks)
    decrypt  a = f·e mod q, centred in (−q/2, q/2];  m = a mod 2   (a = 2·g·r + f·m and f·m ≡ m mod 2)

Decryption "automatically performs a modulo-2 operation" (seed 002 §2.2): e₁ + e₂ decrypts to m₁ + m₂ mod 2 =
m₁ ⊕ m₂, so the Hamming distance of two encrypted templates is the weight of the decrypted sum. Correctness:
a = 2g(r₁ + r₂) + f(m₁ + m₂); each coefficient is a sum of ~N small products with standard deviation ≈ 90,
and decryption fails only if one exceeds q/2 = 6144 ≈ 68σ.

q must be coprime to p = 2 (HPS98 requires gcd(p, q) = 1). With a power-of-two q, h = 2·g·f⁻¹ has only even
coefficients, so e = r·h + m ≡ m (mod 2): every ciphertext coefficient carries its message bit in the clear
(an earlier version used q = 2^12; the unlinkability test, ``bench/kolberg_unlinkability``, caught it). With
an odd q the reduction mod q hides the parity. q ≡ 1 (mod 2N) makes X^N + 1 split, so f⁻¹ is a pointwise
inverse of the negacyclic NTT (``_inverse_mod_q``); f is resampled when some NTT value is 0 (≈ N/q = 8 %).

Security (``core_svp_bits``): the lattice-estimator (a Sage package) is not pip-installable, so the estimate
uses the core-SVP method of Alkim–Ducas–Pöppelmann–Schwabe (USENIX 2016), as the NIST NTRU submission does:
the smallest BKZ block size β with √(β/d)·‖s‖ ≤ δ_β^{2β−d}·q^{m/d} for the primal (uSVP) attack on the NTRU
lattice of dimension d = N + m, minimised over m; cost 2^{0.292β} classical, 2^{0.265β} quantum. Both the
key-recovery secret (f, 2g) and the message-recovery secret (r, m) are estimated; ``NTRU_1024``: key 2^245,
message 2^199 classical (2^223 / 2^180 quantum) — far above 128 bits. Cross-check: the same calculation gives
2^105 and 2^173 for the NIST round-3 sets ntruhps2048509 / ntruhps4096821 (their submission: ≈ 2^106 / 2^179).

Leakage: the key holder decrypts the XOR itself, so it learns where probe and reference disagree, not only
the weight (as in seed 002's system). A protocol that must hide positions can rotate the sum by X^k first.
"""
from __future__ import annotations

import functools
import hashlib
import math
import secrets
import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import CryptoError
from ._bytes import expect_magic


@functools.cache
def core_svp_bits(n: int, q: int, secret_var_1: float, secret_var_2: float, quantum: bool = False) -> int:
    """Core-SVP bits of the primal attack on an NTRU lattice (module docstring); secret coordinate variances
    of the first N and the last m coordinates."""
    def delta(b: int) -> float:
        return ((math.pi * b) ** (1 / b) * b / (2 * math.pi * math.e)) ** (1 / (2 * (b - 1)))

    best = None
    for m in range(n // 4, n + 1, 8):
        d = n + m
        norm = math.sqrt(n * secret_var_1 + m * secret_var_2)
        for b in range(50, d):
            if best is not None and b >= best:
                break
            if math.sqrt(b / d) * norm <= delta(b) ** (2 * b - d) * q ** (m / d):
                best = b
                break
    if best is None:
        return 0
    return math.floor((0.265 if quantum else 0.292) * best)


def _is_prime(q: int) -> bool:
    return q > 1 and all(q % d for d in range(2, math.isqrt(q) + 1))


@dataclass(frozen=True)
class NTRUParams:
    """Ring degree N (power of two, ring X^N + 1) and modulus q (a prime ≡ 1 mod 2N)."""

    name: str = field(compare=False)
    n: int
    q: int

    def __post_init__(self) -> None:
        if self.n < 8 or self.n & (self.n - 1):
            raise CryptoError("NTRU: N must be a power of two ≥ 8")
        if not (16 <= self.q < 1 << 16 and self.q % (2 * self.n) == 1 and _is_prime(self.q)):
            raise CryptoError("NTRU: q must be a prime ≡ 1 (mod 2N) below 2^16 (odd: p = 2 and q coprime, "
                              "else every ciphertext coefficient has the parity of its message bit)")

    @property
    def security_bits(self) -> int:
        """min(key recovery on (f, 2g), message recovery on (r, m)), classical core-SVP."""
        ternary = 2 / 3
        return min(core_svp_bits(self.n, self.q, 4 * ternary, 4 * ternary),
                   core_svp_bits(self.n, self.q, ternary, 0.25))

    @property
    def fingerprint(self) -> bytes:
        return hashlib.sha256(struct.pack("<4sII", b"NTRU", self.n, self.q)).digest()[:8]


NTRU_1024 = NTRUParams("ntru-1024", 1024, 12289)


def _check_params(params: NTRUParams, insecure_test_params: bool) -> None:
    if not isinstance(params, NTRUParams):
        raise CryptoError(f"expected NTRUParams, got {type(params).__name__}")
    if not insecure_test_params and params.security_bits < 128:
        raise CryptoError(f"{params.name}: core-SVP estimate {params.security_bits} bits is below 128; "
                          "use insecure_test_params=True in tests only")


def _ternary(shape) -> np.ndarray:
    """Uniform {−1, 0, 1} entries from the OS CSPRNG (bytes < 255 reduced mod 3)."""
    count = int(np.prod(shape))
    out = np.empty(0, dtype=np.int64)
    while out.size < count:
        raw = np.frombuffer(secrets.token_bytes(count + count // 8 + 16), dtype=np.uint8)
        out = np.concatenate([out, raw[raw < 255].astype(np.int64) % 3 - 1])
    return out[:count].reshape(shape)


def _mul(a: np.ndarray, b: np.ndarray, q: int) -> np.ndarray:
    """a·b in Z_q[X]/(X^N + 1) for one polynomial or a stack of them (rows), exact int64 convolution."""
    n = a.shape[-1]
    a2, b2 = np.atleast_2d(a), np.atleast_2d(b)
    rows = max(a2.shape[0], b2.shape[0])
    out = np.empty((rows, n), dtype=np.int64)
    for i in range(rows):
        c = np.convolve(a2[i % a2.shape[0]], b2[i % b2.shape[0]])
        out[i, :] = c[:n]
        out[i, :n - 1] -= c[n:]
    out %= q
    return out if a.ndim > 1 or b.ndim > 1 else out[0]


@functools.lru_cache(maxsize=4)
def _ntt_matrices(n: int, q: int) -> tuple[np.ndarray, np.ndarray]:
    """(V, V⁻¹) of the negacyclic NTT mod q: V[k, i] = ψ^{(2k+1)·i} with ψ a primitive 2N-th root of unity
    (ψ^N = −1), so V·a evaluates a at the N roots of X^N + 1 and a·b = V⁻¹(Va ∘ Vb)."""
    psi = next(w for w in (pow(g, (q - 1) // (2 * n), q) for g in range(2, q)) if pow(w, n, q) == q - 1)
    powers = np.array([pow(psi, e, q) for e in range(2 * n)], dtype=np.int64)
    odd, i = 2 * np.arange(n)[:, None] + 1, np.arange(n)[None, :]
    v = powers[(odd * i) % (2 * n)]
    v_inv = powers[(-(odd * i).T) % (2 * n)] * pow(n, -1, q) % q
    return v, v_inv


def _inverse_mod_q(f: np.ndarray, q: int) -> np.ndarray:
    """f⁻¹ in Z_q[X]/(X^N + 1) for a prime q ≡ 1 (mod 2N): pointwise inverse of the NTT; CryptoError if some
    evaluation of f is 0 (f not invertible)."""
    v, v_inv = _ntt_matrices(f.size, q)
    evals = (v @ (f % q)) % q
    if not evals.all():
        raise CryptoError("NTRU: f is not invertible mod q")
    inv = np.array([pow(int(e), -1, q) for e in evals], dtype=np.int64)
    return (v_inv @ inv) % q


_PK_MAGIC, _CT_MAGIC, _SK_MAGIC = b"PFNK\x01", b"PFNC\x01", b"PFNS\x01"


class NTRUPublicKey:
    """h = 2·g·f⁻¹ mod q."""

    __slots__ = ("params", "h", "fingerprint", "insecure_test_params")

    def __init__(self, params: NTRUParams, h, *, insecure_test_params: bool = False) -> None:
        _check_params(params, insecure_test_params)
        h = np.asarray(h)
        if h.shape != (params.n,) or not np.issubdtype(h.dtype, np.integer) or h.min() < 0 or h.max() >= params.q:
            raise CryptoError(f"NTRU public key must be {params.n} integers in [0, {params.q})")
        self.params, self.insecure_test_params = params, insecure_test_params
        self.h = h.astype(np.int64)
        self.h.flags.writeable = False
        self.fingerprint = hashlib.sha256(params.fingerprint + self.h.astype("<u2").tobytes()).digest()[:8]

    def encrypt(self, bits) -> NTRUCiphertext:
        """e = r·h + m mod q per block of N bits, fresh ternary r per block."""
        m = _bits(bits)
        n = self.params.n
        blocks = -(-m.size // n)
        padded = np.zeros(blocks * n, dtype=np.int64)
        padded[:m.size] = m
        r = _ternary((blocks, n))
        e = (_mul(r, self.h[None, :], self.params.q) + padded.reshape(blocks, n)) % self.params.q
        return NTRUCiphertext(self, e, m.size)

    def to_bytes(self) -> bytes:
        return (_PK_MAGIC + struct.pack("<IIB", self.params.n, self.params.q, self.insecure_test_params)
                + self.h.astype("<u2").tobytes())

    @classmethod
    def from_bytes(cls, blob: bytes, *, insecure_test_params: bool = False) -> NTRUPublicKey:
        blob = expect_magic(blob, _PK_MAGIC, "NTRU public key")
        if len(blob) < 9:
            raise CryptoError("NTRU public key: truncated")
        n, q, _ = struct.unpack_from("<IIB", blob)
        params = NTRUParams(f"ntru-{n}", n, q)
        if len(blob) != 9 + 2 * n:
            raise CryptoError("NTRU public key: wrong length")
        return cls(params, np.frombuffer(blob, dtype="<u2", offset=9), insecure_test_params=insecure_test_params)

    def __eq__(self, other) -> bool:
        return isinstance(other, NTRUPublicKey) and other.fingerprint == self.fingerprint

    __hash__ = None  # type: ignore[assignment]  # equal keys compare by fingerprint; keys are not hashed

    def __repr__(self) -> str:
        return f"NTRUPublicKey({self.params.name}, {self.fingerprint.hex()})"


class NTRUCiphertext:
    """Blocks of N coefficients mod q carrying ``nbits`` message bits; ``c1 + c2`` encrypts the XOR."""

    __slots__ = ("public_key", "blocks", "nbits")

    def __init__(self, public_key: NTRUPublicKey, blocks: np.ndarray, nbits: int) -> None:
        self.public_key, self.blocks, self.nbits = public_key, blocks, nbits

    def __add__(self, other: NTRUCiphertext) -> NTRUCiphertext:
        """Enc(m₁) + Enc(m₂) = Enc(m₁ ⊕ m₂) (decryption reduces mod 2)."""
        if not isinstance(other, NTRUCiphertext):
            return NotImplemented
        if other.public_key != self.public_key:
            raise CryptoError("NTRU ciphertexts under different public keys cannot be added")
        if other.nbits != self.nbits:
            raise CryptoError(f"NTRU templates of {self.nbits} and {other.nbits} bits cannot be compared")
        return NTRUCiphertext(self.public_key, (self.blocks + other.blocks) % self.public_key.params.q, self.nbits)

    def to_bytes(self) -> bytes:
        """MAGIC · key fingerprint · nbits · coefficients as little-endian uint16."""
        return (_CT_MAGIC + self.public_key.fingerprint + struct.pack("<I", self.nbits)
                + self.blocks.astype("<u2").tobytes())

    @classmethod
    def from_bytes(cls, public_key: NTRUPublicKey, blob: bytes) -> NTRUCiphertext:
        """Validate a received ciphertext: this key, whole blocks for nbits, every coefficient < q."""
        blob = expect_magic(blob, _CT_MAGIC, "NTRU ciphertext")
        if len(blob) < 12:
            raise CryptoError("NTRU ciphertext: truncated")
        if blob[:8] != public_key.fingerprint:
            raise CryptoError("NTRU ciphertext was made under another public key")
        (nbits,) = struct.unpack_from("<I", blob, 8)
        n, q = public_key.params.n, public_key.params.q
        blocks = -(-nbits // n)
        if nbits == 0 or len(blob) != 12 + 2 * n * blocks:
            raise CryptoError(f"NTRU ciphertext: {len(blob) - 12} data bytes do not hold {nbits} bits")
        e = np.frombuffer(blob, dtype="<u2", offset=12).astype(np.int64).reshape(blocks, n)
        if e.max() >= q:
            raise CryptoError("NTRU ciphertext: coefficient out of range")
        return cls(public_key, e, nbits)

    def __repr__(self) -> str:
        return f"NTRUCiphertext(bits={self.nbits}, blocks={self.blocks.shape[0]})"


class NTRUPrivateKey:
    """f = 1 + 2F (and its public key). ``repr`` never shows f."""

    __slots__ = ("public_key", "_f")

    def __init__(self, public_key: NTRUPublicKey, f) -> None:
        self.public_key, self._f = public_key, np.asarray(f, dtype=np.int64)

    def decrypt(self, c: NTRUCiphertext) -> np.ndarray:
        """The message bits (uint8): (f·e mod q, centred) mod 2."""
        if not isinstance(c, NTRUCiphertext) or c.public_key != self.public_key:
            raise CryptoError("NTRU ciphertext is not under this key")
        q = self.public_key.params.q
        a = _mul(c.blocks, self._f[None, :], q)
        a = np.where(a > q // 2, a - q, a)
        return (a & 1).astype(np.uint8).reshape(-1)[:c.nbits]

    def hamming_distance(self, c: NTRUCiphertext) -> int:
        """Weight of Dec(c) for c = Enc(x) + Enc(y): the Hamming distance of x and y."""
        return int(self.decrypt(c).sum())

    def to_bytes(self) -> bytes:
        """F = (f − 1)/2 as int8 (for the key holder's own storage; never sent)."""
        F = (self._f - np.eye(1, self._f.size, dtype=np.int64)[0]) // 2
        return _SK_MAGIC + self.public_key.fingerprint + F.astype(np.int8).tobytes()

    @classmethod
    def from_bytes(cls, public_key: NTRUPublicKey, blob: bytes) -> NTRUPrivateKey:
        blob = expect_magic(blob, _SK_MAGIC, "NTRU private key")
        n = public_key.params.n
        if len(blob) != 8 + n or blob[:8] != public_key.fingerprint:
            raise CryptoError("NTRU private key does not match this public key")
        F = np.frombuffer(blob, dtype=np.int8, offset=8).astype(np.int64)
        if np.abs(F).max() > 1:
            raise CryptoError("NTRU private key: F must be ternary")
        f = 2 * F
        f[0] += 1
        key = cls(public_key, f)
        probe = public_key.encrypt(np.ones(n, dtype=np.uint8))
        if not key.decrypt(probe).all():
            raise CryptoError("NTRU private key does not decrypt under this public key")
        return key

    def __repr__(self) -> str:
        return f"NTRUPrivateKey({self.public_key.params.name}, {self.public_key.fingerprint.hex()})"


def generate_ntru_keypair(params: NTRUParams = NTRU_1024, *, insecure_test_params: bool = False
                          ) -> tuple[NTRUPublicKey, NTRUPrivateKey]:
    """(pk, sk) with f = 1 + 2F, h = 2·g·f⁻¹ mod q (module docstring)."""
    _check_params(params, insecure_test_params)
    n, q = params.n, params.q
    while True:
        F, g = _ternary((2, n))
        f = 2 * F
        f[0] += 1
        try:
            f_inv = _inverse_mod_q(f, q)
            break
        except CryptoError:  # some f(ζ) = 0 mod q: probability ≈ N/q, draw again
            continue
    h = 2 * _mul(g, f_inv, q) % q
    pk = NTRUPublicKey(params, h, insecure_test_params=insecure_test_params)
    return pk, NTRUPrivateKey(pk, f)


def _bits(bits) -> np.ndarray:
    if isinstance(bits, (str, bytes)):
        raise CryptoError("NTRU encrypts a vector of bits")
    b = np.asarray(bits)
    if b.ndim != 1 or b.size == 0 or b.size > 1 << 20:
        raise CryptoError(f"expected a non-empty 1-D bit vector, got shape {b.shape}")
    if not (np.issubdtype(b.dtype, np.integer) or b.dtype == bool) or not np.isin(b, (0, 1)).all():
        raise CryptoError("NTRU templates must be bits (0/1)")
    return b.astype(np.int64)
