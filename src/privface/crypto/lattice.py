"""CKKS and BFV on Microsoft SEAL through ``tenseal.sealapi`` (seed 002 §2.2; reused by cryptomask, idface).

Parameters (seed 002 Tab. 2–3 use 128-bit security). The HE standard (Albrecht et al., HomomorphicEncryption.org
2018, Tab. 1, ternary secret) bounds the *total* coefficient modulus log q for 128-bit classical security:
N = 4096 → 109 bits, N = 8192 → 218 bits. SEAL ships that table as ``CoeffModulus.MaxBitCount``;
``LatticeParams.security_bits`` reads it, and SEAL itself refuses the context at TC128 otherwise.

* ``CKKS_128``: N = 8192, q = 60·49·49 (+ a 60-bit special prime) = 218 bits, scale Δ = 2^49.
* ``BFV_128``: N = 4096, q = 44·44 (+ a 21-bit special prime) = 109 bits, plain modulus t = 134176769, a
  27-bit prime ≡ 1 (mod 2N), so BFV supports both SIMD batching and coefficient encoding.

Squared Euclidean distance by coefficient encoding (the Cheetah encoding of seed 001 §2.2). In
R = Z[X]/(X^N + 1), X^{-i} = −X^{N−i}. With d + 2 ≤ N,

    template  T(X) = Σ a_i X^i + ‖a‖² X^d + X^{d+1}
    probe     P(X) = −2 Σ b_i X^{−i} + X^{−d} + ‖b‖² X^{−(d+1)}

the constant coefficient of T·P is ‖a‖² + ‖b‖² − 2⟨a, b⟩ = ‖a − b‖² (every other pair of terms lands on a
non-zero power of X). One ct×ct (or ct×pt) product, no relinearisation, no rotation. The other coefficients
of T·P hold cross-correlations Σ a_i b_{i+k}; ``squared_distance`` adds a fresh uniform mask polynomial with
zero constant coefficient, so the key holder learns ‖a − b‖² and nothing else of T·P. CKKS masks are drawn
in the NTT domain: a polynomial's constant coefficient is N⁻¹·Σ_j NTT_j (mod q_i), so a uniform NTT vector
with Σ_j ≡ 0 is a uniform polynomial with zero constant term; the same identity reads the distance out of the
decrypted NTT plaintext. The CKKS product is rescaled once and switched to the last prime before masking.

Noise flooding: ``flood`` — a CKKS decryption is m + e with e depending on the secret key; releasing it
breaks IND-CPA^D (Li–Micciancio, Eurocrypt 2021). Any decrypted CKKS value that leaves the key holder goes
through ``flood`` first (module docstring of ``flood`` states the bound). BFV decryptions are exact.

What this module does not do: circuit privacy of the product's noise towards the key holder (the noise of
T·P depends on a and b; SEAL offers no noise-flooded re-encryption) — the protocol layer documents it.
"""
from __future__ import annotations

import hashlib
import math
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tenseal.sealapi as sealapi

from ..errors import CryptoError
from . import seal_io
from ._bytes import expect_magic

CKKS, BFV = "ckks", "bfv"
_SEC_LEVELS = ((256, sealapi.SEC_LEVEL_TYPE.TC256), (192, sealapi.SEC_LEVEL_TYPE.TC192),
               (128, sealapi.SEC_LEVEL_TYPE.TC128))
#: Largest ‖x‖₂ a CKKS template/probe may have (keeps Δ²·‖a − b‖² far below the last prime).
CKKS_MAX_NORM = 4.0
#: Documented absolute error bound of a decrypted CKKS distance (‖x‖ ≤ 4, d ≤ 4094, CKKS_128), with a margin over
#: the worst error measured (docs/crypto.md). ``flood`` scales its noise by it.
CKKS_DISTANCE_ERROR = 2.0 ** -34


