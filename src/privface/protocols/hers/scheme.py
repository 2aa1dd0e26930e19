"""HERS as a database encryption scheme (seed 003 §3.1, Alg. 1–2) over CKKS slots.

ENC_DB (Alg. 1): a block X ∈ R^{N×d} (N = slot count) is parsed into its d columns c_j ∈ R^N and each column is
encrypted, ct_j = Enc(c_j) at scale Δ_x. IP_DB (Alg. 2): Xy = Σ_j y_j·c_j, so ct = Σ_j y_j ⊙ ct_j with y_j
encoded as the constant plaintext k_j = round(Δ_y·y_j) and summed. SEAL encrypts; the scalar multiply-adds
run on the exported RNS residues in numpy (``HERS.ip_db``), faster than SEAL's ``multiply_plain`` +
``add_inplace`` through the binding (``bench identify --seal-adds`` compares them); SEAL decrypts.

Erasure (``HERS.erase``, ``HERSKey.refresh``): the slots of withdrawn templates are zeroed by a masked interactive
refresh with S_key (``crypto.ckks_refresh``; S_key sees one-time-padded ciphertexts only).

Parameters and the precision bound: ``params.py``.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import tenseal.sealapi as sealapi

from ...crypto import seal_arrays
from ...crypto.ckks_refresh import CKKSRefresh, Masked, attempts_for, hiding_bits
from ...crypto.lattice import LatticePublicContext, LatticeSecretContext
from ...crypto.parallel import parallel_map
from ...errors import CryptoError, ProtocolError, TemplateError
from .params import HERS_CKKS, QUERY_SCALE_BITS

#: column ciphertexts per exchange of the erasing refresh: S_key re-encrypts one group while this side finishes the
#: one before (the same copies, bytes and hiding as one exchange of all d)
ERASE_GROUP = 16

_LOW = np.uint64((1 << 30) - 1)


@dataclass
class HERSBlock:
    """C = (ct_1, …, ct_d) for ``count`` templates, as 30-bit halves of the RNS residues: (2, d, 2·n) uint32."""

    planes: np.ndarray
    count: int


@dataclass
class CKKSScores:
    """S_local → S_key: the IP_DB ciphertexts as RNS arrays (blocks, k, 2, L, n) and each block's count."""

    arrays: np.ndarray
    counts: list[int]

    @property
    def nbytes(self) -> int:
        return int(self.arrays.nbytes) + 4 * len(self.counts)


def check_scores(msg, public: LatticePublicContext, per_block: int, capacity: int) -> np.ndarray:
    """Validate a ``CKKSScores`` for this context: shape, dtype, counts, residues below their primes."""
    if not isinstance(msg, CKKSScores) or not isinstance(msg.arrays, np.ndarray):
        raise ProtocolError("expected CKKSScores")
    levels = public._levels[tuple(public.seal_context.first_parms_id())]
    a = msg.arrays
    shape = (len(msg.counts), per_block, 2, len(levels), public.n)
    if a.dtype != np.uint64 or a.shape != shape:
        raise ProtocolError(f"CKKSScores: expected uint64 {shape}, got {a.dtype} {a.shape}")
    if not all(isinstance(c, int) and 1 <= c <= capacity for c in msg.counts):
        raise ProtocolError(f"CKKSScores: block counts must lie in [1, {capacity}]")
    moduli = np.array(levels, dtype=np.uint64)[:, None]
    if np.any(a >= moduli):
        raise ProtocolError("CKKSScores: residue not below its prime")
    return moduli


