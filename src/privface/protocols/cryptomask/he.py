"""CryptoMask's homomorphic part: enrolment (seed 001 Alg. 1) and secure distance computation (Alg. 2).

Parties (§3.1): the Key Generator (KG, trusted: (pk, sk) of the database and (pk_v, sk_v) of the verifier,
k_sw = SwKeyGen(sk, sk_v)), Data Providers (DP: encrypt face vectors under pk), the Cloud Server (CS: stores
the encrypted gallery) and the Verifier (encrypts its query under pk, decrypts under sk_v).

How Alg. 2 is realised (SEAL does keys and encryptions; the native core, ``crypto.native``'s ``bfv.Basis``, the
polynomial arithmetic, with the math of ``crypto.rlwe``, which stays as its test oracle):

* Eval.Mul(ct, ct_i): the query is a *gadget* encryption of π(b) under pk (2L BFV encryptions of zero from
  SEAL with b·g_j added, ``rlwe.gadget_rows``), and the product with each gallery ciphertext ct_i = Enc(π(A_i))
  is the RNS external product — a ciphertext×ciphertext product that needs no tensoring or relinearisation,
  so one product per gallery ciphertext is a handful of pointwise products in the NTT domain. The CS
  precomputes the NTT of each ciphertext's RNS digits at enrolment (storage: 3× a ciphertext), or with
  ``precompute=False`` keeps the ciphertexts and computes the digits per query.
* Switching(k_sw, ·) is linear in what it preserves (c_0 + c_1·s), so the CS switches the 2L query rows to
  sk_v once per query instead of every product: Σ digit·Switch(row) decrypts under sk_v to the same
  π(A_i)·π(b) (plus the switching noise times the digits). Every c'_i the verifier receives is under pk_v.
* Masking (lines 6–8): the CS adds a uniform u ∈ R_q to c_0 — Δ·r_i for a uniform r_i ∈ R_t plus a uniform term below
  Δ — so the verifier's decrypted phase is uniform and hides the product's noise as well. The verifier only needs
  coefficient k·d − 1 of c_0 (its shares, line 14), so the CS sends those δ values (and c_1 whole), both
  modulus-switched to q' = 2^WIRE_BITS (``params``); the other coefficients of π(A_i)·π(b), cross-correlations of
  gallery and query, never leave the CS. Shares: the verifier's d_1 = ⌊t·phase/q⌉, the CS's d_0 = −⌊t·u/q⌉ (mod t);
  they add up to the inner product unless t·u/q lies within the (≤ 2^-14) noise of a rounding point, so the CS
  re-draws the ≈ 2^-9 fraction of u that come within 2^-10 of one (``MARGIN_BITS``).
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
from .params import MARGIN_BITS, WIRE_BITS, WIRE_BYTES

CHUNK = 256  # gallery ciphertexts per native call (bounds the uint64 temporaries)


class Basis:
    """The RNS basis of one cryptomask BFV context: data primes ``q`` (L of them), special prime ``P``, degree
    ``n``, and ``native``, the native core's ``bfv.Basis`` over them (NTTs, products, key switching)."""

    def __init__(self, q, P: int, n: int) -> None:
        self.q, self.P, self.n = tuple(int(p) for p in q), int(P), int(n)
        self.L, self.key = len(self.q), self.q + (self.P,)
        self.qv = np.array(self.q, dtype=np.uint64)[:, None]
        self.native = ext.bfv.Basis(list(self.q), self.n, self.P)
        self.narrow = max(self.q) < 1 << 32  # digits and wire residues fit uint32

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
    """DP → CS (Alg. 1 line 6): ciphertexts (k, 2, L, N) in coefficient form; ``merge`` says the first one
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
    """Verifier → CS (Alg. 2 line 2): the gadget encryption of π(b) under pk, (2L, 2, L, N) coefficient form."""

    rows: np.ndarray

    @property
    def nbytes(self) -> int:
        return 4 * self.rows.size


@dataclass(frozen=True)
class Distances:
    """CS → verifier (Alg. 2 line 11), modulus-switched to q' = 2^WIRE_BITS: c_1 of every c'_i (s, N) and the
    masked c_0 read at the δ positions (s, δ), uint64 below q', WIRE_BYTES bytes each on the wire."""

    c1: np.ndarray
    c0: np.ndarray

    @property
    def nbytes(self) -> int:
        return WIRE_BYTES * (self.c1.size + self.c0.size)


