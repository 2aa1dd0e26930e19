"""Erasing CKKS slots of stored one-prime ciphertexts by a masked interactive refresh (Mouchet, Troncoso-Pastoriza,
Bossuat, Hubaux, "Multiparty Homomorphic Encryption from Ring-Learning-with-Errors", PoPETs 2021 §IV-E: collective
refresh, here with one key holder).

Why a refresh. No integer-coefficient plaintext zeroes one CKKS slot: the slots of m are its values at the primitive
2N-th roots of unity, which are Galois conjugates, so an integer polynomial vanishing at one vanishes at all (it is
then divisible by X^N + 1). A 0/1 slot mask μ is therefore encoded at a scale P and the product rescaled by P: it
needs one more prime than a ciphertext stored at one prime q₀ has. The refresh lifts the ciphertext to q₀·P:

1. ``mask`` (holder of the ciphertexts, no secret): for each ciphertext ct = (c₀, c₁), ``attempts`` = k copies
   ct + (r_t, 0) with r_t uniform mod q₀ — each copy alone is a one-time pad of the plaintext. The copies differ in
   c₀ + r_t only; their common c₁ is sent once (``Masked``: the padded c₀ halves and the c₁ halves), which is the
   same view as k whole copies (they carry k equal c₁'s), for (k + 1)/(2k) of the bytes. The pad is drawn in NTT
   form (uniform there, so uniform in coefficients: the NTT is a bijection) and brought to coefficients only when
   ``prepare`` tests it.
2. ``reencrypt_top`` (key holder): w_t = Dec(ct + r_t) = c₀ + r_t + c₁·s mod q₀ (c₁·s once per ciphertext), lifted
   to (−q₀/2, q₀/2], encrypted afresh under s at modulus q₀·P (symmetric RLWE encryption: uniform a expanded from a
   fresh 32-byte seed, which travels instead of a; centred binomial error η = 24 from ChaCha20 under a fresh seed
   from the OS) — one pass per copy in the native core (``bfv.Basis.refresh_reencrypt``) on SEAL's NTT-order
   arrays. The key holder
   sees k uniform values per ciphertext and is not told which slots are being erased, nor which copy will be used.
3. ``erase`` (holder): per ciphertext, a copy whose mask is *clean* — every centred coefficient |r_i| ≤ ⌊q₀/2⌋ − B,
   B ≥ |m_i + e_i| (``plaintext_bound``), so that w − r = m + e exactly over the integers — is chosen; r is
   subtracted at q₀·P, the result multiplied by μ encoded at scale P (0 at the erased slots, 1 elsewhere), a fresh
   public-key encryption of 0 at q₀·P added (``zeros_top``) and the sum rescaled back to q₀ (scale Δ·P/P = Δ). It
   decrypts to μ ⊙ v (erased slots ≈ 0 up to CKKS noise) and shares no bytes with the old ciphertext.

Hiding. The choice depends on the masks only and is never sent, so the key holder's view is independent of m unless
no copy of some ciphertext is clean; then ``erase`` fails (nothing is written; the caller may start again). A copy
is dirty with probability ≤ N·2B/q₀, so the key holder's view is within statistical distance
c·(N·2B/q₀)^k of one independent of the gallery for c ciphertexts (``hiding_bits``; ``attempts_for`` picks k).
A one-copy mask drawn from [−R, R] with no wrap-around (the plain collective refresh) gives only
≈ log₂(q₀/2B) − log₂(c·N) bits at one 60-bit prime: the copies buy the rest without a second stored prime.

The second prime P is the context's special prime (its key level is q₀·P, so the key holder's secret-key residues
mod P exist already); a helper SEAL context with primes (q₀, P, P') encodes μ, and the transforms, products and the
rescale run in the native core in SEAL's NTT order (``crypto.seal_ntt``; SEAL's NTT tables depend on the prime and
N only, so the helper's q₀ level is the stored ciphertexts' representation).
"""
from __future__ import annotations

import math
import secrets
import struct
from typing import NamedTuple

import numpy as np
import tenseal.sealapi as sealapi

from ..errors import CryptoError
from . import seal_arrays
from .seal_ntt import SealOrderNTT


