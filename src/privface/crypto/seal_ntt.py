"""SEAL's NTT form computed by the native core, without SEAL's serialisation (for the erasing refresh,
``crypto.ckks_refresh``; Mouchet et al. 2021 §IV-E).

SEAL stores a CKKS polynomial a in NTT form as its values at the 2N-th primitive roots of unity, a(ζ_j) mod q,
in an order of its own (its transform's bit-reversed output). SEAL's Python binding reaches that transform only by
saving and loading ciphertexts (``seal_arrays.ntt``), which costs more than the transform. The native core's
``bfv.Basis`` computes the same negacyclic transform in natural order at its own root ψ: NTT(a)_k = a(ψ^{2k+1}).
Both evaluate a at the same N points (the odd powers of any primitive 2N-th root), so SEAL's j-th value is the
native transform's value at the k with ψ^{2k+1} = ζ_j: a fixed permutation per prime, read once from SEAL's NTT of
the monomial X (whose values are the points themselves) and checked to be one.
"""
from __future__ import annotations

import numpy as np

from ..errors import CryptoError
from . import seal_arrays
from .native import ext


class SealOrderNTT:
    """SEAL's NTT (``forward``) and inverse NTT (``inverse``) of arrays (..., L, n) for the primes of ``parms_id``
    in ``context``, by the native transform and a per-prime permutation; ``mul`` the pointwise product, ``basis``
    the native ``bfv.Basis`` of those primes."""

    def __init__(self, context, evaluator, parms_id, moduli, n: int) -> None:
        self.moduli, self.n = tuple(int(q) for q in moduli), n
        self.basis = ext.bfv.Basis(list(self.moduli), n)
        x = np.zeros((1, len(self.moduli), n), dtype=np.uint64)
        x[0, :, 1] = 1
        seal_points = seal_arrays.ntt(context, evaluator, parms_id, x)[0]
        native_points = self.basis.forward(x)[0]
        perm = np.empty((len(self.moduli), n), dtype=np.intp)
        for limb in range(len(self.moduli)):
            order = np.argsort(native_points[limb])
            k = order[np.minimum(np.searchsorted(native_points[limb], seal_points[limb], sorter=order), n - 1)]
            if not np.array_equal(native_points[limb][k], seal_points[limb]) or np.unique(k).size != n:
                raise CryptoError(f"SEAL's NTT points mod {self.moduli[limb]} are not the native transform's")
            perm[limb] = k
        self.perm = perm.astype(np.uint64)  # (L, n): SEAL's j-th value is the native transform's perm[l, j]-th
        offsets = (np.arange(len(self.moduli)) * n)[:, None]  # one gather over (L·n) columns: numpy's fastest
        self._perm, self._inv = (perm + offsets).ravel(), (np.argsort(perm, axis=1) + offsets).ravel()
        self.q = np.array(self.moduli, dtype=np.uint64)[:, None]

    def forward(self, polys: np.ndarray) -> np.ndarray:
        """SEAL's NTT form of coefficient residues (..., L, n), each below its prime."""
        return _gather(self.basis.forward(np.ascontiguousarray(polys, dtype=np.uint64)), self._perm)

    def inverse(self, values: np.ndarray) -> np.ndarray:
        """Coefficient residues of SEAL NTT-form values (..., L, n)."""
        return self.basis.inverse(_gather(np.asarray(values, dtype=np.uint64), self._inv))

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a ⊙ b mod each prime (NTT forms in the same order): a (..., L, n), b of a's shape or (L, n)."""
        return self.basis.mul(np.ascontiguousarray(a, dtype=np.uint64), np.ascontiguousarray(b, dtype=np.uint64))


def _gather(a: np.ndarray, index: np.ndarray) -> np.ndarray:
    """a (..., L, n) permuted within each limb by ``index`` (flat over L·n), C-contiguous."""
    lead = a.shape[:-2]
    return np.ascontiguousarray(a).reshape(-1, index.size).take(index, axis=1).reshape(*lead, *a.shape[-2:])


__all__ = ["SealOrderNTT"]