@dataclass(frozen=True)
class LatticeParams:
    """One SEAL parameter set: scheme, N, coefficient-modulus prime sizes (last = special prime), t or Δ."""

    name: str = field(compare=False)
    scheme: str
    poly_modulus_degree: int
    coeff_modulus_bits: tuple[int, ...]
    plain_modulus: int = 0  # BFV
    scale_bits: int = 0  # CKKS

    def __post_init__(self) -> None:
        n = self.poly_modulus_degree
        if self.scheme not in (CKKS, BFV):
            raise CryptoError(f"unknown lattice scheme {self.scheme!r}")
        if n < 1024 or n > 32768 or n & (n - 1):
            raise CryptoError(f"poly modulus degree must be a power of two in [1024, 32768], got {n}")
        if len(self.coeff_modulus_bits) < 2 or not all(10 <= b <= 60 for b in self.coeff_modulus_bits):
            raise CryptoError("coefficient modulus: at least two primes of 10..60 bits")
        if self.scheme == BFV and self.plain_modulus < 2:
            raise CryptoError("BFV needs a plain modulus t ≥ 2")
        if self.scheme == CKKS and not 10 <= self.scale_bits <= min(self.coeff_modulus_bits[1:-1] or (60,)):
            raise CryptoError("CKKS scale bits must be ≥ 10 and fit the middle primes")

    @property
    def total_bits(self) -> int:
        return sum(self.coeff_modulus_bits)

    @property
    def security_bits(self) -> int:
        """128/192/256 when log q is within the HE standard's bound for N (SEAL's table), else 0."""
        n = self.poly_modulus_degree
        return max((s for s, lvl in _SEC_LEVELS if self.total_bits <= sealapi.CoeffModulus.MaxBitCount(n, lvl)),
                   default=0)

    @property
    def fingerprint(self) -> bytes:
        return hashlib.sha256(self.encode()).digest()[:8]

    def encode(self) -> bytes:
        bits = bytes(self.coeff_modulus_bits)
        return (self.scheme.encode().ljust(4, b"\0") + struct.pack("<IB", self.poly_modulus_degree, len(bits)) + bits
                + struct.pack("<QB", self.plain_modulus, self.scale_bits))

    @classmethod
    def decode(cls, blob: bytes) -> tuple[LatticeParams, int]:
        """(params, bytes consumed); CryptoError on anything malformed."""
        try:
            scheme = blob[:4].rstrip(b"\0").decode()
            n, k = struct.unpack_from("<IB", blob, 4)
            bits = tuple(blob[9:9 + k])
            t, scale = struct.unpack_from("<QB", blob, 9 + k)
        except (struct.error, UnicodeDecodeError):
            raise CryptoError("malformed lattice parameters") from None
        if len(bits) != k:
            raise CryptoError("malformed lattice parameters")
        return cls(f"{scheme}-{n}", scheme, n, bits, t, scale), 9 + k + 9


CKKS_128 = LatticeParams("ckks-8192", CKKS, 8192, (60, 49, 49, 60), scale_bits=49)
BFV_128 = LatticeParams("bfv-4096", BFV, 4096, (44, 44, 21), plain_modulus=134176769)


def _seal_context(params: LatticeParams, insecure_test_params: bool):
    sec = params.security_bits
    if sec < 128 and not insecure_test_params:
        raise CryptoError(f"{params.name}: log q = {params.total_bits} is above the HE standard's 128-bit bound "
                          f"for N = {params.poly_modulus_degree}; use insecure_test_params=True in tests only")
    parms = sealapi.EncryptionParameters(sealapi.SCHEME_TYPE.CKKS if params.scheme == CKKS else sealapi.SCHEME_TYPE.BFV)
    parms.set_poly_modulus_degree(params.poly_modulus_degree)
    try:
        parms.set_coeff_modulus(
            sealapi.CoeffModulus.Create(params.poly_modulus_degree, list(params.coeff_modulus_bits)))
        if params.scheme == BFV:
            parms.set_plain_modulus(params.plain_modulus)
    except (RuntimeError, ValueError) as e:
        raise CryptoError(f"{params.name}: SEAL refused the parameters ({e})") from None
    level = dict((s, lvl) for s, lvl in _SEC_LEVELS).get(sec, sealapi.SEC_LEVEL_TYPE.NONE)
    ctx = sealapi.SEALContext(parms, True, level)
    if not ctx.parameters_set():
        raise CryptoError(f"{params.name}: SEAL refused the parameters ({ctx.parameters_error_message()})")
    return ctx


class LatticeCiphertext:
    """A SEAL ciphertext with what it encodes: ``kind`` (slots, coeffs, template, probe, distance) and ``dim``."""

    __slots__ = ("context", "kind", "dim", "seal")
    KINDS = ("slots", "coeffs", "template", "probe", "distance")

    def __init__(self, context: LatticePublicContext, kind: str, dim: int, seal) -> None:
        self.context, self.kind, self.dim, self.seal = context, kind, dim, seal

    def to_bytes(self) -> bytes:
        """MAGIC · kind · params fingerprint · public-key fingerprint · dim · SEAL object (zstd-compressed)."""
        return (_CT_MAGIC + bytes([self.KINDS.index(self.kind)]) + self.context.params.fingerprint
                + self.context.fingerprint + struct.pack("<I", self.dim) + seal_io.save(self.seal))

    def coefficients(self) -> np.ndarray:
        """The ciphertext's polynomials as uint64 words, shape (size, primes, N): RNS residues, NTT form for CKKS."""
        k = self.seal.coeff_modulus_size()
        words = seal_io.data_array(seal_io.save(self.seal), self.seal.size() * k * self.context.n, "ciphertext")
        return words.reshape(self.seal.size(), k, self.context.n)

    def __len__(self) -> int:
        return self.seal.size()

    def __repr__(self) -> str:
        return f"LatticeCiphertext({self.context.params.name}, {self.kind}, dim={self.dim}, size={self.seal.size()})"


