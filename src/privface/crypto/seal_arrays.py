"""SEAL ciphertexts and plaintexts as numpy arrays (for additions-only database encryption, seed 003 §4.3).

IDFace.IP_DB needs only ciphertext additions, so the local server keeps the encrypted database as uint64
arrays of the RNS ciphertext polynomials (shape ``(2, L, n)`` per ciphertext, NTT form) and adds them with
vectorised modular additions. Everything cryptographic stays SEAL's: public-key encryption of zero
(``Encryptor.encrypt_zero``), the negacyclic NTT (``Evaluator.transform_to/from_ntt_inplace``) and
decryption. Enc(m) = Enc(0) + (NTT(m), 0) is exactly what SEAL's ``Encryptor.encrypt`` computes for CKKS.

The binding exposes neither raw pointers nor a compression switch, so objects travel through SEAL's own
serialization (``seal_io``): ``save`` writes zstd, which ``zstandard`` inflates; loads write the
uncompressed format (SEALHeader · parms_id · is_ntt_form · size · n · L · scale · correction factor ·
DynArray for a ciphertext; parms_id · coeff_count · scale · DynArray for a plaintext).
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np
import tenseal.sealapi as sealapi

from ..errors import CryptoError
from . import seal_io

_CT_META = struct.Struct("<4QBQQQdQ")  # parms_id, is_ntt_form, size, n, L, scale, correction factor
MAX_POLYS = 16  # SEAL_CIPHERTEXT_SIZE_MAX: polynomials per NTT batch


def ciphertext_to_array(ct) -> np.ndarray:
    """(size, L, n) uint64 copy of a SEAL ciphertext's RNS polynomials (NTT form for CKKS)."""
    size, n, levels = ct.size(), ct.poly_modulus_degree(), ct.coeff_modulus_size()
    data = seal_io.data_array(seal_io.save(ct), size * n * levels, "ciphertext")
    return data.reshape(size, levels, n).copy()


def ciphertext_from_array(context, parms_id, data: np.ndarray, *, ntt_form: bool = True, scale: float = 1.0):
    """A SEAL ciphertext holding ``data`` (size, L, n); SEAL checks every residue is below its prime."""
    data = np.ascontiguousarray(data, dtype="<u8")
    if data.ndim != 3 or not 2 <= data.shape[0] <= MAX_POLYS:
        raise CryptoError(f"ciphertext array must have shape (size, L, n), got {data.shape}")
    size, levels, n = data.shape
    body = (_CT_META.pack(*parms_id, int(ntt_form), size, n, levels, float(scale), 1)
            + seal_io.dynarray_bytes(data.ravel()))
    blob = seal_io._header(seal_io._HEADER.size + len(body)) + body
    return seal_io.load(sealapi.Ciphertext(), context, blob, "ciphertext array")


def plaintext_to_array(pt) -> np.ndarray:
    """(L, n) uint64 copy of an NTT-form (CKKS) plaintext."""
    return seal_io.data_array(seal_io.save(pt), pt.coeff_count(), "plaintext").copy()


def _transform(context, evaluator, parms_id, polys: np.ndarray, forward: bool) -> np.ndarray:
    """Batches of ≤ 15 polynomials plus a constant sentinel polynomial (SEAL refuses a "transparent"
    ciphertext whose polynomials after the first are all zero; the transform is per polynomial)."""
    out = np.empty_like(polys)
    step = MAX_POLYS - 1
    sentinel = np.ones((1,) + polys.shape[1:], dtype=np.uint64)
    for lo in range(0, polys.shape[0], step):
        chunk = np.concatenate([polys[lo:lo + step], sentinel])
        ct = ciphertext_from_array(context, parms_id, chunk, ntt_form=not forward)
        (evaluator.transform_to_ntt_inplace if forward else evaluator.transform_from_ntt_inplace)(ct)
        out[lo:lo + step] = ciphertext_to_array(ct)[:-1]
    return out


def ntt(context, evaluator, parms_id, polys: np.ndarray) -> np.ndarray:
    """SEAL's negacyclic NTT of k polynomials, (k, L, n) residues mod the primes of ``parms_id``."""
    return _transform(context, evaluator, parms_id, polys, True)


def inverse_ntt(context, evaluator, parms_id, polys: np.ndarray) -> np.ndarray:
    """SEAL's inverse NTT of k polynomials (k, L, n)."""
    return _transform(context, evaluator, parms_id, polys, False)


def encryptions_of_zero(encryptor, count: int) -> np.ndarray:
    """(count, 2, L, n): fresh public-key encryptions of 0 (SEAL ``encrypt_zero``, NTT form)."""
    rows = []
    for _ in range(count):
        ct = sealapi.Ciphertext()
        encryptor.encrypt_zero(ct)
        rows.append(ciphertext_to_array(ct))
    return np.stack(rows)


def add_mod(acc: np.ndarray, moduli: np.ndarray) -> np.ndarray:
    """acc mod q per RNS limb; ``moduli`` broadcasts over acc's limb axis (shape (L, 1))."""
    np.remainder(acc, moduli, out=acc)
    return acc