def unit_rows(x, dim: int | None = None) -> np.ndarray:
    """A finite (count, d) float64 matrix whose rows have ‖x‖₂ ≤ 1 + 1e-6."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or (dim is not None and x.shape[1] != dim) or not np.all(np.isfinite(x)):
        raise TemplateError(f"expected finite templates of shape (count, {dim or 'd'}), got {x.shape}")
    if np.any(np.linalg.norm(x, axis=1) > 1 + 1e-6):
        raise TemplateError("HERS templates and queries must have ‖x‖₂ ≤ 1")
    return x


class HERS:
    """Public side (S_local): ENC_DB and IP_DB under the public context."""

    def __init__(self, public: LatticePublicContext, dim: int) -> None:
        if public.params != HERS_CKKS and not public.insecure_test_params:
            raise TemplateError(f"HERS is specified for {HERS_CKKS.name}")
        self.public, self.dim = public, dim
        self.capacity = public.slot_count
        self.parms_id = public.seal_context.first_parms_id()
        self.moduli = np.array(public._levels[tuple(self.parms_id)], dtype=np.uint64)[:, None]
        if self.moduli.shape[0] != 1 or dim > 512:
            raise TemplateError("HERS here needs one data prime and d ≤ 512 (exact int64 multiply-adds)")

    def enc_db(self, x, offset: int = 0) -> HERSBlock:
        """Alg. 1: encrypt each column of the block (≤ slot-count rows) with SEAL; keep the residues. ``offset``:
        the templates fill slots offset, offset + 1, … and the slots before hold 0."""
        x = unit_rows(x, self.dim)
        if offset:
            x = np.concatenate([np.zeros((offset, self.dim)), x])
        if x.shape[0] > self.capacity:
            raise TemplateError(f"a HERS block holds at most {self.capacity} templates")
        cols = np.empty((self.dim, 2 * self.public.n), dtype=np.uint64)
        for j in range(self.dim):
            pt = sealapi.Plaintext()
            self.public.encoder.encode(x[:, j].tolist(), self.parms_id, self.public.scale, pt)
            ct = sealapi.Ciphertext()
            self.public.encryptor.encrypt(pt, ct)
            cols[j] = seal_arrays.ciphertext_to_array(ct).ravel()
        return HERSBlock(np.stack([cols & _LOW, cols >> np.uint64(30)]).astype(np.uint32), x.shape[0])

    def weights(self, y) -> np.ndarray:
        """k_j = round(2^20·y_j): the constant plaintexts of y_j at scale Δ_y (what SEAL's encoder makes)."""
        return np.rint(unit_rows(y, self.dim)[0] * 2.0 ** QUERY_SCALE_BITS).astype(np.int64)

    def ip_db(self, y, blocks: list[HERSBlock]) -> CKKSScores:
        """Alg. 2 for every block: Σ_j k_j·ct_j mod q₀. With ct_j = lo_j + 2^30·hi_j (30-bit halves),
        Σ_j k_j·lo_j and Σ_j k_j·hi_j are exact in int64 (|k_j| ≤ 2^20, d ≤ 512: < 2^59), reduced mod q₀
        and recombined: numpy multiply-adds instead of d SEAL ``multiply_plain`` + ``add_inplace``."""
        k = self.weights(y)
        q = int(self.moduli[0, 0])
        out = np.empty((len(blocks), 1, 2, 1, self.public.n), dtype=np.uint64)

        def one(b: int) -> None:
            planes = blocks[b].planes
            acc = np.zeros(planes.shape[::2], dtype=np.int64)  # (2 halves, 2·n)
            tmp = np.empty_like(acc)
            for j, kj in enumerate(k.tolist()):
                if kj:
                    np.multiply(planes[:, j], kj, out=tmp, dtype=np.int64, casting="unsafe")
                    acc += tmp
            acc %= q
            out[b].reshape(-1)[:] = _shift_add(acc[1].astype(np.uint64), acc[0].astype(np.uint64), q)

        parallel_map(one, range(len(blocks)))
        return CKKSScores(out, [b.count for b in blocks])

    def refresher(self) -> CKKSRefresh:
        return refresher(self.public)

    def erase(self, block: HERSBlock, keep, key, *, hiding: float = 40.0) -> tuple[HERSBlock, dict]:
        """A new block whose slots with ``keep`` False decrypt to ≈ 0 and the others to what ``block``'s do,
        sharing no bytes with it (``crypto.ckks_refresh``): the masked copies of the d column ciphertexts go to
        S_key's ``key.refresh`` (its answer: [(b, seed)] chunks of fresh encryptions at q₀·P), then the slot mask is
        applied here.
        Returns (block, {"attempts", "hiding_bits", "bytes_sent", "bytes_received"})."""
        ref = self.refresher()
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.capacity,):
            raise TemplateError(f"erase: the slot mask needs {self.capacity} entries")
        cols = block.planes[0].astype(np.uint64) | (block.planes[1].astype(np.uint64) << np.uint64(30))
        cts = cols.reshape(self.dim, 2, 1, self.public.n)
        attempts = attempts_for(ref.q0, ref.bound, self.public.n, self.dim, hiding)  # for all d: S_key sees them all
        mu, sent, received, parts = keep.astype(np.float64), 0, 0, []
        with ThreadPoolExecutor(2) as pool:  # group g's prepare and erase run while S_key works on the next group
            for lo in range(0, self.dim, ERASE_GROUP):
                masked, r = ref.mask(cts[lo:lo + ERASE_GROUP], attempts)
                prepared = pool.submit(ref.prepare, r, mu)
                answer = key.refresh(masked)
                sent += masked.nbytes
                received += sum(int(b.nbytes) + len(seed) for b, seed in answer)
                parts.append(pool.submit(lambda a, r, p: ref.erase(a, r, mu, p.result()), answer, r, prepared))
            fresh = np.concatenate([f.result() for f in parts]).reshape(self.dim, 2 * self.public.n)
        planes = np.stack([fresh & _LOW, fresh >> np.uint64(30)]).astype(np.uint32)
        return HERSBlock(planes, block.count), {
            "attempts": attempts, "hiding_bits": round(hiding_bits(ref.q0, ref.bound, self.public.n, self.dim,
                                                                   attempts), 1),
            "bytes_sent": int(sent), "bytes_received": received}

    @staticmethod
    def block_bytes(block: HERSBlock) -> int:
        """Ciphertext residue bytes (2·L·n·8 per column, held as two uint32 halves)."""
        return int(block.planes.nbytes)


