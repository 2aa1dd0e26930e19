"""IDFace.ENC_DB / IDFace.IP_DB over Paillier (seed 003 §4.3, §5: 2048-bit modulus, 112-bit security).

One "slot" is one Paillier plaintext in Z_N: a block holds m templates, m the most base-p digits with
p^m < 2^{|N|−1} (m = 341 / 292 / 243 for β = 63 / 127 / 341 at |N| = 2048). C^σ_j = Enc(Σ_i p^{i} x^σ_{i,j}) for
each sign σ and column j (2d ciphertexts per block). A homomorphic addition is a product mod N², so
IP_DB costs 2(β − 1) multiplications mod N² and S_key 2 decryptions per block (Table 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import gmpy2
import numpy as np

from ...crypto.paillier import PaillierCiphertext, PaillierPrivateKey, PaillierPublicKey
from ...crypto.parallel import parallel_map
from ...errors import CryptoError, ProtocolError, TemplateError
from .params import IDFaceParams
from .transform import separate


@dataclass
class PaillierBlock:
    """C^σ_j as mpz values, shape [2][d], for ``count`` templates."""

    columns: list[list]
    count: int


@dataclass
class PaillierScores:
    """S_local → S_key: (ct⁺, ct⁻) per block and each block's count."""

    values: list[tuple]
    counts: list[int]

    def nbytes(self, public: PaillierPublicKey) -> int:
        return 2 * len(self.values) * public.ciphertext_bytes + 4 * len(self.counts)


class _Common:
    def __init__(self, public: PaillierPublicKey, params: IDFaceParams) -> None:
        if not isinstance(public, PaillierPublicKey):
            raise CryptoError("IDFace-Paillier needs a Paillier public key")
        self.public, self.params = public, params
        self.m = params.templates_per_slot(public.bits - 1)
        self.capacity = self.m


class IDFacePaillier(_Common):
    """Public side (S_local)."""

    def enc_db(self, x, offset: int = 0) -> PaillierBlock:
        """``offset``: the templates take digits offset, offset + 1, … (the lower digits stay 0)."""
        z = self.params.enrol_transform(x)
        if z.shape[1] != self.params.width or not 0 <= offset <= offset + z.shape[0] <= self.m:
            raise TemplateError(f"a block holds ≤ {self.m} templates of width {self.params.width}")
        p = self.params.base
        weights = [p ** (offset + i) for i in range(z.shape[0])]
        plain = [[sum(w for w, bit in zip(weights, col) if bit) for col in part.T] for part in separate(z)]
        flat = [m for row in plain for m in row]
        cts = parallel_map(lambda m: self.public.encrypt(m).value, flat)
        d = self.params.width
        return PaillierBlock([cts[:d], cts[d:]], offset + z.shape[0])

    def ip_db(self, y, blocks: list[PaillierBlock]) -> PaillierScores:
        z = self.params.query_transform(y)
        if z.shape != (1, self.params.width):
            raise TemplateError(f"IDFace query must be one template of width {self.params.width}")
        plus, minus = np.flatnonzero(z[0] > 0).tolist(), np.flatnonzero(z[0] < 0).tolist()
        nsq = self.public.nsquare

        def product(values):
            acc = gmpy2.mpz(1)
            for v in values:
                acc = acc * v % nsq
            return acc

        def one(b: PaillierBlock):
            cp, cm = b.columns
            return (product([cp[j] for j in plus] + [cm[j] for j in minus]),
                    product([cm[j] for j in plus] + [cp[j] for j in minus]))

        return PaillierScores(parallel_map(one, blocks), [b.count for b in blocks])

    def block_bytes(self, block: PaillierBlock) -> int:
        return 2 * self.params.width * self.public.ciphertext_bytes


class IDFacePaillierKey(_Common):
    """Secret side (S_key)."""

    def __init__(self, secret: PaillierPrivateKey, params: IDFaceParams) -> None:
        super().__init__(secret.public_key, params)
        self.secret = secret

    def decrypt_scores(self, msg: PaillierScores) -> np.ndarray:
        if not isinstance(msg, PaillierScores) or len(msg.values) != len(msg.counts):
            raise ProtocolError("expected PaillierScores with one (ct⁺, ct⁻) per block")
        if not all(isinstance(c, int) and 1 <= c <= self.m for c in msg.counts):
            raise ProtocolError(f"PaillierScores: block counts must lie in [1, {self.m}]")
        try:
            cts = [PaillierCiphertext(self.public, v) for pair in msg.values for v in pair]
        except (CryptoError, TypeError, ValueError) as e:
            raise ProtocolError(f"PaillierScores: {e}") from None
        plain = parallel_map(self.secret.decrypt, cts)
        p, out = self.params.base, []
        if any(v >= p ** self.m for v in plain):
            raise ProtocolError("IDFace-Paillier: decrypted value outside the encoding range")
        for k, count in enumerate(msg.counts):
            out.append(_digits(plain[2 * k], p, count) - _digits(plain[2 * k + 1], p, count))
        return np.concatenate(out)


def _digits(v: int, p: int, count: int) -> np.ndarray:
    """Decode (§4.2): the first ``count`` base-p digits of v."""
    if p & (p - 1) == 0:  # p = 2^k: read k-bit fields from the little-endian bytes
        k = p.bit_length() - 1
        raw = int(v).to_bytes(max((count * k + 7) // 8, (int(v).bit_length() + 7) // 8), "little")
        bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")[:count * k]
        return bits.reshape(count, k).astype(np.int64) @ (1 << np.arange(k, dtype=np.int64))
    out = np.empty(count, dtype=np.int64)
    for i in range(count):
        v, out[i] = divmod(v, p)
    return out
