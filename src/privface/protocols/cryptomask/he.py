"""CryptoMask's homomorphic part: enrolment (seed 001 Alg. 1) and secure distance computation (Alg. 2) with §4.5's
option of keeping the gallery under the verifier's key.

Parties (§3.1): the Key Generator (KG, trusted: (pk, sk) of the database and (pk_v, sk_v) of the verifier,
k_sw = SwKeyGen(sk, sk_v)), Data Providers (DP: encrypt face vectors under pk), the Cloud Server (CS: stores
the encrypted gallery) and the Verifier (decrypts under sk_v).

How Alg. 2 is realised (SEAL does the DPs' encryptions and the keys; the native core, ``crypto.native``, the
polynomial arithmetic; ``crypto.rlwe`` stays its test oracle):

* §4.5, once per gallery ciphertext: the CS switches ct_i = Enc_pk(π(A_i)) to sk_v with k_sw and drops it to the
  modulus p₁ = q₀q₁ (``bfv.Basis.switch``, ``rescale``), then keeps it lifted over Q = q₀q₁q₂P in NTT form
  (``bfv.VerifierKeyProduct.lift``; storage: 4/3 of a ciphertext), or with ``precompute=False`` the p₁ ciphertext
  (2/3 of one) lifted at every query. Enrolment stays under pk, as in Alg. 1.
* Slices (``encoding``): a gallery ciphertext is a stack of S ciphertexts, one per slice of D columns, over the
  same δ templates; every array of gallery ciphertexts has the axis S after the first.
* Eval.Mul(ct, ct_i) without key switching: the query is 2S + 1 symmetric RLWE rows under sk_v at Q, their uniform
  halves sent as a 32-byte seed: R₀^σ = Enc(p₂·π(b_σ)), R₁^σ = Enc(p₂·π(b_σ)·s_v) per slice and Z = Enc(0)
  (p₂ = q₂P). Σ_σ ĉ₀^σ·R₀^σ + ĉ₁^σ·R₁^σ encrypts Σ_σ π(A_σ)·π(b_σ) at the scale Q/t (the derivation is in the
  native module ``bfv/verifier_key.rs``): two pointwise products per limb and slice, summed before one inverse
  transform per stack.
* Packing (§4.3's "send only what the verifier needs"): the products of D = ``encoding.stride(d)`` consecutive
  gallery stacks, dropped to q₀q₁, become one ciphertext holding all their δ·D inner products (PackLWEs,
  Chen, Dai, Kim and Song 2021, Alg. 2; native module ``bfv/pack.rs``) with log₂ D Galois keys under sk_v that the
  KG issues with k_sw. The other coefficients, cross-correlations of gallery and query, are cancelled by the
  packing's trace and never leave the CS. Entry (ciphertext g·D + r, row m) sits at coefficient m·D + r of pack g.
* Masking (lines 6–8): the CS adds u·Z + (e₀, e₁) to every pack for a fresh ternary u, so c_1 is an RLWE sample
  the verifier cannot strip, and modulus-switches c_0 to q' = 2^WIRE_BITS (``params``). Line 14's mask u' is chosen
  through the masked c_0 itself: a uniform multiple of 2^(WIRE_BITS − C0_BITS) (u' = that − c_0) outside a band
  around each rounding point (``MARGIN_BITS``). Shares: the verifier's d_1 = ⌊t·phase/q'⌉, the CS's
  d_0 = −⌊t·u'/q'⌉ (mod t); they add up to the inner product while the phase's error stays inside the band.
* §4.5's compressed ciphertexts (as Cheetah): only C0_BITS of the masked c_0 travel (the dropped bits are zero, no
  error) and c_1 is switched straight to 2^C1_BITS, 50 bits per coefficient instead of 64; the decryption-failure
  bound that chose the widths is ``params.failure_log2`` (docs/protocols/cryptomask.md "Compressed distances").
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import tenseal.sealapi as sealapi

from ...crypto import rlwe, seal_arrays, seal_io
from ...crypto.native import ext
from ...errors import ProtocolError, TemplateError
from . import encoding
from .params import C0_BITS, C1_BITS, MARGIN_BITS, PACK_BITS, WIRE_BITS

CHUNK = 256  # gallery stacks per native call (bounds the temporaries)
LIMBS = 4  # limbs of Q = q₀q₁q₂P


def rows(dim: int) -> int:
    """§4.5's query rows for templates of ``dim``: R₀^σ, R₁^σ per slice, then Z."""
    return 2 * encoding.slices(dim) + 1