def lazy_sum(arrays, moduli: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Σ arrays mod q into ``out``, reducing only every ``2^64 // max q − 1`` additions (residues < q)."""
    limit = max(1, int((2 ** 64 - 1) // int(moduli.max())) - 1)
    out[...] = 0
    pending = 0
    for a in arrays:
        np.add(out, a, out=out)
        pending += 1
        if pending == limit:
            add_mod(out, moduli)
            pending = 1
    return add_mod(out, moduli)


def mulmod(a: np.ndarray, b: np.ndarray, q: np.ndarray) -> np.ndarray:
    """a·b mod q elementwise for residues a < q < 2^62 and a fixed factor b < q that broadcasts against a (with
    q), exactly in uint64: Shoup's multiplication (b' = ⌊b·2^64/q⌋ once per element of b; the high word of a·b'
    from four 32×32-bit products is ⌊a·b/q⌋ or one less, so one conditional subtraction fixes r). The rows of a
    run in cache-sized groups through preallocated buffers (the products are memory-bound otherwise)."""
    target = np.broadcast_shapes(np.shape(b), np.shape(q))
    fixed = target
    while len(fixed) > 1 and fixed[0] == 1:
        fixed = fixed[1:]
    shape = np.broadcast_shapes(a.shape, target)
    if shape[len(shape) - len(fixed):] != fixed:  # b varies along a's leading axes: one row of the whole shape
        target = shape
    bb, qq = (np.ascontiguousarray(np.broadcast_to(v, target), dtype=np.uint64).reshape(-1) for v in (b, q))
    bp = _shoup(bb, qq)
    rows = np.ascontiguousarray(np.broadcast_to(a, shape), dtype=np.uint64).reshape(-1, bb.size)
    out = np.empty_like(rows)
    g = max(1, (1 << 16) // bb.size)
    a0, a1, lo, m1, m2 = (np.empty((min(g, rows.shape[0]), bb.size), dtype=np.uint64) for _ in range(5))
    bp_lo, bp_hi = bp & _M32, bp >> _S32
    with np.errstate(over="ignore"):
        for i in range(0, rows.shape[0], g):
            x, o = rows[i:i + g], out[i:i + g]
            k = x.shape[0]
            x0, x1, t, u, v = a0[:k], a1[:k], lo[:k], m1[:k], m2[:k]
            np.bitwise_and(x, _M32, out=x0)
            np.right_shift(x, _S32, out=x1)
            np.multiply(x0, bp_lo, out=t)
            np.right_shift(t, _S32, out=t)
            np.multiply(x1, bp_lo, out=u)
            np.multiply(x0, bp_hi, out=v)
            np.multiply(x1, bp_hi, out=x1)
            np.add(t, u & _M32, out=t)
            np.add(t, v & _M32, out=t)
            np.right_shift(t, _S32, out=t)
            np.right_shift(u, _S32, out=u)
            np.right_shift(v, _S32, out=v)
            np.add(x1, u, out=x1)
            np.add(x1, v, out=x1)
            np.add(x1, t, out=x1)  # ⌊a·b'/2^64⌋
            np.multiply(x1, qq, out=x1)
            np.multiply(x, bb, out=o)
            np.subtract(o, x1, out=o)  # in [0, 2q)
            np.subtract(o, qq, out=x0)
            np.minimum(o, x0, out=o)  # o − q wraps above o when o < q
    return out.reshape(shape)


_M32, _S32 = np.uint64(0xFFFFFFFF), np.uint64(32)
_SHOUP: dict[bytes, np.ndarray] = {}  # digest of (b, q) → b'; a fixed factor (a secret key) recurs call after call


def _shoup(b: np.ndarray, q: np.ndarray) -> np.ndarray:
    """⌊b·2^64/q⌋ elementwise (Python integers: exact), cached for the last few factors."""
    digest = hashlib.blake2b(b.tobytes() + q.tobytes(), digest_size=16).digest()
    out = _SHOUP.get(digest)
    if out is None:
        out = np.array([(x << 64) // y for x, y in zip(b.tolist(), q.tolist())], dtype=np.uint64)
        if len(_SHOUP) >= 8:
            _SHOUP.pop(next(iter(_SHOUP)))
        _SHOUP[digest] = out
    return out
HAVE_LONG_DOUBLE_MULMOD = True  # kept for callers: mulmod is exact in uint64 on every platform


def secret_key_array(secret_key, n: int, levels: int) -> np.ndarray:
    """(levels, n): the NTT-form residues of SEAL's secret key s modulo the first ``levels`` primes (its
    data is an NTT-form plaintext over every prime of the key level, limb after limb)."""
    data = plaintext_to_array(secret_key.data())
    if data.size % n or data.size // n < levels:
        raise CryptoError("secret key: unexpected RNS layout")
    return data.reshape(-1, n)[:levels].copy()


def decrypt_arrays(cts: np.ndarray, s_ntt: np.ndarray, moduli: np.ndarray) -> np.ndarray:
    """(k, L, n) NTT-form plaintexts c0 + c1·s mod q of (k, 2, L, n) NTT-form ciphertexts of size 2 — what
    SEAL's ``Decryptor.decrypt`` computes for CKKS, vectorised (no per-ciphertext serialization)."""
    if cts.ndim != 4 or cts.shape[1] != 2:
        raise CryptoError(f"decrypt_arrays: expected (k, 2, L, n) ciphertexts of size 2, got {cts.shape}")
    out = mulmod(cts[:, 1], s_ntt[None], moduli[None])
    np.add(out, cts[:, 0], out=out)
    return reduce_once(out, moduli[None])


def reduce_once(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """x mod q in place for x < 2q (a sum of two residues): one subtraction where x ≥ q, no division."""
    np.minimum(x, x - q, out=x)  # x − q wraps above x when x < q
    return x
