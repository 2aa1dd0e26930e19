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
    """a·b mod q elementwise for residues a < q < 2^62 and a fixed factor b < q that broadcasts against a
    (with q): the low 64 bits of a·b and of ⌊a·b/q⌋·q wrap exactly in uint64, and the quotient is
    a·(b/q) in 80-bit long double (64-bit mantissa: off by at most 1 for a < 2^62), so one correction step
    per side fixes it. b/q is computed once on b's shape, so only a multiplication runs per element."""
    if not HAVE_LONG_DOUBLE_MULMOD:
        raise CryptoError("mulmod needs an x87 80-bit (or wider) long double")
    frac = b.astype(np.longdouble) / q.astype(np.longdouble)
    quot = (a.astype(np.longdouble) * frac).astype(np.uint64)
    qi = q.astype(np.int64)
    with np.errstate(over="ignore"):
        r = (a * b - quot * q).view(np.int64)  # the true remainder lies in (−q, 2q), so it fits in int64
    r = np.where(r < 0, r + qi, r)
    r = np.where(r >= qi, r - qi, r)
    return r.view(np.uint64)


HAVE_LONG_DOUBLE_MULMOD = np.finfo(np.longdouble).nmant >= 63


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
    return add_mod(out, moduli)