class Basis:
    """The RNS basis of one cryptomask BFV context: data primes ``q`` (L of them), special prime ``P``, degree
    ``n``, and ``native``, the native core's ``bfv.Basis`` over them (NTTs, products, key switching)."""

    def __init__(self, q, P: int, n: int) -> None:
        self.q, self.P, self.n = tuple(int(p) for p in q), int(P), int(n)
        self.L, self.key = len(self.q), self.q + (self.P,)
        self.qv = np.array(self.q, dtype=np.uint64)[:, None]
        self.native = ext.bfv.Basis(list(self.q), self.n, self.P)
        self.narrow = max(self.q) < 1 << 32  # digits and wire residues fit uint32
        self.product = ext.bfv.VerifierKeyProduct(list(self.key), self.n) if self.L == 3 else None

    def reduce_signed(self, v: np.ndarray) -> np.ndarray:
        """Signed integers (..., N) → residues (..., L, N) mod each data prime."""
        return np.mod(np.asarray(v, dtype=np.int64)[..., None, :], self.qv.astype(np.int64)).astype(np.uint64)


def basis_of(public) -> Basis:
    mods = [m.value() for m in public.seal_context.key_context_data().parms().coeff_modulus()]
    return _basis(tuple(mods), public.params.poly_modulus_degree)


_BASES: dict[tuple, Basis] = {}


def _basis(mods: tuple, n: int) -> Basis:
    if (mods, n) not in _BASES:
        _BASES[(mods, n)] = Basis(mods[:-1], mods[-1], n)
    return _BASES[(mods, n)]


def seed() -> bytes:
    """32 bytes from the OS for the native core's uniform polynomials."""
    return os.urandom(32)


def check_residues(x, shape: tuple, basis: Basis, what: str, limb_axis: int = -2) -> np.ndarray:
    """An incoming array of residues: exact shape, unsigned integers, each below its prime."""
    if not isinstance(x, np.ndarray) or x.dtype not in (np.uint32, np.uint64) or x.shape != shape:
        raise ProtocolError(f"{what}: expected residues of shape {shape}, got "
                            f"{getattr(x, 'shape', None)} {getattr(x, 'dtype', type(x).__name__)}")
    q = np.array(basis.q, dtype=np.uint64).reshape((-1,) + (1,) * (-limb_axis - 1))
    if np.any(x >= q):
        raise ProtocolError(f"{what}: a residue is not below its prime")
    return x.astype(np.uint64)


@dataclass(frozen=True)
class Upload:
    """DP → CS (Alg. 1 line 6): ciphertexts (k, S, 2, L, N) in coefficient form; ``merge`` says the first one
    goes into the CS's last ciphertext; ``ind`` the occupied rows of the last ciphertext afterwards."""

    cts: np.ndarray
    merge: bool
    ind: int
    count: int

    @property
    def nbytes(self) -> int:
        return 4 * self.cts.size + 12


@dataclass(frozen=True)
class Query:
    """Verifier → CS (Alg. 2 line 2, §4.5): the b-halves (2S + 1, 4, N) of the rows R₀^σ, R₁^σ, Z in NTT form
    (uint32) and the 32-byte seed of their uniform halves."""

    rows: np.ndarray
    seed: bytes

    @property
    def nbytes(self) -> int:
        return 4 * self.rows.size + len(self.seed)

    def to_bytes(self) -> bytes:
        return self.seed + np.ascontiguousarray(self.rows, dtype="<u4").tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes, n: int, dim: int) -> Query:
        """The wire form (seed, then the b-halves as little-endian uint32); its residues are checked by the CS."""
        want = query_bytes(n, dim)
        if len(raw) != want:
            raise ProtocolError(f"Query: {len(raw)} bytes of query rows, expected {want}")
        r = np.frombuffer(raw, dtype="<u4", offset=32).reshape(rows(dim), LIMBS, n).astype(np.uint32)
        return cls(r, bytes(raw[:32]))


