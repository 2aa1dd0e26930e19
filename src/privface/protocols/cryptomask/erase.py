"""Erasing templates from cryptomask's stored BFV ciphertexts by a masked refresh with the key generator (after
Mouchet, Troncoso-Pastoriza, Bossuat, Hubaux, PoPETs 2021 §IV-E, collective refresh, with one key holder; the BFV
counterpart of ``crypto.ckks_refresh``).

Why a refresh. The gallery (seed 001 Alg. 1, ``encoding``) puts template row i of a stack on coefficients
i·D … i·D + D − 1 of each slice's plaintext (coefficient encoding, t = 2^20: no SIMD slots). A plaintext product
multiplies polynomials, so no public operation zeroes chosen coefficients; and a product's result would carry, in
its noise, the wrap-around of m·μ mod t, a function of the removed template.

1. ``EraseHolder.mask`` (the CS, pk only): per ciphertext ct = Enc(m), a uniform r ∈ Z_t^N, and ct + r (SEAL's
   plaintext addition, exact in BFV). Decrypted, it is u = m + r mod t: a one-time pad of every coefficient, so
   the key holder's view is independent of the gallery — exactly, not statistically (t is the plaintext modulus,
   decryption is exact while the noise is within its bound, and the noise of a stored ciphertext is that of fresh
   public-key encryptions and their sums, independent of m).
2. ``EraseKey.refresh`` (the KG, sk): u = Dec(ct + r), the coefficients the CS names set to 0 (μ ⊙ u, μ the 0/1
   keep mask), encrypted afresh under pk. The KG learns *which* coefficients (template rows) are erased, never a
   value.
3. ``EraseHolder.unmask`` (the CS): Enc(μ ⊙ u) − μ ⊙ r = Enc(μ ⊙ m): the erased rows decrypt to exactly 0, the
   others to what they held; the ciphertext is the KG's fresh encryption (fresh noise, no byte of the old one) less
   a plaintext, and r is dropped.

What the CS learns: nothing (it only ever holds ciphertexts under pk). A CS that sends something else than a masked
stored ciphertext gets back a fresh encryption under pk of what it sent: the KG is no decryption oracle.
"""
from __future__ import annotations

import secrets

import numpy as np
import tenseal.sealapi as sealapi

from ...crypto import seal_arrays, seal_io
from ...errors import ProtocolError
from .he import basis_of


class _Common:
    def __init__(self, public) -> None:
        self.public, self.basis = public, basis_of(public)
        self.n, self.t = public.params.poly_modulus_degree, int(public.params.plain_modulus)
        self.pid = public.seal_context.first_parms_id()
        self.evaluator = sealapi.Evaluator(public.seal_context)

    def _check(self, cts, what: str) -> np.ndarray:
        """Ciphertexts (k, 2, L, N) in coefficient form, every residue below its prime (ProtocolError otherwise)."""
        shape = (2, self.basis.L, self.n)
        if (not isinstance(cts, np.ndarray) or cts.dtype not in (np.uint32, np.uint64) or cts.ndim != 4
                or cts.shape[1:] != shape or cts.shape[0] < 1):
            raise ProtocolError(f"{what}: expected ciphertexts (k, {', '.join(map(str, shape))}) of unsigned residues")
        if np.any(cts >= self.basis.qv):
            raise ProtocolError(f"{what}: a residue is not below its prime")
        return cts.astype(np.uint64)

    def _check_keep(self, keep, k: int) -> np.ndarray:
        if not isinstance(keep, np.ndarray) or keep.dtype != np.bool_ or keep.shape != (k, self.n):
            raise ProtocolError(f"erase: expected a keep mask (bool, ({k}, {self.n}))")
        return keep

    def _ct(self, arr: np.ndarray):
        return seal_arrays.ciphertext_from_array(self.public.seal_context, self.pid, arr, ntt_form=False)

    def _plain(self, coeffs: np.ndarray):
        return seal_io.load_plaintext(self.public.seal_context, (0, 0, 0, 0), coeffs.astype(np.uint64), 1.0)