_CT_MAGIC, _PUB_MAGIC, _SEC_MAGIC = b"PFLC\x01", b"PFLK\x01", b"PFLS\x01"


class LatticePublicContext:
    """Parameters, SEAL context, public key (and relinearisation / Galois keys when generated). No secret."""

    __slots__ = ("params", "insecure_test_params", "seal_context", "public_key", "relin_keys", "galois_keys",
                 "encryptor", "evaluator", "encoder", "fingerprint", "_levels", "_slot_index")

    def __init__(self, params: LatticeParams, seal_context, public_key, relin_keys=None, galois_keys=None,
                 *, insecure_test_params: bool = False) -> None:
        self.params, self.insecure_test_params = params, insecure_test_params
        self.seal_context, self.public_key = seal_context, public_key
        self.relin_keys, self.galois_keys = relin_keys, galois_keys
        self.encryptor = sealapi.Encryptor(seal_context, public_key)
        self.evaluator = sealapi.Evaluator(seal_context)
        batching = params.scheme == CKKS or (params.plain_modulus - 1) % (2 * params.poly_modulus_degree) == 0
        self.encoder: Any = None
        if batching:  # BFV slots need a prime t ≡ 1 (mod 2N)
            self.encoder = (sealapi.CKKSEncoder if params.scheme == CKKS else sealapi.BatchEncoder)(seal_context)
        self._levels = self._chain()
        self.fingerprint = hashlib.sha256(seal_io.save(public_key)).digest()[:8]
        n = params.poly_modulus_degree
        self._slot_index = np.array([pow(3, j, 2 * n) for j in range(n // 2)])

    def _chain(self) -> dict[tuple, tuple[int, ...]]:
        """parms_id → data-level primes, from the first data level down to the last."""
        out, data = {}, self.seal_context.first_context_data()
        while data is not None:
            out[tuple(data.parms_id())] = tuple(m.value() for m in data.parms().coeff_modulus())
            data = data.next_context_data()
        return out

    @property
    def scheme(self) -> str:
        return self.params.scheme

    @property
    def n(self) -> int:
        return self.params.poly_modulus_degree

    @property
    def scale(self) -> float:
        return 2.0 ** self.params.scale_bits

    @property
    def slot_count(self) -> int:
        if self.encoder is None:
            raise CryptoError("BFV slot encoding needs a plain modulus t ≡ 1 (mod 2N)")
        return self.encoder.slot_count()

    # ------------------------------------------------------------------ encodings
    def encode_slots(self, values, parms_id=None):
        """SIMD slot encoding (CKKS: floats at scale Δ; BFV: integers mod t, needs t ≡ 1 mod 2N)."""
        v = _vector(values, self.slot_count, integer=self.scheme == BFV)
        pt = sealapi.Plaintext()
        if self.scheme == CKKS:
            self.encoder.encode(v.tolist(), parms_id or self.seal_context.first_parms_id(), self.scale, pt)
        else:
            self.encoder.encode((v % self.params.plain_modulus).tolist(), pt)
        return pt

    def encode_coefficients(self, coeffs, parms_id=None, scale: float | None = None):
        """Coefficient (polynomial) encoding: the plaintext polynomial Σ c_i X^i (CKKS: round(Δ·c_i))."""
        c = _vector(coeffs, self.n, integer=self.scheme == BFV)
        if self.scheme == BFV:
            t = self.params.plain_modulus
            return seal_io.load_plaintext(self.seal_context, (0, 0, 0, 0), c.astype(object) % t, 1.0)
        # CKKS: slot values are the evaluations c(ζ^{3^j}), ζ = e^{iπ/N}; SEAL's encoder inverts that map.
        full = np.zeros(2 * self.n)
        full[:c.size] = c
        z = (np.fft.ifft(full) * (2 * self.n))[self._slot_index]
        pt = sealapi.Plaintext()
        self.encoder.encode(z.tolist(), parms_id or self.seal_context.first_parms_id(), scale or self.scale, pt)
        return pt

    def _wrap(self, pt, kind: str, dim: int) -> LatticeCiphertext:
        ct = sealapi.Ciphertext()
        self.encryptor.encrypt(pt, ct)
        return LatticeCiphertext(self, kind, dim, ct)

    def encrypt_slots(self, values) -> LatticeCiphertext:
        v = np.asarray(values)
        return self._wrap(self.encode_slots(values), "slots", int(v.size))

    def encrypt_coefficients(self, coeffs) -> LatticeCiphertext:
        return self._wrap(self.encode_coefficients(coeffs), "coeffs", int(np.asarray(coeffs).size))

    def _distance_vector(self, x) -> np.ndarray:
        """Validated template/probe: 1-D, finite, d + 2 ≤ N, and small enough that ‖a − b‖² cannot wrap."""
        if self.scheme == BFV:
            v = _vector(x, self.n - 2, integer=True)
            limit = math.isqrt((self.params.plain_modulus - 1) // (4 * max(v.size, 1)))
            if v.size and int(np.abs(v).max()) > limit:
                raise CryptoError(f"BFV template coordinates must lie in [−{limit}, {limit}] for d = {v.size}")
        else:
            v = _vector(x, self.n - 2, integer=False)
            if float(np.linalg.norm(v)) > CKKS_MAX_NORM:
                raise CryptoError(f"CKKS templates must have ‖x‖₂ ≤ {CKKS_MAX_NORM}")
        if v.size == 0:
            raise CryptoError("empty template")
        return v

    def _template_poly(self, a: np.ndarray) -> np.ndarray:
        d = a.size
        out = np.zeros(d + 2, dtype=object if self.scheme == BFV else float)
        out[:d] = a.tolist() if self.scheme == BFV else a
        out[d] = sum(int(x) * int(x) for x in a) if self.scheme == BFV else float(a @ a)
        out[d + 1] = 1
        return out

    def _probe_poly(self, b: np.ndarray) -> np.ndarray:
        d, n = b.size, self.n
        out = np.zeros(n, dtype=object if self.scheme == BFV else float)
        vals: Any = [-2 * int(x) for x in b] if self.scheme == BFV else -2.0 * b
        out[0] = vals[0]
        out[n - np.arange(1, d)] = [-v for v in vals[1:]] if self.scheme == BFV else -vals[1:]
        out[n - d] = -1  # X^{−d} = −X^{N−d}
        out[n - d - 1] = -(sum(int(x) * int(x) for x in b) if self.scheme == BFV else float(b @ b))
        return out

    def encrypt_template(self, x) -> LatticeCiphertext:
        """Enc(T) with T(X) = Σ a_i X^i + ‖a‖² X^d + X^{d+1} (module docstring)."""
        a = self._distance_vector(x)
        return self._wrap(self.encode_coefficients(self._template_poly(a)), "template", a.size)

    def encrypt_probe(self, x) -> LatticeCiphertext:
        """Enc(P) with P(X) = −2 Σ b_i X^{−i} + X^{−d} + ‖b‖² X^{−(d+1)}."""
        b = self._distance_vector(x)
        return self._wrap(self.encode_coefficients(self._probe_poly(b)), "probe", b.size)

    def encode_probe(self, x):
        """The plaintext P(X) for a probe the computing party may see (ct×pt distance)."""
        b = self._distance_vector(x)
        return PlainProbe(self.encode_coefficients(self._probe_poly(b)), b.size)

    # ------------------------------------------------------------------ homomorphic operations
    def _own(self, c: LatticeCiphertext) -> LatticeCiphertext:
        if not isinstance(c, LatticeCiphertext):
            raise CryptoError(f"expected a LatticeCiphertext, got {type(c).__name__}")
        if c.context is not self and (c.context.params != self.params or c.context.fingerprint != self.fingerprint):
            raise CryptoError("ciphertext belongs to a different lattice context (parameters or public key)")
        return c

    def add(self, c1: LatticeCiphertext, c2: LatticeCiphertext) -> LatticeCiphertext:
        out = sealapi.Ciphertext()
        self.evaluator.add(self._own(c1).seal, self._own(c2).seal, out)
        return LatticeCiphertext(self, c1.kind, c1.dim, out)

    def multiply(self, c1: LatticeCiphertext, c2: LatticeCiphertext, *, relinearize: bool = False) -> LatticeCiphertext:
        """ct×ct (size 3 unless relinearised with the relinearisation keys)."""
        out = sealapi.Ciphertext()
        self.evaluator.multiply(self._own(c1).seal, self._own(c2).seal, out)
        if relinearize:
            if self.relin_keys is None:
                raise CryptoError("this context has no relinearisation keys")
            self.evaluator.relinearize_inplace(out, self.relin_keys)
        return LatticeCiphertext(self, c1.kind, c1.dim, out)

    def multiply_plain(self, c: LatticeCiphertext, plain) -> LatticeCiphertext:
        """ct×pt with a plaintext from ``encode_slots`` / ``encode_coefficients`` (CKKS: at c's level)."""
        out = sealapi.Ciphertext()
        self.evaluator.multiply_plain(self._own(c).seal, plain, out)
        return LatticeCiphertext(self, c.kind, c.dim, out)

    def rotate(self, c: LatticeCiphertext, steps: int) -> LatticeCiphertext:
        """Cyclic slot rotation (needs Galois keys)."""
        if self.galois_keys is None:
            raise CryptoError("this context has no Galois keys")
        out = sealapi.Ciphertext()
        if self.scheme == CKKS:
            self.evaluator.rotate_vector(self._own(c).seal, int(steps), self.galois_keys, out)
        else:
            self.evaluator.rotate_rows(self._own(c).seal, int(steps), self.galois_keys, out)
        return LatticeCiphertext(self, c.kind, c.dim, out)

    def squared_distance(self, template: LatticeCiphertext, probe) -> LatticeCiphertext:
        """Enc(‖a − b‖² + R(X)) from Enc(T) and Enc(P) or a ``PlainProbe``; R uniform with R₀ = 0."""
        t = self._own(template)
        if t.kind != "template":
            raise CryptoError(f"squared_distance needs a template ciphertext, got {t.kind!r}")
        out = sealapi.Ciphertext()
        if isinstance(probe, PlainProbe):
            dim = probe.dim
            self.evaluator.multiply_plain(t.seal, probe.plain, out)
        else:
            p = self._own(probe)
            if p.kind != "probe":
                raise CryptoError(f"squared_distance needs a probe ciphertext, got {p.kind!r}")
            dim = p.dim
            self.evaluator.multiply(t.seal, p.seal, out)
        if dim != t.dim:
            raise CryptoError(f"template has {t.dim} coordinates, probe {dim}")
        if self.scheme == CKKS:
            self.evaluator.rescale_to_next_inplace(out)
            while self.seal_context.get_context_data(out.parms_id()).next_context_data() is not None:
                self.evaluator.mod_switch_to_next_inplace(out)
        self.evaluator.add_plain_inplace(out, self._mask(out))
        return LatticeCiphertext(self, "distance", dim, out)

    def _mask(self, ct):
        """Uniform polynomial with zero constant coefficient, at ct's level and scale."""
        n = self.n
        if self.scheme == BFV:
            r = _uniform(self.params.plain_modulus, n)
            r[0] = 0
            return seal_io.load_plaintext(self.seal_context, (0, 0, 0, 0), r, 1.0)
        rows = []
        for q in self._levels[tuple(ct.parms_id())]:
            r = _uniform(q, n)
            r[-1] = (-_exact_sum(r[:-1])) % q
            rows.append(r)
        return seal_io.load_plaintext(self.seal_context, ct.parms_id(), np.concatenate(rows), ct.scale)

    # ------------------------------------------------------------------ blind re-encryption (key rotation)
    def blind(self, c: LatticeCiphertext) -> tuple[LatticeCiphertext, LatticeMask]:
        """(Enc(m + R), R) with R a uniform plaintext of c's ring: coefficients uniform mod t (BFV), or the
        RNS·NTT residues uniform mod every prime of c's level (CKKS: Δ·m + e + R is uniform mod q, a one-time
        pad with statistical distance 0 — no flooding bound is needed). The key holder who decrypts the
        masked ciphertext learns a uniformly random plaintext."""
        c = self._own(c)
        if self.scheme == BFV:
            t = self.params.plain_modulus
            mask = LatticeMask((0, 0, 0, 0), 1.0, (t,) * self.n, _uniform(t, self.n))
        else:
            primes = self._levels[tuple(c.seal.parms_id())]
            mask = LatticeMask(tuple(c.seal.parms_id()), c.seal.scale, tuple(q for q in primes for _ in range(self.n)),
                               np.concatenate([_uniform(q, self.n) for q in primes]))
        return self.add(c, self._wrap(mask.plaintext(self.seal_context), c.kind, c.dim)), mask

    def unblind(self, c: LatticeCiphertext, mask: LatticeMask) -> LatticeCiphertext:
        """c + Enc(−R): removes the mask of ``blind`` from a ciphertext re-encrypted under this key."""
        return self.add(self._own(c), self._wrap(mask.negated().plaintext(self.seal_context), c.kind, c.dim))

    # ------------------------------------------------------------------ serialization
    def to_bytes(self) -> bytes:
        """Public context: params · public key · relinearisation keys · Galois keys (SEAL, zstd). No secret."""
        parts = [seal_io.save(k) if k is not None else b""
                 for k in (self.public_key, self.relin_keys, self.galois_keys)]
        return (_PUB_MAGIC + bytes([self.insecure_test_params]) + self.params.encode()
                + b"".join(struct.pack("<Q", len(p)) + p for p in parts))

    @classmethod
    def from_bytes(cls, blob: bytes, *, insecure_test_params: bool = False) -> LatticePublicContext:
        """A received public context; CryptoError on malformed data or parameters below 128-bit security."""
        blob = expect_magic(blob, _PUB_MAGIC, "public lattice context")
        params, used = LatticeParams.decode(blob[1:])
        ctx = _seal_context(params, insecure_test_params)
        parts, pos = [], 1 + used
        for _ in range(3):
            if pos + 8 > len(blob):
                raise CryptoError("public lattice context: truncated")
            (size,) = struct.unpack_from("<Q", blob, pos)
            parts.append(blob[pos + 8:pos + 8 + size])
            if len(parts[-1]) != size:
                raise CryptoError("public lattice context: truncated")
            pos += 8 + size
        if pos != len(blob) or not parts[0]:
            raise CryptoError("public lattice context: trailing bytes or no public key")
        pk = seal_io.load(sealapi.PublicKey(), ctx, parts[0], "public key")
        rk = seal_io.load(sealapi.RelinKeys(), ctx, parts[1], "relinearisation keys") if parts[1] else None
        gk = seal_io.load(sealapi.GaloisKeys(), ctx, parts[2], "Galois keys") if parts[2] else None
        return cls(params, ctx, pk, rk, gk, insecure_test_params=insecure_test_params)

    def ciphertext_from_bytes(self, blob: bytes, *, kind: str | None = None) -> LatticeCiphertext:
        """Validate and load a ciphertext for this context (optionally of one ``kind``)."""
        blob = expect_magic(blob, _CT_MAGIC, "lattice ciphertext")
        if len(blob) < 21:
            raise CryptoError("lattice ciphertext: truncated")
        if blob[0] >= len(LatticeCiphertext.KINDS):
            raise CryptoError("lattice ciphertext: unknown kind")
        got = LatticeCiphertext.KINDS[blob[0]]
        if kind is not None and got != kind:
            raise CryptoError(f"expected a {kind} ciphertext, got {got}")
        if blob[1:9] != self.params.fingerprint:
            raise CryptoError("lattice ciphertext was made under other parameters (scheme/N/q/t differ)")
        if blob[9:17] != self.fingerprint:
            raise CryptoError("lattice ciphertext was made under another public key")
        (dim,) = struct.unpack_from("<I", blob, 17)
        if dim > self.n:
            raise CryptoError("lattice ciphertext: dimension larger than N")
        ct = seal_io.load(sealapi.Ciphertext(), self.seal_context, blob[21:], "lattice ciphertext")
        sizes = (2,) if got in ("template", "probe") else (2, 3)
        if ct.size() not in sizes or tuple(ct.parms_id()) not in self._levels:
            raise CryptoError(f"lattice ciphertext: size {ct.size()} / level not valid for a {got} ciphertext")
        if ct.is_ntt_form() != (self.scheme == CKKS):
            raise CryptoError("lattice ciphertext: wrong representation for this scheme")
        return LatticeCiphertext(self, got, dim, ct)

    def __repr__(self) -> str:
        return f"LatticePublicContext({self.params.name}, {self.params.security_bits}-bit)"


@dataclass(frozen=True)
class LatticeMask:
    """A uniform plaintext R (``LatticePublicContext.blind``): raw values and their moduli, level and scale."""

    parms_id: tuple
    scale: float
    moduli: tuple[int, ...] = field(repr=False)
    values: np.ndarray = field(repr=False)

    def negated(self) -> LatticeMask:
        q = np.asarray(self.moduli, dtype=np.uint64)
        return LatticeMask(self.parms_id, self.scale, self.moduli, (q - self.values) % q)

    def plaintext(self, seal_context):
        return seal_io.load_plaintext(seal_context, self.parms_id, self.values, self.scale)


class PlainProbe:
    """An encoded (unencrypted) probe polynomial P(X) for ct×pt distances."""

    __slots__ = ("plain", "dim")

    def __init__(self, plain, dim: int) -> None:
        self.plain, self.dim = plain, dim

    def __repr__(self) -> str:
        return f"PlainProbe(dim={self.dim})"


class LatticeSecretContext:
    """The key holder's side: the public context plus the secret key. ``repr`` never shows the key."""

    __slots__ = ("public", "_secret_key", "_decryptor")

    def __init__(self, public: LatticePublicContext, secret_key) -> None:
        self.public, self._secret_key = public, secret_key
        self._decryptor = sealapi.Decryptor(public.seal_context, secret_key)

    def _decrypt(self, c: LatticeCiphertext):
        pt = sealapi.Plaintext()
        self._decryptor.decrypt(self.public._own(c).seal, pt)
        return pt

    def decrypt_slots(self, c: LatticeCiphertext) -> np.ndarray:
        """SIMD decode of the first ``c.dim`` slots (CKKS floats, BFV centred integers). Not flooded."""
        pt = self._decrypt(c)
        if self.public.scheme == CKKS:
            return np.asarray(self.public.encoder.decode_double(pt)[:c.dim])
        t = self.public.params.plain_modulus
        v = np.asarray(self.public.encoder.decode_uint64(pt)[:c.dim], dtype=np.int64)
        return np.where(v > t // 2, v - t, v)

    def decrypt_distance(self, c: LatticeCiphertext) -> int | float:
        """‖a − b‖² from ``squared_distance``: BFV exact int; CKKS float within ``CKKS_DISTANCE_ERROR``
        (not flooded: pass it through ``flood`` before it leaves this party)."""
        if c.kind != "distance":
            raise CryptoError(f"decrypt_distance needs a distance ciphertext, got {c.kind!r}")
        pt = self._decrypt(c)
        if self.public.scheme == BFV:
            return int(pt[0])
        return self._constant_coefficient(pt, c.seal) / c.seal.scale

    def decrypt_constant(self, c: LatticeCiphertext) -> int:
        """The constant coefficient of the decrypted polynomial (BFV: in [0, t); CKKS: centred, unscaled)."""
        pt = self._decrypt(c)
        return int(pt[0]) if self.public.scheme == BFV else self._constant_coefficient(pt, c.seal)

    def _constant_coefficient(self, pt, ct) -> int:
        """m₀ = N⁻¹ Σ_j NTT_j (mod q_i) per prime, CRT, centred."""
        primes = self.public._levels[tuple(ct.parms_id())]
        n = self.public.n
        values = seal_io.data_array(seal_io.save(pt), n * len(primes), "plaintext").reshape(len(primes), n)
        m, modulus = 0, 1
        for i, q in enumerate(primes):
            r = _exact_sum(values[i]) * pow(n, -1, q) % q
            m += modulus * ((r - m) * pow(modulus, -1, q) % q)
            modulus *= q
        return m - modulus if m > modulus // 2 else m

    def reencrypt(self, c: LatticeCiphertext, new: LatticePublicContext) -> LatticeCiphertext:
        """Enc_new(Dec(c)) of the same kind and dimension: the decrypted plaintext (BFV coefficients mod t;
        CKKS RNS·NTT residues, Δ·m + e exactly, no decoding) is re-encrypted under ``new`` as it is. Used on
        ``blind``-ed ciphertexts only, so what this party sees is uniform (key rotation, kolberg)."""
        if new.params != self.public.params:
            raise CryptoError("re-encryption needs the same lattice parameters under both keys")
        pt = self._decrypt(c)
        if self.public.scheme == BFV:
            values = np.zeros(self.public.n, dtype=np.uint64)
            k = min(pt.coeff_count(), self.public.n)
            values[:k] = list(map(pt.__getitem__, range(k)))
            plain = seal_io.load_plaintext(new.seal_context, (0, 0, 0, 0), values, 1.0)
        else:
            primes = self.public._levels[tuple(c.seal.parms_id())]
            values = np.array(list(map(pt.__getitem__, range(self.public.n * len(primes)))), dtype=np.uint64)
            plain = seal_io.load_plaintext(new.seal_context, tuple(c.seal.parms_id()), values, c.seal.scale)
        return new._wrap(plain, c.kind, c.dim)

    def noise_budget(self, c: LatticeCiphertext) -> int:
        """BFV invariant noise budget in bits (0 means decryption fails)."""
        if self.public.scheme != BFV:
            raise CryptoError("noise budget is a BFV notion")
        return self._decryptor.invariant_noise_budget(self.public._own(c).seal)

    def secret_to_bytes(self) -> bytes:
        """The secret key alone (for the key holder's own storage; never sent)."""
        return _SEC_MAGIC + self.public.fingerprint + seal_io.save(self._secret_key)

    @classmethod
    def from_bytes(cls, public: LatticePublicContext, blob: bytes) -> LatticeSecretContext:
        blob = expect_magic(blob, _SEC_MAGIC, "lattice secret key")
        if blob[:8] != public.fingerprint:
            raise CryptoError("lattice secret key belongs to another public key")
        sk = seal_io.load(sealapi.SecretKey(), public.seal_context, blob[8:], "lattice secret key")
        return cls(public, sk)

    def __repr__(self) -> str:
        return f"LatticeSecretContext({self.public.params.name})"


def generate_lattice_keypair(params: LatticeParams = CKKS_128, *, relin: bool = False, galois: bool = False,
                          insecure_test_params: bool = False) -> tuple[LatticePublicContext, LatticeSecretContext]:
    """(public context, secret context). Relinearisation / Galois keys only on request (they dominate key bytes)."""
    ctx = _seal_context(params, insecure_test_params)
    keygen = sealapi.KeyGenerator(ctx)
    pk = sealapi.PublicKey()
    keygen.create_public_key(pk)
    rk = gk = None
    if relin:
        rk = sealapi.RelinKeys()
        keygen.create_relin_keys(rk)
    if galois:
        gk = sealapi.GaloisKeys()
        keygen.create_galois_keys(gk)
    public = LatticePublicContext(params, ctx, pk, rk, gk, insecure_test_params=insecure_test_params)
    return public, LatticeSecretContext(public, keygen.secret_key())


def flood(value: float, *, error_bound: float = CKKS_DISTANCE_ERROR, statistical_bits: int = 30,
          queries: int = 1 << 12) -> float:
    """value + Gaussian noise of σ = √(64·Q)·2^{s/2}·B before a decrypted CKKS value leaves its party.

    IND-CPA^D (Li–Micciancio, Eurocrypt 2021): m + e reveals e, hence the secret key. The flooding bound is
    that of Li–Micciancio–Schultz–Sorrell (CRYPTO 2022) for Q released decryptions at s bits of statistical
    security, log₂σ = log₂B + s/2 + ½·log₂(64·Q), with B the decryption error bound (later work lowers the
    √(64·Q) factor; this keeps the conservative one). Defaults: s = 30, Q = 2^12,
    B = ``CKKS_DISTANCE_ERROR`` = 2^−34 → σ = 2^−10 ≈ 0.001. Noise comes from the OS CSPRNG.
    """
    if not math.isfinite(value):
        raise CryptoError("flood needs a finite value")
    if error_bound <= 0 or statistical_bits < 1 or queries < 1:
        raise CryptoError("flood: error bound, statistical bits and queries must be positive")
    return float(value) + secrets.SystemRandom().gauss(0.0, flood_sigma(error_bound, statistical_bits, queries))


def flood_sigma(error_bound: float = CKKS_DISTANCE_ERROR, statistical_bits: int = 30, queries: int = 1 << 12) -> float:
    """σ of ``flood``: √(64·Q)·2^{s/2}·B."""
    return math.sqrt(64 * queries) * 2.0 ** (statistical_bits / 2) * error_bound


def _vector(x, max_len: int, *, integer: bool) -> np.ndarray:
    """A 1-D finite vector of at most max_len entries (integers when ``integer``)."""
    if isinstance(x, (str, bytes)):
        raise CryptoError("expected a numeric vector")
    try:
        v = np.asarray(x)
    except (TypeError, ValueError):
        raise CryptoError("expected a numeric vector") from None
    if v.ndim != 1 or v.size > max_len:
        raise CryptoError(f"expected a 1-D vector of at most {max_len} entries, got shape {v.shape}")
    if v.dtype == object:
        if integer and all(isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in v):
            return v
        raise CryptoError("expected a numeric vector")
    if integer:
        if v.size and not np.issubdtype(v.dtype, np.integer):
            raise CryptoError(f"expected integers, got {v.dtype}")
        return v.astype(np.int64)
    if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)) or v.dtype == bool:
        raise CryptoError(f"expected real numbers, got {v.dtype}")
    v = v.astype(np.float64)
    if not np.all(np.isfinite(v)):
        raise CryptoError("vector has NaN or infinite entries")
    return v


def _exact_sum(v: np.ndarray) -> int:
    """Σ v of uint64 words < 2^64 as a Python int (two 32-bit halves summed in uint64: exact for < 2^32 words)."""
    v = np.asarray(v, dtype=np.uint64)
    high = int((v >> np.uint64(32)).sum(dtype=np.uint64))
    return (high << 32) + int((v & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))


def _uniform(q: int, n: int) -> np.ndarray:
    """n uniform residues mod q (uint64) from the OS CSPRNG, by rejection sampling."""
    bits = q.bit_length()
    mask = (1 << bits) - 1 if bits < 64 else (1 << 64) - 1
    out = np.empty(0, dtype=np.uint64)
    while out.size < n:
        raw = np.frombuffer(secrets.token_bytes(8 * 2 * n), dtype="<u8") & np.uint64(mask)
        out = np.concatenate([out, raw[raw < np.uint64(q)]])
    return out[:n]