def to_wire(x: np.ndarray) -> bytes:
    """Values below 2^WIRE_BITS as WIRE_BYTES little-endian bytes each."""
    return np.ascontiguousarray(x, dtype="<u8").view(np.uint8).reshape(-1, 8)[:, :WIRE_BYTES].tobytes()


def from_wire(buf: bytes, shape: tuple) -> np.ndarray:
    """The inverse of ``to_wire`` (every WIRE_BYTES-byte string is a value below 2^WIRE_BITS)."""
    count = int(np.prod(shape))
    if len(buf) != WIRE_BYTES * count:
        raise ProtocolError(f"expected {WIRE_BYTES * count} bytes of residues, got {len(buf)}")
    out = np.zeros((count, 8), dtype=np.uint8)
    out[:, :WIRE_BYTES] = np.frombuffer(buf, dtype=np.uint8).reshape(count, WIRE_BYTES)
    return out.view("<u8").reshape(shape).astype(np.uint64)


class DataProvider:
    """A DP: pk only (Alg. 1)."""

    def __init__(self, public) -> None:
        self.public, self.basis = public, basis_of(public)
        self.n, self.t = public.params.poly_modulus_degree, public.params.plain_modulus

    def _encrypt(self, A: np.ndarray) -> np.ndarray:
        pt = seal_io.load_plaintext(self.public.seal_context, (0, 0, 0, 0),
                                     encoding.encode_matrix(A, self.n, self.t), 1.0)
        ct = sealapi.Ciphertext()
        self.public.encryptor.encrypt(pt, ct)
        return seal_arrays.ciphertext_to_array(ct)

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
    """The CS: the gallery in blocks as uploaded (no copying on growth) — NTT digits (k, 2, L, L, N), or with
    ``precompute=False`` the ciphertexts (k, 2, L, N) themselves, a third of the memory, their digits computed at
    every query instead — the last ciphertext in coefficient form for merging (Alg. 1 line 7), ``ind``, and k_sw
    once the KG has sent it (Alg. 2 line 1)."""

    def __init__(self, public, dim: int, *, workers: int | None = None, precompute: bool = True) -> None:
        """``workers``: kept for callers; the native core's threads are set by ``ext.bfv.set_threads``."""
        self.public, self.basis, self.dim, self.workers = public, basis_of(public), dim, workers
        self.precompute = precompute
        self.n, self.t = public.params.poly_modulus_degree, public.params.plain_modulus
        self.delta = encoding.rows_per_poly(self.n, dim)
        self._chunks: list[np.ndarray] = []
        self.blocks: list[np.ndarray] = []
        self.last: np.ndarray | None = None
        self.ind, self.count, self._ksk = 0, 0, None

    @property
    def storage_bytes(self) -> int:
        return int(sum(b.nbytes for b in self.blocks) + (self.last.nbytes if self.last is not None else 0))

    @property
    def ciphertexts(self) -> int:
        return sum(b.shape[0] for b in self.blocks)

    def receive(self, up: Upload) -> None:
        """Alg. 1 line 7: check, merge the first ciphertext into the last one if asked, store the rest."""
        L, n = self.basis.L, self.n
        if not isinstance(up, Upload) or up.cts.ndim != 4:
            raise ProtocolError("enrolment upload: expected ciphertexts (k, 2, L, N)")
        cts = check_residues(up.cts, (up.cts.shape[0], 2, L, n), self.basis, "enrolment upload")
        first = min(self.delta - self.ind, up.count) if self.ind else 0
        expect = int(bool(first)) + -(-(up.count - first) // self.delta)
        if (up.merge != (self.ind > 0) or up.count < 1 or up.ind != (self.ind + up.count) % self.delta
                or len(cts) != expect):
            raise ProtocolError("enrolment upload: merge flag, indicator or ciphertext count does not match "
                                "the CS's state")
        if up.merge:
            self.last = merge_last(self.basis, self.last, cts[0])
            self.blocks[-1][-1] = self._stored(self.last[None])[0]
            cts = cts[1:]
        if len(cts):
            self.blocks.append(self._stored(cts))
            self.last = cts[-1]
        self.ind, self.count = up.ind, self.count + up.count

    def load(self, blocks: list[np.ndarray], count: int) -> None:
        """A persisted gallery (``scale.cryptomask_gallery``): ``blocks`` of ciphertexts (k, 2, L, N) in coefficient
        form as Alg. 1 left them, ``count`` templates. The NTT digits are computed here, once per process."""
        if self.count or not blocks or not 0 < count <= sum(len(b) for b in blocks) * self.delta:
            raise ProtocolError("load: an empty CS, at least one block and a count that fits it")
        L, n = self.basis.L, self.n
        for i, blk in enumerate(blocks):
            blk = check_residues(blk, (len(blk), 2, L, n), self.basis, f"gallery block {i}")
            self.blocks.append(self._stored(blk))
            self.last = blk[-1]
        self.count, self.ind = count, count % self.delta

    def _stored(self, cts: np.ndarray) -> np.ndarray:
        """What a block keeps of ciphertexts (k, 2, L, N): their digits, or themselves (``precompute``)."""
        if self.precompute:
            return self._digits_of(cts)
        return cts.astype(np.uint32 if self.basis.narrow else np.uint64)

    def _digits_of(self, cts: np.ndarray) -> np.ndarray:
        """NTT digits of ciphertexts (k, 2, L, N) (uint32 when the primes allow, as the block stores them)."""
        b = self.basis
        return np.concatenate([b.native.digits(cts[i:i + CHUNK].astype(np.uint64), narrow=b.narrow)
                               for i in range(0, len(cts), CHUNK)])

    def set_switching_key(self, K: np.ndarray) -> None:
        if K.shape != (self.basis.L, 2, self.basis.L + 1, self.n):
            raise ProtocolError("switching key has the wrong shape")
        self._ksk = K

    def distances(self, query: Query) -> tuple[Distances, np.ndarray]:
        """Alg. 2 lines 4–11: (message to the verifier, the CS's shares d_0 (m,) int64 mod t)."""
        return self.distances_of(self.switch_query(query), 0, self.ciphertexts)

    def switch_query(self, query: Query) -> np.ndarray:
        """Alg. 2 line 4, once per query: the checked gadget rows switched to sk_v, (2L, 2, L, N) in NTT form."""
        if self._ksk is None or not self.count:
            raise ProtocolError("the CS needs k_sw from the KG and an enrolled gallery")
        b = self.basis
        rows = check_residues(query.rows, (2 * b.L, 2, b.L, self.n), b, "query")
        return b.native.forward(b.native.switch(rows, self._ksk))

    def distances_of(self, R: np.ndarray, lo: int, hi: int) -> tuple[Distances, np.ndarray]:
        """Alg. 2 lines 5–11 for gallery ciphertexts lo … hi − 1 with the switched rows R: their (c_1, masked c_0)
        and the CS's shares of their entries (those below ``count``). Over HTTP the CS answers chunk by chunk."""
        if not 0 <= lo < hi <= self.ciphertexts:
            raise ProtocolError(f"ciphertexts {lo}…{hi} are not in the gallery's {self.ciphertexts}")
        L, n, b = self.basis.L, self.n, self.basis
        pos = encoding.positions(n, self.dim).tolist()
        c1 = np.empty((hi - lo, n), dtype=np.uint64)
        c0 = np.empty((hi - lo, L, self.delta), dtype=np.uint64)
        at = 0
        for digits in self._digits(lo, hi):
            out = b.native.external_product(digits, R)
            k = out.shape[0]
            c1[at:at + k] = b.native.scale_round(b.native.inverse(np.ascontiguousarray(out[:, 1])), 1 << WIRE_BITS)[0]
            c0[at:at + k] = b.native.extract(np.ascontiguousarray(out[:, 0]), pos)
            at += k
        u, share = self._masks(c0.shape)
        c0 = b.native.scale_round((c0 + u) % b.qv, 1 << WIRE_BITS)[0]  # modulus switching q → q' (params)
        return Distances(c1, c0), share.reshape(-1)[:self.count - lo * self.delta]

    def _digits(self, lo: int, hi: int):
        """The NTT digits of ciphertexts lo … hi − 1 across the blocks, at most ``CHUNK`` at a time."""
        at = 0
        for block in self.blocks:
            first, last = max(lo, at), min(hi, at + block.shape[0])
            for i in range(first, last, CHUNK):
                part = block[i - at:min(last, i + CHUNK) - at]
                yield part if self.precompute else self._digits_of(part)
            at += block.shape[0]

    def _masks(self, shape) -> tuple[np.ndarray, np.ndarray]:
        """u uniform mod q (limb axis −2) away from the rounding points, and d_0 = −⌊t·u/q⌉ mod t."""
        b = self.basis
        s, L, m = shape
        u = b.native.uniform(seed(), s, cols=m)
        while True:
            whole, frac = b.native.scale_round(u, self.t)
            bad = np.abs(frac - 0.5) < 2.0 ** -MARGIN_BITS
            if not bad.any():
                break
            fresh = b.native.uniform(seed(), s, cols=m)
            u = np.where(bad[:, None, :], fresh, u)
        # native rounding: ⌊t·u/q⌉ mod t (the fraction is never ½ after the re-draws)
        return u, (-whole.astype(np.int64)) % self.t


class VerifierHE:
    """The verifier's HE side: pk (database) to encrypt the query, sk_v to read its shares (Alg. 2 lines 12–15)."""

    def __init__(self, public, public_v, secret_v, dim: int) -> None:
        self.public, self.basis, self.dim = public, basis_of(public), dim
        self.n, self.t = public.params.poly_modulus_degree, public.params.plain_modulus
        self.delta = encoding.rows_per_poly(self.n, dim)
        b = self.basis
        sv = rlwe.secret_coefficients(b, public_v.seal_context, public_v.evaluator, secret_v._secret_key)
        # c'_1·s_v exactly: |coefficients| < N·2^WIRE_BITS < p/2 for one 61-bit NTT prime p
        self._lift = ext.bfv.Basis(ext.bfv.ntt_primes(61, self.n, 1), self.n)
        self._p = self._lift.moduli()[0]
        self._Sv = self._lift.forward(np.mod(sv[None, :], self._p).astype(np.uint64))
        self._pos = encoding.positions(self.n, dim).tolist()

    def query(self, b_vec) -> Query:
        b = encoding.quantize(b_vec)
        if b.shape != (self.dim,):
            raise TemplateError(f"query must be one {self.dim}-dimensional vector")
        L = self.basis.L
        zeros = []
        for _ in range(2 * L):
            ct = sealapi.Ciphertext()
            self.public.encryptor.encrypt_zero(ct)
            zeros.append(seal_arrays.ciphertext_to_array(ct))
        rows = rlwe.gadget_rows(self.basis, np.stack(zeros), encoding.encode_query(b, self.n))
        return Query(rows.astype(np.uint32))

    def shares(self, msg: Distances, count: int) -> np.ndarray:
        """d_1 = ⌊t·(c_0 + c_1·s_v)/q⌉ at the δ positions of every c'_i, first ``count`` entries (int64 mod t)."""
        s = -(-count // self.delta)
        c1 = _wire_residues(msg.c1, (s, self.n), "distances c_1")
        c0 = _wire_residues(msg.c0, (s, self.delta), "distances c_0")
        mask, p = np.uint64((1 << WIRE_BITS) - 1), np.uint64(self._p)
        ph = np.empty((s, self.delta), dtype=np.uint64)
        for lo in range(0, s, CHUNK):  # phase mod q' at the δ positions: c'_0 + (c'_1 · s_v), one inverse NTT
            x = self._lift.forward(np.ascontiguousarray(c1[lo:lo + CHUNK, None, :], dtype=np.uint64))
            v = self._lift.extract(self._lift.mul(x, self._Sv), self._pos)[:, 0]
            v = np.where(v > p // np.uint64(2), v - p, v)  # centred lift, then mod 2^WIRE_BITS (two's complement)
            ph[lo:lo + CHUNK] = (c0[lo:lo + CHUNK] + v) & mask
        t_bits = int(self.t).bit_length() - 1  # t = 2^T_BITS: ⌊t·x/q'⌉ = (x + q'/2t) >> (WIRE_BITS − T_BITS)
        d1 = (ph + np.uint64(1 << (WIRE_BITS - t_bits - 1))) >> np.uint64(WIRE_BITS - t_bits)
        return (d1 % np.uint64(self.t)).astype(np.int64).reshape(-1)[:count]


def _wire_residues(x, shape: tuple, what: str) -> np.ndarray:
    """An incoming modulus-switched array: exact shape, unsigned integers below q' = 2^WIRE_BITS."""
    if not isinstance(x, np.ndarray) or x.dtype not in (np.uint32, np.uint64) or x.shape != shape:
        raise ProtocolError(f"{what}: expected residues of shape {shape}, got "
                            f"{getattr(x, 'shape', None)} {getattr(x, 'dtype', type(x).__name__)}")
    if x.size and int(x.max()) >> WIRE_BITS:
        raise ProtocolError(f"{what}: a residue is not below 2^{WIRE_BITS}")
    return x
