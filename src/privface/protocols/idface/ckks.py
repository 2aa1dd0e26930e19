"""IDFace.ENC_DB / IDFace.IP_DB over CKKS with coefficient packing (seed 003 §4.3, Table 1).

Packing. A block holds ``capacity`` = n·m templates: template t of the block sits in digit i = ⌊t/n⌋ of
coefficient c = t mod n. Per column j and sign σ ∈ {+, −} the plaintext polynomial has coefficients
Δ·Σ_i p^{i}·x^σ_{t(i,c), j} (Encode, §4.2) and C^σ_j = Enc(it) — 2d ciphertexts per block (HERS Alg. 1 on the
separated, encoded matrix).

IP_DB (Table 1): with z = T_β(y) = z⁺ − z⁻, ct⁺ = Σ_{j∈z⁺} C⁺_j + Σ_{j∈z⁻} C⁻_j and ct⁻ = Σ_{j∈z⁺} C⁻_j +
Σ_{j∈z⁻} C⁺_j: 2(β − 1) additions, then 2 decryptions per block; Decode(ct⁺) − Decode(ct⁻) = ⟨T_α(x), z⟩.

Precision (verified, not assumed): coefficient packing reads the decrypted polynomial's integer coefficients
Δ·v + e mod q₀ exactly (no CKKS canonical-embedding rounding, which would cap exact integers near 2^45 in
double precision). SEAL's public-key encryption error is small: tests assert that the worst |e| of a sum of 512
fresh encryptions is ≤ 2^12 (``NOISE_BOUND``) and of the lift's β = 1365 sums (D = 2048, ``lift.py``) ≤ 2^12.5
(``LIFT_NOISE_BOUND``), still below Δ/2 = 2^13 (measured: docs, idface page). Δ = 2^14 > 2·2^12.5 rounds it away, and
v < p^m ≤ 2^44 keeps Δ·v + e < 2^58 < q₀/2. So 44 payload bits
(the paper keeps 50 of a 61-bit slot with HEaaN): m = 7 / 6 / 5 for β = 63 / 127 / 341 at d = 512
(p = 64 / 128 / 342) and 11 / 8 / 6 for β = 15 / 31 / 85 at d = 128, over n = 8192 coefficients —
57344 templates per ciphertext pair at β = 63 (the paper: 8 × 4096 slots = 32768).

The encrypted database is held as uint64 RNS arrays (``crypto.seal_arrays``): encryption is SEAL's
``encrypt_zero`` plus the NTT'd plaintext, additions are numpy with lazy reduction, decryption is SEAL's.
Parameters ``IDFACE_CKKS`` = ``HERS_CKKS`` (N = 8192, q = 60 + 60 bits, 192-bit by the HE standard table).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tenseal.sealapi as sealapi

from ...crypto import seal_arrays
from ...crypto.lattice import LatticePublicContext, LatticeSecretContext
from ...crypto.parallel import parallel_map
from ...errors import ProtocolError, TemplateError
from ..hers.params import HERS_CKKS
from ..hers.scheme import CKKSScores, check_scores
from .params import IDFaceParams
from .transform import decode, encode, separate

IDFACE_CKKS = HERS_CKKS
NOISE_BITS = 14
PAYLOAD_BITS = 44
#: Asserted bound on |e| of a sum of ≤ 512 fresh encryptions (tests/protocols/idface/test_idface.py).
NOISE_BOUND = 1 << 12
#: Asserted bound on |e| of a sum of 1365 fresh encryptions (β of the lift D = 2048).
LIFT_NOISE_BOUND = 5793  # ⌊2^12.5⌋


@dataclass
class CKKSBlock:
    """(C⁺, C⁻) as one uint64 array (2 signs, d columns, 2 polys, L limbs, n) for ``count`` templates."""

    data: np.ndarray
    count: int


class _Common:
    def __init__(self, public: LatticePublicContext, params: IDFaceParams) -> None:
        if public.params != IDFACE_CKKS and not public.insecure_test_params:
            raise TemplateError(f"IDFace-CKKS is specified for {IDFACE_CKKS.name}")
        levels = public._levels[tuple(public.seal_context.first_parms_id())]
        if len(levels) != 1 or levels[0] < 2 * (1 << (NOISE_BITS + PAYLOAD_BITS)) + (1 << NOISE_BITS):
            raise TemplateError("IDFace-CKKS needs one data prime q₀ > 2^59")
        self.public, self.params = public, params
        self.m = params.templates_per_slot(PAYLOAD_BITS)
        self.n = public.n
        self.capacity = self.n * self.m
        self.q = levels[0]
        self.moduli = np.array(levels, dtype=np.uint64)[:, None]
        self.parms_id = public.seal_context.first_parms_id()


class IDFaceCKKS(_Common):
    """Public side (S_local): IDFace.ENC_DB and IDFace.IP_DB."""

    def enc_db(self, x, offset: int = 0) -> CKKSBlock:
        """T_α, separation, Encode, then one encryption per (sign, column). ``offset``: the templates take block
        positions offset, offset + 1, … and the positions before stay 0 (a block to add to a stored one whose
        first ``offset`` positions are used: ``scale.lifecycle.add``)."""
        z = self.params.enrol_transform(x)
        if z.shape[1] != self.params.width or not 0 <= offset <= offset + z.shape[0] <= self.capacity:
            raise TemplateError(f"a block holds ≤ {self.capacity} templates of width {self.params.width}")
        count, d = offset + z.shape[0], z.shape[1]
        padded = np.zeros((self.capacity, d), dtype=np.int8)
        padded[offset:count] = z
        digits = padded.reshape(self.m, self.n, d)  # template t → (digit ⌊t/n⌋, coefficient t mod n)
        polys = np.empty((2, d, self.n), dtype=np.uint64)
        for s, part in enumerate(separate(digits)):
            polys[s] = encode(part, self.params.base).T << np.uint64(NOISE_BITS)  # Δ·x'
        plain = seal_arrays.ntt(self.public.seal_context, self.public.evaluator, self.parms_id,
                                 polys.reshape(2 * d, 1, self.n))
        cts = seal_arrays.encryptions_of_zero(self.public.encryptor, 2 * d)
        cts[:, 0] += plain  # Enc(m) = Enc(0) + (NTT(m), 0)
        seal_arrays.add_mod(cts[:, 0], self.moduli)
        return CKKSBlock(cts.reshape(2, d, 2, 1, self.n), count)

    def query(self, y) -> tuple[np.ndarray, np.ndarray]:
        """(indices of z⁺, indices of z⁻) for z = T_β(y)."""
        z = self.params.query_transform(y)
        if z.shape != (1, self.params.width):
            raise TemplateError(f"IDFace query must be one template of width {self.params.width}")
        return np.flatnonzero(z[0] > 0), np.flatnonzero(z[0] < 0)

    def ip_db(self, y, blocks: list[CKKSBlock]) -> CKKSScores:
        """ct⁺, ct⁻ for every block (Table 1: 2(β − 1) additions per block)."""
        plus, minus = self.query(y)
        out = np.empty((len(blocks), 2, 2, 1, self.n), dtype=np.uint64)

        def one(b: int) -> None:
            c = blocks[b].data
            seal_arrays.lazy_sum([c[0, j] for j in plus] + [c[1, j] for j in minus], self.moduli, out[b, 0])
            seal_arrays.lazy_sum([c[1, j] for j in plus] + [c[0, j] for j in minus], self.moduli, out[b, 1])

        parallel_map(one, range(len(blocks)))
        return CKKSScores(out, [b.count for b in blocks])

    @staticmethod
    def block_bytes(block: CKKSBlock) -> int:
        return int(block.data.nbytes)


class IDFaceCKKSKey(_Common):
    """Secret side (S_key): 2 decryptions per block, Decode, ct⁺ − ct⁻."""

    def __init__(self, secret: LatticeSecretContext, params: IDFaceParams) -> None:
        super().__init__(secret.public, params)
        self.secret = secret  # for S_key's side of erasure (``erase.DigitEraseKey``)
        self._decryptor = sealapi.Decryptor(self.public.seal_context, secret._secret_key)
        self._s_ntt = (seal_arrays.secret_key_array(secret._secret_key, self.n, 1)
                       if seal_arrays.HAVE_LONG_DOUBLE_MULMOD else None)

    def _decrypt(self, cts: np.ndarray) -> np.ndarray:
        """(k, 1, n) NTT-form plaintexts of (k, 2, 1, n) ciphertexts: c0 + c1·s mod q₀ on the whole array
        (``seal_arrays.decrypt_arrays``, equal to SEAL's ``Decryptor.decrypt`` —
        tests/protocols/idface/test_idface.py), or SEAL's decryptor one ciphertext at a time where numpy has no
        80-bit long double."""
        if self._s_ntt is not None:
            return seal_arrays.decrypt_arrays(cts, self._s_ntt, self.moduli)
        out = np.empty((len(cts), 1, self.n), dtype=np.uint64)
        for i, ct_arr in enumerate(cts):
            ct = seal_arrays.ciphertext_from_array(self.public.seal_context, self.parms_id, ct_arr)
            pt = sealapi.Plaintext()
            self._decryptor.decrypt(ct, pt)
            out[i] = seal_arrays.plaintext_to_array(pt).reshape(1, self.n)
        return out

    def decrypt_scores(self, msg: CKKSScores) -> np.ndarray:
        check_scores(msg, self.public, 2, self.capacity)
        ntt_plain = self._decrypt(msg.arrays.reshape((-1,) + msg.arrays.shape[2:]))
        coeffs = seal_arrays.inverse_ntt(self.public.seal_context, self.public.evaluator, self.parms_id, ntt_plain)
        v = coeffs.reshape(len(msg.counts), 2, self.n).astype(np.uint64)
        # centred lift then round(·/Δ); a valid encoding lies in [0, p^m) after rounding
        half = np.uint64(self.q // 2)
        neg = v > half
        v = np.where(neg, np.uint64(self.q) - v, v)
        rounded = (v + np.uint64(1 << (NOISE_BITS - 1))) >> np.uint64(NOISE_BITS)
        if np.any(rounded[neg] != 0) or np.any(rounded >= np.uint64(self.params.base ** self.m)):
            raise ProtocolError("IDFace-CKKS: decrypted value outside the encoding range (wrong key or tampered)")
        digits = decode(rounded, self.params.base, self.m)  # (m, blocks, 2, n)
        scores = digits[:, :, 0] - digits[:, :, 1]  # (m, blocks, n)
        per_block = scores.transpose(1, 0, 2).reshape(len(msg.counts), self.capacity)
        return np.concatenate([row[:c] for row, c in zip(per_block, msg.counts)])