def query_bytes(n: int, dim: int) -> int:
    """A query's wire size: the seed and 2S + 1 rows of four limbs."""
    return 32 + 4 * rows(dim) * LIMBS * n


@dataclass(frozen=True)
class Distances:
    """CS → verifier (Alg. 2 line 11), §4.5's compressed packs: c_1 (G, N) below 2^C1_BITS and the masked c_0 (G, N)
    below 2^C0_BITS (their high bits at q' = 2^WIRE_BITS), uint64, bit-packed on the wire (``to_wire``)."""

    c1: np.ndarray
    c0: np.ndarray

    @property
    def nbytes(self) -> int:
        return (C1_BITS * self.c1.size + C0_BITS * self.c0.size + 7) // 8

    def full(self) -> tuple[np.ndarray, np.ndarray]:
        """(c_0, c_1) at q' = 2^WIRE_BITS, the dropped low bits zero."""
        return (self.c0 << np.uint64(WIRE_BITS - C0_BITS), self.c1 << np.uint64(WIRE_BITS - C1_BITS))


def pack_bytes(packs_: int, n: int) -> int:
    """Wire bytes of ``packs_`` compressed packs of degree ``n`` (c_1 and c_0 together)."""
    return packs_ * n * PACK_BITS // 8


def to_wire(x: np.ndarray, bits: int) -> bytes:
    """Values below 2^bits (a multiple of 8 of them), ``bits`` bits each, little-endian bit order."""
    v = np.ascontiguousarray(x, dtype="<u8").reshape(-1)
    if v.size % 8:
        raise ProtocolError("to_wire: a multiple of 8 values")
    b = np.unpackbits(v.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")[:, :bits]
    return np.packbits(b, bitorder="little").tobytes()


def from_wire(buf: bytes, shape: tuple, bits: int) -> np.ndarray:
    """The inverse of ``to_wire`` (every bit string is a value below 2^bits)."""
    count = int(np.prod(shape))
    if count % 8 or len(buf) != count * bits // 8:
        raise ProtocolError(f"expected {count * bits // 8} bytes of {bits}-bit residues, got {len(buf)}")
    b = np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little").reshape(count, bits)
    full = np.zeros((count, 64), dtype=np.uint8)
    full[:, :bits] = b
    return np.packbits(full, axis=1, bitorder="little").view("<u8").reshape(shape).astype(np.uint64)


def galois_shape(n: int, dim: int) -> tuple:
    """The Galois keys' shape: (log₂ D, 2 digits, 2, 3 primes q₀, q₁, P, N)."""
    return (encoding.stride(dim).bit_length() - 1, 2, 2, 3, n)


def galois_moduli(basis: Basis) -> tuple:
    """The primes of a Galois key's limbs: q₀, q₁, P."""
    return basis.q[0], basis.q[1], basis.P


def packs(ciphertexts: int, group: int) -> int:
    """G: the packs that carry the distances of ``ciphertexts`` gallery ciphertexts, ``group`` = D per pack."""
    return -(-ciphertexts // group)


def entries(x: np.ndarray, group: int, delta: int) -> np.ndarray:
    """Per-coefficient values of packs (G, N) → per entry in gallery order (G·D·δ,): the entry of ciphertext
    g·D + r, row m is coefficient m·D + r of pack g."""
    G, n = x.shape
    return x.reshape(G, n // group, group).transpose(0, 2, 1)[:, :, :delta].reshape(-1)


class DataProvider:
    """A DP: pk only (Alg. 1)."""

    def __init__(self, public) -> None:
        self.public, self.basis = public, basis_of(public)
        self.n, self.t = public.params.poly_modulus_degree, public.params.plain_modulus

    def _encrypt(self, A: np.ndarray) -> np.ndarray:
        """One stack: Enc_pk(π(A_σ)) for every slice, (S, 2, L, N)."""
        out = []
        for poly in encoding.encode_matrix(A, self.n, self.t):
            pt = seal_io.load_plaintext(self.public.seal_context, (0, 0, 0, 0), poly, 1.0)
            ct = sealapi.Ciphertext()
            self.public.encryptor.encrypt(pt, ct)
            out.append(seal_arrays.ciphertext_to_array(ct))
        return np.stack(out)

    def enrol(self, vectors, ind: int) -> Upload:
        """Alg. 1 lines 2–6 with ``ind`` = rows already used in the CS's last ciphertext (0: start a new one)."""
        V = encoding.quantize(vectors)
        if V.ndim != 2 or V.shape[0] == 0:
            raise TemplateError("enrol needs a non-empty matrix of face vectors")
        d = V.shape[1]
        delta = encoding.rows_per_poly(self.n, d)
        if not 0 <= ind < delta:
            raise ProtocolError(f"indicator must be in [0, {delta}), got {ind}")
        first = min(delta - ind, V.shape[0]) if ind else 0
        cts = []
        if first:  # A_0: ind zero rows, then δ − ind vectors, merged into ct_la by the CS
            cts.append(self._encrypt(np.vstack([np.zeros((ind, d), np.int64), V[:first]])))
        for lo in range(first, V.shape[0], delta):
            cts.append(self._encrypt(V[lo:lo + delta]))
        new_ind = (ind + V.shape[0]) % delta
        return Upload(np.stack(cts).astype(np.uint32), bool(first), new_ind, V.shape[0])


def merge_last(basis: Basis, last: np.ndarray, ct: np.ndarray) -> np.ndarray:
    """Alg. 1 line 7: ct_la ← ct_la + ct_0 (coefficient form, mod q); ct_0 has zeros in the ``ind`` used rows."""
    return ((last.astype(np.uint64) + ct) % basis.qv).astype(last.dtype)


class CloudServer:
    """The CS: the gallery in blocks (no copying on growth) under the verifier's key (§4.5) — lifted over Q in NTT
    form (k, S, 2, 4, N), or with ``precompute=False`` at p₁ in coefficient form (k, S, 2, 2, N), half the memory,
    lifted at every query — the last stack under pk in coefficient form for merging (Alg. 1 line 7), ``ind``, and
    k_sw with the Galois keys once the KG has sent them (Alg. 2 line 1). Blocks that arrive before k_sw wait under
    pk (``_pending``). ``group``: D, the gallery stacks per pack; ``slices``: S."""

    def __init__(self, public, dim: int, *, workers: int | None = None, precompute: bool = True) -> None:
        """``workers``: kept for callers; the native core's threads are set by ``ext.bfv.set_threads``."""
        self.public, self.basis, self.dim, self.workers = public, basis_of(public), dim, workers
        if self.basis.product is None:
            raise ProtocolError("cryptomask needs three data primes and a special prime (params.CM_BFV)")
        self.precompute = precompute
        self.n, self.t = public.params.poly_modulus_degree, public.params.plain_modulus
        self.delta = encoding.rows_per_poly(self.n, dim)
        self.group, self.slices = encoding.stride(dim), encoding.slices(dim)
        self.blocks: list[np.ndarray] = []
        self._pending: list[np.ndarray] = []
        self.last: np.ndarray | None = None
        self.ind, self.count, self._ksk, self._galois = 0, 0, None, None

    @property
    def storage_bytes(self) -> int:
        return int(sum(b.nbytes for b in self.blocks + self._pending)
                   + (self.last.nbytes if self.last is not None else 0))

    @property
    def ciphertexts(self) -> int:
        return sum(b.shape[0] for b in self.blocks + self._pending)

    def receive(self, up: Upload) -> None:
        """Alg. 1 line 7: check, merge the first ciphertext into the last one if asked, store the rest."""
        L, n = self.basis.L, self.n
        if not isinstance(up, Upload) or not isinstance(up.cts, np.ndarray) or up.cts.ndim != 5:
            raise ProtocolError("enrolment upload: expected ciphertexts (k, S, 2, L, N)")
        cts = check_residues(up.cts, (up.cts.shape[0], self.slices, 2, L, n), self.basis, "enrolment upload")
        first = min(self.delta - self.ind, up.count) if self.ind else 0
        expect = int(bool(first)) + -(-(up.count - first) // self.delta)
        if (up.merge != (self.ind > 0) or up.count < 1 or up.ind != (self.ind + up.count) % self.delta
                or len(cts) != expect):
            raise ProtocolError("enrolment upload: merge flag, indicator or ciphertext count does not match "
                                "the CS's state")
        if up.merge:
            self.last = merge_last(self.basis, self.last, cts[0])
            if self._pending:
                self._pending[-1][-1] = self.last
            else:
                self.blocks[-1][-1] = self._stored(self.last[None])[0]
            cts = cts[1:]
        if len(cts):
            self._keep(cts)
            self.last = cts[-1].astype(np.uint32)
        self.ind, self.count = up.ind, self.count + up.count

    def load(self, blocks: list[np.ndarray], count: int) -> None:
        """A persisted gallery (``scale.cryptomask_gallery``): ``blocks`` of ciphertexts (k, S, 2, L, N) under pk in
        coefficient form as Alg. 1 left them, ``count`` templates. They are switched to sk_v here (or when k_sw
        arrives), once per process."""
        if self.count or not blocks or not 0 < count <= sum(len(b) for b in blocks) * self.delta:
            raise ProtocolError("load: an empty CS, at least one block and a count that fits it")
        L, n = self.basis.L, self.n
        for i, blk in enumerate(blocks):
            blk = check_residues(blk, (len(blk), self.slices, 2, L, n), self.basis, f"gallery block {i}")
            self._keep(blk)
            self.last = blk[-1].astype(np.uint32)
        self.count, self.ind = count, count % self.delta

    def _keep(self, cts: np.ndarray) -> None:
        if self._ksk is None:
            self._pending.append(cts.astype(np.uint32))
        else:
            self.blocks.append(self._stored(cts))

    def _stored(self, cts: np.ndarray) -> np.ndarray:
        """§4.5 for ciphertexts (k, S, 2, L, N) under pk: switched to sk_v, dropped to p₁, lifted (``precompute``)."""
        b, S = self.basis, self.slices
        flat = cts.reshape((-1,) + cts.shape[2:])
        parts = []
        for i in range(0, len(flat), CHUNK):
            c = b.native.switch(np.ascontiguousarray(flat[i:i + CHUNK], dtype=np.uint64), self._ksk)
            low = b.native.rescale(c, limbs=b.L)  # mod q₀q₁, (k·S, 2, 2, N)
            parts.append(b.product.lift(low) if self.precompute else low.astype(np.uint32))
        out = np.concatenate(parts)
        return out.reshape((len(cts), S) + out.shape[1:])

    def set_switching_key(self, K: np.ndarray, galois: np.ndarray) -> None:
        """k_sw (Alg. 2 line 1) and the Galois keys under sk_v (``KeyGenerator.galois_keys``): the gallery that
        waited under pk is switched to sk_v now."""
        if K.shape != (self.basis.L, 2, self.basis.L + 1, self.n):
            raise ProtocolError("switching key has the wrong shape")
        shape = galois_shape(self.n, self.dim)
        if not isinstance(galois, np.ndarray) or galois.dtype != np.uint32 or galois.shape != shape:
            raise ProtocolError(f"Galois keys: expected {shape} uint32")
        if np.any(galois >= np.array(galois_moduli(self.basis), dtype=np.uint32)[:, None]):
            raise ProtocolError("Galois keys: a residue is not below its prime")
        self._galois = np.ascontiguousarray(galois)
        self._ksk = K
        pending, self._pending = self._pending, []
        for blk in pending:
            self.blocks.append(self._stored(blk))

    def distances(self, query: Query, *, mask: bool = True) -> tuple[Distances, np.ndarray]:
        """Alg. 2 lines 4–11: (message to the verifier, the CS's shares d_0 (m,) int64 mod t); ``mask=False``:
        CryptoMask-WO (``distances_of``)."""
        return self.distances_of(self.prepare(query), 0, self.ciphertexts, mask=mask)

    def prepare(self, query: Query) -> np.ndarray:
        """The checked query rows with their uniform halves, (2S + 1, 2, 4, N) in NTT form, once per query."""
        if self._ksk is None or not self.count:
            raise ProtocolError("the CS needs k_sw from the KG and an enrolled gallery")
        if not isinstance(query, Query) or not isinstance(query.seed, bytes) or len(query.seed) != 32:
            raise ProtocolError("query: rows and a 32-byte seed")
        if (not isinstance(query.rows, np.ndarray) or query.rows.dtype != np.uint32
                or query.rows.shape != (rows(self.dim), LIMBS, self.n)):
            raise ProtocolError(f"query: expected rows ({rows(self.dim)}, {LIMBS}, {self.n}) uint32")
        try:
            return self.basis.product.rows(query.rows, query.seed)
        except ValueError as e:
            raise ProtocolError(f"query: {e}") from None

    def distances_of(self, R: np.ndarray, lo: int, hi: int, *, mask: bool = True) -> tuple[Distances, np.ndarray]:
        """Alg. 2 lines 5–11 for gallery ciphertexts lo … hi − 1 with the prepared rows R: their packs (c_1, masked
        c_0) and the CS's shares of their entries (those below ``count``). lo is a multiple of ``group``, hi one or
        the gallery's end. Over HTTP the CS answers chunk by chunk. ``mask=False``: CryptoMask-WO (§5, Fig. 2's
        variant without Alg. 3): c_0 unmasked, the CS's shares all zero, so the verifier decrypts the distances."""
        g = self.group
        if not 0 <= lo < hi <= self.ciphertexts or lo % g or (hi % g and hi != self.ciphertexts):
            raise ProtocolError(f"ciphertexts {lo}…{hi}: not a range of whole packs of {g} in the gallery's "
                                f"{self.ciphertexts}")
        if self._galois is None:
            raise ProtocolError("the CS needs k_sw and the Galois keys from the KG before it can answer")
        pr, key, step = self.basis.product, seed(), max(CHUNK, g)
        c1s, c0s = [], []
        for a in range(lo, hi, step):
            parts = [p if self.precompute else self._lift(p) for p in self._parts(a, min(hi, a + step))]
            c1, c0 = pr.packed_distances(parts, R, self._galois, g, key, (a - lo) // g, WIRE_BITS, C1_BITS)
            c1s.append(c1)
            c0s.append(c0)
        c1, c0 = np.concatenate(c1s), np.concatenate(c0s)
        t_bits = int(self.t).bit_length() - 1
        if not mask:  # u' = −(c_0 mod 2^(WIRE_BITS − C0_BITS)): the same compression, the shares ⌊t·u'/q'⌉ = 0
            return self._unmasked(c1, c0, g, lo)
        c0, share = ext.bfv.mask_shares(c0, seed(), WIRE_BITS, t_bits, MARGIN_BITS)  # u' and d_0 (module docstring)
        return Distances(c1, c0), entries(share, g, self.delta)[:self.count - lo * self.delta].astype(np.int64)

    def _unmasked(self, c1: np.ndarray, c0: np.ndarray, g: int, lo: int) -> tuple[Distances, np.ndarray]:
        """CryptoMask-WO's packs: c_0 rounded to its high C0_BITS bits (error ≤ 2^(WIRE_BITS − C0_BITS − 1), a
        quarter step; with c_1's error below another quarter, as ``params.failure_log2`` bounds it, the verifier's
        rounding at half a step is exact), the CS's shares zero."""
        k0 = np.uint64(WIRE_BITS - C0_BITS)
        top = ((c0 + (np.uint64(1) << (k0 - np.uint64(1)))) >> k0) & np.uint64((1 << C0_BITS) - 1)
        share = np.zeros(c0.shape, dtype=np.int64)
        return Distances(c1, top), entries(share, g, self.delta)[:self.count - lo * self.delta]

    def _lift(self, p: np.ndarray) -> np.ndarray:
        """Stacks at p₁ (k, S, 2, 2, N) → lifted over Q (k, S, 2, 4, N) (``precompute=False``)."""
        out = self.basis.product.lift(p.reshape((-1, 2, 2, self.n)).astype(np.uint64))
        return out.reshape(p.shape[:2] + out.shape[1:])

    def _parts(self, lo: int, hi: int):
        """The stored ciphertexts lo … hi − 1 across the blocks, at most ``CHUNK`` at a time."""
        if self._pending:
            raise ProtocolError("the CS needs k_sw from the KG before it can answer")
        at = 0
        for block in self.blocks:
            first, last = max(lo, at), min(hi, at + block.shape[0])
            for i in range(first, last, CHUNK):
                yield block[i - at:min(last, i + CHUNK) - at]
            at += block.shape[0]


class VerifierHE:
    """The verifier's HE side: sk_v to encrypt its query rows (§4.5) and to read its shares (Alg. 2 lines 12–15)."""

    def __init__(self, public, public_v, secret_v, dim: int) -> None:
        self.public, self.basis, self.dim = public, basis_of(public), dim
        self.n, self.t = public.params.poly_modulus_degree, public.params.plain_modulus
        self.delta, self.group = encoding.rows_per_poly(self.n, dim), encoding.stride(dim)
        b = self.basis
        sv = rlwe.secret_coefficients(b, public_v.seal_context, public_v.evaluator, secret_v._secret_key)
        self._sv = sv.astype(np.int64)
        p = b.product.moduli()
        self._s_hat = b.product.forward(np.mod(self._sv[None, :], np.array(p)[:, None]).astype(np.uint64))[:2]
        if self.n << WIRE_BITS > p[0] * p[1] // 2:
            raise ProtocolError("the verifier's product needs N·2^WIRE_BITS ≤ q₀q₁/2")

    def query(self, b_vec) -> Query:
        """§4.5's rows R₀^σ = Enc(p₂·π(b_σ)), R₁^σ = Enc(p₂·π(b_σ)·s_v), Z = Enc(0) under sk_v, uniform halves as a
        seed."""
        b = encoding.quantize(b_vec)
        if b.shape != (self.dim,):
            raise TemplateError(f"query must be one {self.dim}-dimensional vector")
        key = seed()
        encrypted = self.basis.product.encrypt_rows(self._sv, encoding.encode_query(b, self.n), key, seed())
        return Query(encrypted, key)

    def shares(self, msg: Distances, count: int) -> np.ndarray:
        """d_1 = ⌊t·(c_0 + c_1·s_v)/q'⌉ at every coefficient of the packs, first ``count`` entries (int64 mod t)."""
        s = packs(-(-count // self.delta), self.group)
        _wire_residues(msg.c1, (s, self.n), "distances c_1", C1_BITS)
        _wire_residues(msg.c0, (s, self.n), "distances c_0", C0_BITS)
        c0, c1 = msg.full()
        ph = self.basis.product.phase(c0.astype(np.uint32), c1.astype(np.uint32), self._s_hat, WIRE_BITS)
        ph = ph.astype(np.uint64)  # the phase mod q': c'_0 + c'_1·s_v, exact (native ``phase``)
        t_bits = int(self.t).bit_length() - 1  # t = 2^T_BITS: ⌊t·x/q'⌉ = (x + q'/2t) >> (WIRE_BITS − T_BITS)
        d1 = (ph + np.uint64(1 << (WIRE_BITS - t_bits - 1))) >> np.uint64(WIRE_BITS - t_bits)
        return entries((d1 % np.uint64(self.t)).astype(np.int64), self.group, self.delta)[:count]

    def distances(self, msg: Distances, count: int) -> np.ndarray:
        """CryptoMask-WO: the unmasked packs' inner products ⟨a_i, b⟩ (signed int64, |·| < t/2), first ``count``."""
        d = self.shares(msg, count)
        return np.where(d >= self.t // 2, d - self.t, d)


def _wire_residues(x, shape: tuple, what: str, bits: int) -> np.ndarray:
    """An incoming compressed array: exact shape, unsigned integers below 2^bits."""
    if not isinstance(x, np.ndarray) or x.dtype not in (np.uint32, np.uint64) or x.shape != shape:
        raise ProtocolError(f"{what}: expected residues of shape {shape}, got "
                            f"{getattr(x, 'shape', None)} {getattr(x, 'dtype', type(x).__name__)}")
    if x.size and int(x.max()) >> bits:
        raise ProtocolError(f"{what}: a residue is not below 2^{bits}")
    return x