class Masked(NamedTuple):
    """What the holder sends the key holder (step 1): ``padded`` (attempts, k, n) the copies' c₀ + r_t and
    ``columns`` (k, n) the ciphertexts' c₁ (one per ciphertext: every copy of it has the same), all NTT form mod q₀,
    uint64."""

    padded: np.ndarray
    columns: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.padded.nbytes + self.columns.nbytes)


def plaintext_bound(scale: float, max_slot: float = 1.0 + 1e-6) -> int:
    """B ≥ |m_i + e_i| for a ciphertext whose slots hold real |v| ≤ max_slot at scale Δ: |m_i| ≤ (2/N)·Σ_j |v_j|·Δ
    ≤ Δ·max_slot; Δ/256 more covers the noise of many summed encryptions (≈ 2^16 at Δ = 2^36)."""
    return int(scale * max_slot + scale / 256) + 1


def hiding_bits(q0: int, bound: int, n: int, ciphertexts: int, attempts: int) -> float:
    """−log₂ of the statistical distance bound c·(N·2B/q₀)^k of the module docstring."""
    return -(math.log2(ciphertexts) + attempts * math.log2(n * 2 * bound / q0))


def attempts_for(q0: int, bound: int, n: int, ciphertexts: int, bits: float = 40.0) -> int:
    """The fewest copies k giving ``hiding_bits`` ≥ bits."""
    k = 1
    while hiding_bits(q0, bound, n, ciphertexts, k) < bits:
        k += 1
    return k