class EraseHolder(_Common):
    """The CS's two steps (pk only)."""

    def mask(self, cts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ct + r for each ciphertext (k, 2, L, N) uint64, the pads r (k, N) uniform mod t)."""
        cts = self._check(cts, "erase")
        if self.t & (self.t - 1):
            raise ProtocolError("erase: the pads are drawn for a power-of-two t")
        raw = np.frombuffer(secrets.token_bytes(8 * cts.shape[0] * self.n), dtype="<u8")
        r = (raw & np.uint64(self.t - 1)).reshape(cts.shape[0], self.n)
        out = np.empty_like(cts)
        for i in range(cts.shape[0]):
            ct = self._ct(cts[i])
            self.evaluator.add_plain_inplace(ct, self._plain(r[i]))
            out[i] = seal_arrays.ciphertext_to_array(ct)
        return out, r

    def add_plain(self, cts: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
        """ct + π per ciphertext (k, 2, L, N) and plaintext coefficients π (k, N) mod t — exact in BFV: new template
        rows written into rows a refresh has just zeroed (``gallery update`` in place); (k, 2, L, N) uint32."""
        cts = self._check(cts, "update")
        if coeffs.shape != (cts.shape[0], self.n) or np.any(coeffs >= np.uint64(self.t)):
            raise ProtocolError(f"update: expected plaintext coefficients ({cts.shape[0]}, {self.n}) below t")
        out = np.empty(cts.shape, dtype=np.uint32)
        for i in range(cts.shape[0]):
            ct = self._ct(cts[i])
            self.evaluator.add_plain_inplace(ct, self._plain(coeffs[i]))
            out[i] = seal_arrays.ciphertext_to_array(ct)
        return out

    def unmask(self, answer, r: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Step 3: Enc(μ ⊙ u) − μ ⊙ r per ciphertext: (k, 2, L, N) uint32, fresh, erased rows 0."""
        k = r.shape[0]
        answer = self._check(answer, "the key generator's answer")
        keep = self._check_keep(keep, k)
        if answer.shape[0] != k:
            raise ProtocolError(f"erase: the key generator answered {answer.shape[0]} ciphertexts, {k} were sent")
        out = np.empty(answer.shape, dtype=np.uint32)
        for i in range(k):
            ct = self._ct(answer[i])
            self.evaluator.sub_plain_inplace(ct, self._plain(np.where(keep[i], r[i], 0)))
            out[i] = seal_arrays.ciphertext_to_array(ct)
        return out


class EraseKey(_Common):
    """The KG's step (sk): ``refresh(masked, keep)``."""

    def __init__(self, secret) -> None:
        super().__init__(secret.public)
        self._decryptor = sealapi.Decryptor(self.public.seal_context, secret._secret_key)

    def refresh(self, masked: np.ndarray, keep: np.ndarray, *, strict: bool = True) -> np.ndarray:
        """Step 2: fresh Enc_pk(μ ⊙ Dec(masked)) per ciphertext (k, 2, L, N) uint64; ``masked`` and ``keep`` are
        checked (shapes, residues) before any use, and (``strict``, in process) a ciphertext beyond its noise bound
        is refused. A KG serving other processes (``scale.cryptomask_kg``) is not strict: a refusal that depends on
        a ciphertext's noise would tell its sender one bit about sk per request (a decryption-failure oracle), so
        it re-encrypts whatever the ciphertext decrypts to."""
        masked = self._check(masked, "erase")
        keep = self._check_keep(keep, masked.shape[0])
        out = np.empty_like(masked)
        for i in range(masked.shape[0]):
            ct = self._ct(masked[i])
            if strict and self._decryptor.invariant_noise_budget(ct) <= 0:
                raise ProtocolError("erase: a ciphertext does not decrypt (noise beyond its bound)")
            pt = sealapi.Plaintext()
            self._decryptor.decrypt(ct, pt)
            u = np.zeros(self.n, dtype=np.uint64)
            u[:pt.coeff_count()] = seal_io.data_array(seal_io.save(pt), pt.coeff_count(), "plaintext")
            fresh = sealapi.Ciphertext()
            self.public.encryptor.encrypt(self._plain(np.where(keep[i], u, 0)), fresh)
            out[i] = seal_arrays.ciphertext_to_array(fresh)
        return out


def keep_mask(rows: list[list[bool]], n: int, stride: int, slices: int) -> np.ndarray:
    """The keep mask of the ciphertexts of some stacks, (stacks·S, N): template row i of a stack is coefficients
    i·D … i·D + D − 1 of each of its S slices (``encoding.encode_matrix``); ``rows[s][i]`` False erases it."""
    out = np.ones((len(rows), slices, n), dtype=bool)
    for s, kept in enumerate(rows):
        for i, k in enumerate(kept):
            if not k:
                out[s, :, i * stride:(i + 1) * stride] = False
    return out.reshape(-1, n)


__all__ = ["EraseHolder", "EraseKey", "keep_mask"]