_REFRESHERS: dict[bytes, CKKSRefresh] = {}


def refresher(public: LatticePublicContext) -> CKKSRefresh:
    """The refresh for ``public``'s ciphertexts, one per public key (its fingerprint) for the process: its set-up
    (a SEAL context at q₀·P·P', the NTT permutations, the public key's arrays) is paid once, not per change."""
    key = public.fingerprint + public.params.fingerprint
    if key not in _REFRESHERS:
        if len(_REFRESHERS) >= 4:
            _REFRESHERS.pop(next(iter(_REFRESHERS)))
        _REFRESHERS[key] = CKKSRefresh(public)
    return _REFRESHERS[key]


def _shift_add(hi: np.ndarray, lo: np.ndarray, q: int) -> np.ndarray:
    """(hi·2^30 + lo) mod q for residues hi, lo < q < 2^61, by 30 modular doublings (no 128-bit product)."""
    qq = np.uint64(q)
    for _ in range(30):
        hi <<= np.uint64(1)
        hi -= qq * (hi >= qq)
    hi += lo
    hi -= qq * (hi >= qq)
    return hi


class HERSKey:
    """Secret side (S_key): decrypts the IP_DB ciphertexts into scores."""

    def __init__(self, secret: LatticeSecretContext) -> None:
        self.secret, self.public = secret, secret.public
        self.capacity = self.public.slot_count
        self._decryptor = sealapi.Decryptor(self.public.seal_context, secret._secret_key)

    def refresh(self, masked: Masked) -> list[tuple[np.ndarray, bytes]]:
        """S_key's step of the erasing refresh (``crypto.ckks_refresh.CKKSRefresh.reencrypt_top``): the masked
        copies of the column ciphertexts (``Masked``: padded c₀ halves (attempts, g, n), c₁ halves (g, n))
        decrypted and encrypted afresh at q₀·P, as one (b, seed) chunk. At most 16 copies of 512 ciphertexts."""
        if getattr(self, "_refresh", None) is None:  # its own: it caches the secret key's arrays
            self._refresh = CKKSRefresh(self.public)
        if (not isinstance(masked, tuple) or len(masked) != 2 or not isinstance(masked[1], np.ndarray)
                or not 1 <= len(masked[1]) <= 512):
            raise ProtocolError("refresh: expected copies of 1 to 512 masked ciphertexts")
        try:
            return [self._refresh.reencrypt_top(self.secret._secret_key, masked)]
        except CryptoError as e:
            raise ProtocolError(str(e)) from None

    def decrypt_scores(self, msg: CKKSScores) -> np.ndarray:
        check_scores(msg, self.public, 1, self.capacity)
        pid = self.public.seal_context.first_parms_id()
        scale = self.public.scale * 2.0 ** QUERY_SCALE_BITS
        out = []
        for arr, count in zip(msg.arrays, msg.counts):
            ct = seal_arrays.ciphertext_from_array(self.public.seal_context, pid, arr[0], scale=scale)
            pt = sealapi.Plaintext()
            self._decryptor.decrypt(ct, pt)
            out.append(np.asarray(self.public.encoder.decode_double(pt)[:count]))
        return np.concatenate(out)


__all__ = ["CKKSScores", "HERS", "HERSBlock", "HERSKey"]