class CKKSRefresh:
    """The refresh for the one-prime ciphertexts of ``public`` (a ``LatticePublicContext`` whose data level is one
    prime q₀ and whose key level is q₀·P)."""

    def __init__(self, public) -> None:
        self.public, self.n = public, public.n
        key_primes = [m.value() for m in public.seal_context.key_context_data().parms().coeff_modulus()]
        self.pid = public.seal_context.first_parms_id()
        data = public._levels[tuple(self.pid)]
        if len(data) != 1 or len(key_primes) != 2:
            raise CryptoError("the refresh is for ciphertexts stored at one prime (key level q₀·P)")
        self.q0, self.p = key_primes
        spare = [m.value() for m in sealapi.CoeffModulus.Create(self.n, [60] * 3) if m.value() not in key_primes]
        primes = [sealapi.Modulus(v) for v in (self.q0, self.p, spare[0])]
        parms = sealapi.EncryptionParameters(sealapi.SCHEME_TYPE.CKKS)
        parms.set_poly_modulus_degree(self.n)
        parms.set_coeff_modulus(primes)
        self.context = sealapi.SEALContext(parms, True, sealapi.SEC_LEVEL_TYPE.NONE)
        self.top = self.context.first_parms_id()
        self.evaluator = sealapi.Evaluator(self.context)
        self.encoder = sealapi.CKKSEncoder(self.context)
        self.top_moduli = np.array([[self.q0], [self.p]], dtype=np.uint64)
        self.low = SealOrderNTT(public.seal_context, public.evaluator, self.pid, [self.q0], self.n)
        self.high = SealOrderNTT(self.context, self.evaluator, self.top, [self.q0, self.p], self.n)
        self.pk = seal_arrays.ciphertext_to_array(public.public_key.data())  # (2, 2, n) at q₀·P, SEAL's NTT order
        if self.pk.shape != (2, 2, self.n):
            raise CryptoError("the refresh needs the public key at the key level q₀·P")
        self.bound = plaintext_bound(public.scale)
        self.clean = self.q0 // 2 - self.bound

    # ---------------------------------------------------------------- holder of the ciphertexts (no secret key)
    def mask(self, cts: np.ndarray, attempts: int) -> tuple[Masked, np.ndarray]:
        """(masked, pads): ``attempts`` masked copies of k NTT-form ciphertexts (k, 2, 1, n) — ``Masked``: the
        padded c₀ halves (attempts, k, n), copy-major, and the k c₁ halves once — and their pads (attempts, k, n),
        NTT form: uniform mod q₀ (the native core's ChaCha20 under a fresh seed from ``secrets``), so each
        r_t = NTT⁻¹(pad) is uniform mod q₀ too (the NTT is a bijection of Z_q₀^n) and only the copies ``prepare``
        looks at are ever transformed."""
        cts = self._check(cts, 1)
        k = cts.shape[0]
        if not 1 <= attempts <= 16:
            raise CryptoError("refresh: 1 to 16 copies per ciphertext")
        pads = self.low.basis.uniform(secrets.token_bytes(32), attempts * k)[:, 0].reshape(attempts, k, self.n)
        padded = pads + cts[None, :, 0, 0]  # residues < 2^61: no wrap
        seal_arrays.reduce_once(padded, self.top_moduli[:1])
        return Masked(padded, np.ascontiguousarray(cts[:, 1, 0])), pads

    def prepare(self, pads: np.ndarray, keep: np.ndarray) -> tuple:
        """The part of step 3 that needs only the pads and the slot mask (so it can run while the key holder
        works): the first clean copy per ciphertext (copies are transformed to coefficients only until one is
        clean: almost always the first), its mask at q₀·P, μ encoded at scale P and the fresh encryptions of 0;
        CryptoError when the shapes do not fit or some ciphertext has no clean copy."""
        attempts, k = pads.shape[:2]
        if pads.ndim != 3 or pads.shape[2] != self.n or keep.shape != (self.n // 2,):
            raise CryptoError("erase: masks or slot mask of the wrong shape")
        pick, r = np.full(k, -1), np.empty((k, self.n), dtype=np.int64)
        todo = np.arange(k)
        for t in range(attempts):
            if not todo.size:
                break
            rt = self.low.inverse(pads[t, todo][:, None])[:, 0]
            rc = rt.view(np.int64)  # residues < q₀ < 2^63: centred in place
            np.subtract(rc, np.int64(self.q0), out=rc, where=rt > np.uint64(self.q0 // 2))
            ok = np.all(np.abs(rc) <= self.clean, axis=1)
            pick[todo[ok]], r[todo[ok]] = t, rc[ok]
            todo = todo[~ok]
        if todo.size:
            raise CryptoError("refresh: no clean copy for some ciphertext (a rare event: start again)")
        pt = sealapi.Plaintext()
        self.encoder.encode(np.asarray(keep, dtype=np.float64).tolist(), self.top, float(self.p), pt)
        mu = seal_arrays.plaintext_to_array(pt).reshape(2, self.n)
        return attempts, k, pick, self._ntt_top(r, centred=True), mu, self.zeros_top(k)

    def zeros_top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """k public-key encryptions of 0 at q₀·P as SEAL's ``encrypt_zero`` makes them before it switches them down
        to q₀ (``util::encrypt_zero_asymmetric``: pk·u + e, u uniform ternary, e centred binomial): pk·u in NTT
        form and e's coefficients as residues mod (q₀, P), both (k, 2, 2, n), added to the slot-mask product
        before its rescale, so that ⌊(μ·ct + pk·u + e)/P⌉ is ⌊μ·ct/P⌉ plus SEAL's encryption of 0 at q₀ (up to
        the rounding of one sum)."""
        u = _ternary(k * self.n).reshape(k, self.n)
        uh = self._ntt_top(u, centred=True)
        pu = np.stack([self.high.mul(uh, self.pk[0]), self.high.mul(uh, self.pk[1])], axis=1)
        e = binomial(k * 2 * self.n).reshape(k, 2, 1, self.n)
        return pu, np.where(e < 0, e + self.top_moduli[:, 0, None], e).astype(np.uint64)

    def erase(self, answer: list, pads: np.ndarray, keep: np.ndarray, prepared: tuple | None = None) -> np.ndarray:
        """Step 3: (k, 2, 1, n) fresh ciphertexts of keep ⊙ v from the key holder's answer to ``mask`` — a list of
        (b, seed) chunks, chunk c for the next g_c ciphertexts with all their copies, b (attempts·g_c, 2, n)
        copy-major, the a halves expanded from seed (``expand_a``) — and the pads (attempts, k, n) (``prepared``:
        ``prepare(pads, keep)``, computed here when not given); CryptoError when the answer does not fit or some
        ciphertext has no clean copy."""
        attempts, k, pick, r_top, mu, (pu, e) = prepared if prepared is not None else self.prepare(pads, keep)
        if pads.shape != (attempts, k, self.n):
            raise CryptoError("erase: masks of the wrong shape")
        chunks, lo = [], 0  # (first ciphertext, its ciphertexts, b, seed)
        for b, seed in answer:
            if (not isinstance(b, np.ndarray) or b.ndim != 3 or b.shape[1:] != (2, self.n) or len(seed) != 32
                    or not b.shape[0] or b.shape[0] % attempts):
                raise CryptoError("erase: the key holder's answer has the wrong shape")
            chunks.append((lo, b.shape[0] // attempts, b, seed))
            lo += b.shape[0] // attempts
        if lo != k:
            raise CryptoError(f"erase: the key holder answered for {lo} ciphertexts, {k} were sent")
        top = np.empty((k, 2, 2, self.n), dtype=np.uint64)
        for lo, g, b, seed in chunks:
            for j in range(lo, lo + g):
                i = int(pick[j]) * g + j - lo
                top[j, 0], top[j, 1] = b[i], self.expand_a(seed, i)
        self._check(top, 2)
        b0 = top[:, 0]
        b0 += self.top_moduli
        b0 -= r_top  # in (0, 2q): one conditional subtraction
        seal_arrays.reduce_once(b0, self.top_moduli)
        x = self.high.mul(top, mu)
        x += pu
        coeffs = self.high.inverse(seal_arrays.reduce_once(x, self.top_moduli))
        for limb, q in enumerate((self.q0, self.p)):  # + e mod q (``prepare`` gave e's residues)
            part = coeffs[:, :, limb]
            part += e[:, :, limb]
            seal_arrays.reduce_once(part, np.array([q], dtype=np.uint64))
        return self.low.forward(self.high.basis.rescale(coeffs))

    # ---------------------------------------------------------------- key holder
    def reencrypt_top(self, secret_key, masked: Masked) -> tuple[np.ndarray, bytes]:
        """Step 2: decrypt each masked copy (``Masked``: padded (attempts, g, n), columns (g, n)) to w and return
        fresh encryptions (b, a) of w at q₀·P, NTT form, as (b (attempts·g, 2, n) copy-major, seed):
        a_i = ``expand_a(seed, i)``, so only b and 32 bytes travel. ``masked`` is checked (shape, dtype, residues
        < q₀) before any use; the work is one native pass per copy (``bfv.Basis.refresh_reencrypt``: c₁·s once
        per ciphertext, the errors' ChaCha20 seed fresh from ``secrets``)."""
        padded, columns = self._check_masked(masked)
        if getattr(self, "_s", (None,))[0] is not secret_key:
            self._s = (secret_key, seal_arrays.secret_key_array(secret_key, self.n, 2))
        seed = secrets.token_bytes(32)
        b = self.high.basis.refresh_reencrypt(padded.reshape(-1, self.n), columns, self._s[1], self.high.perm,
                                              seed, secrets.token_bytes(32))
        return b, seed

    def expand_a(self, seed: bytes, i: int) -> np.ndarray:
        """The uniform a (2, n) of the i-th fresh encryption, NTT form mod (q₀, P): the ChaCha20 keystream under
        ``seed`` with nonce i, by rejection sampling (as SEAL's seeded ciphertexts expand theirs)."""
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

        stream = Cipher(algorithms.ChaCha20(seed, struct.pack("<QQ", 0, i)), None).encryptor()
        out = np.empty((2, self.n), dtype=np.uint64)
        for limb, q in enumerate((self.q0, self.p)):
            mask, got = np.uint64((1 << q.bit_length()) - 1), []
            have = 0
            while have < self.n:
                raw = np.frombuffer(stream.update(bytes(8 * (self.n - have + 64))), dtype="<u8") & mask
                raw = raw[raw < np.uint64(q)][:self.n - have]
                got.append(raw)
                have += raw.size
            out[limb] = np.concatenate(got)
        return out

    # ---------------------------------------------------------------- helpers
    def _check_masked(self, masked) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(masked, tuple) or len(masked) != 2:
            raise CryptoError("refresh: expected the padded halves and the columns")
        padded, columns = masked
        for a, nd in ((padded, 3), (columns, 2)):
            if not isinstance(a, np.ndarray) or a.dtype != np.uint64 or a.ndim != nd or a.shape[-1] != self.n:
                raise CryptoError(f"refresh: expected uint64 (attempts, g, {self.n}) and (g, {self.n})")
        if not 1 <= padded.shape[0] <= 16 or padded.shape[1] != columns.shape[0] or not columns.shape[0]:
            raise CryptoError("refresh: 1 to 16 copies of each of g ≥ 1 ciphertexts")
        if np.any(padded >= np.uint64(self.q0)) or np.any(columns >= np.uint64(self.q0)):
            raise CryptoError("refresh: residue not below its prime")
        return np.ascontiguousarray(padded), np.ascontiguousarray(columns)

    def _check(self, cts: np.ndarray, limbs: int) -> np.ndarray:
        shape = (2, limbs, self.n)
        if not isinstance(cts, np.ndarray) or cts.dtype != np.uint64 or cts.ndim != 4 or cts.shape[1:] != shape:
            raise CryptoError(f"refresh: expected uint64 ciphertexts (k, {', '.join(map(str, shape))})")
        moduli = self.top_moduli[:limbs]
        if np.any(cts >= moduli):
            raise CryptoError("refresh: residue not below its prime")
        return cts

    def rescale(self, top: np.ndarray) -> np.ndarray:
        """SEAL's ``rescale_to_next`` of NTT-form ciphertexts (k, 2, 2, n) at q₀·P: (k, 2, 1, n) NTT-form residues
        mod q₀ of ⌊c/P⌉ (the native core's modulus switching on the coefficients)."""
        coeffs = self.high.inverse(top)
        return self.low.forward(self.high.basis.rescale(coeffs))

    def _ntt_top(self, coeffs: np.ndarray, centred: bool = False) -> np.ndarray:
        """(k, 2, n) NTT-form residues mod (q₀, P) of integer polynomials (k, n) (``centred``: the caller knows
        every |coefficient| < min(q₀, P))."""
        polys = np.empty((coeffs.shape[0], 2, self.n), dtype=np.uint64)
        m = min(self.q0, self.p)
        if centred or not coeffs.size or (coeffs.min() > -m and coeffs.max() < m):  # one addition per limb
            neg = coeffs < 0
            for limb, q in enumerate((self.q0, self.p)):
                np.copyto(polys[:, limb], coeffs.view(np.uint64))
                np.add(polys[:, limb], np.uint64(q), out=polys[:, limb], where=neg)
        else:
            for limb, q in enumerate((self.q0, self.p)):
                polys[:, limb] = np.mod(coeffs, q).astype(np.uint64)
        return self.high.forward(polys)


def _random_bytes(n: int) -> bytes:
    """n bytes of the ChaCha20 keystream under a fresh key and nonce from the OS CSPRNG (``secrets``): a CSPRNG
    three times faster than ``os.urandom`` for the 10⁸ bytes a block's refresh draws."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    return Cipher(algorithms.ChaCha20(secrets.token_bytes(32), secrets.token_bytes(16)), None).encryptor().update(
        bytes(n))


def uniform(q: int, n: int) -> np.ndarray:
    """n uniform residues mod q (uint64) from ``_random_bytes``, by rejection sampling (q ≥ 2^59: few rejections)."""
    mask = np.uint64((1 << q.bit_length()) - 1)
    out, have = [], 0
    while have < n:
        want = n - have
        raw = np.frombuffer(_random_bytes(8 * (want + want // 16 + 64)), dtype="<u8") & mask
        raw = raw[raw < np.uint64(q)][:want]
        out.append(raw)
        have += raw.size
    return np.concatenate(out) if len(out) > 1 else out[0]


def _ternary(n: int) -> np.ndarray:
    """n uniform values in {−1, 0, 1} (int64) from ``_random_bytes`` (bytes below 255 mod 3, by rejection)."""
    out, have = [], 0
    while have < n:
        raw = np.frombuffer(_random_bytes(n - have + (n - have) // 64 + 64), dtype=np.uint8)
        raw = raw[raw < 255][:n - have]
        out.append(raw)
        have += raw.size
    return (np.concatenate(out) % 3).astype(np.int64) - 1


def binomial(n: int) -> np.ndarray:
    """n samples of the centred binomial distribution with η = 24 (σ = √12 ≈ 3.46 ≥ SEAL's 3.2), int64: the
    difference of the bit counts of two disjoint 24-bit fields of a random 64-bit word."""
    raw = np.frombuffer(_random_bytes(8 * n), dtype="<u8")
    plus = np.bitwise_count(raw & np.uint64(0xFFFFFF)).view(np.int8)  # counts ≤ 24: int8 differences
    return (plus - np.bitwise_count(raw & np.uint64(0xFFFFFF << 24)).view(np.int8)).astype(np.int64)


__all__ = ["CKKSRefresh", "Masked", "attempts_for", "hiding_bits", "plaintext_bound"]
