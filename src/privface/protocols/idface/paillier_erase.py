"""Erasing one identity's base-p digit from IDFace-Paillier block ciphertexts (seed 003 §4.3, §5) without giving the
gallery to the key holder: the Paillier counterpart of ``erase`` (same garbled-circuit and OT plumbing).

Template t of a block is digit t of every column plaintext V = Σ_k p^k·b_k (bits b_k). S_local (pk only) sends
c·(1 + R·N) = Enc(V + R) with R uniform mod N, so S_key decrypts U = V + R mod N, uniform. Per target (column,
digit i) S_key garbles ``digit_circuit``: with M = p^{i+1}, V mod M = (U mod M − R mod M + (N mod M)·[U < R]) mod M
— S_key's inputs U and U mod M, S_local's R, R mod M and a random bit ρ by IKNP OT — and b_i = [V mod M ≥ p^i]
(the lower digits are bits, so they sum to less than p^i); the output is b_i ⊕ ρ, uniform. S_key returns a fresh
Enc(b_i ⊕ ρ); S_local turns it into Enc(b_i) (ρ = 1: Enc(1)·Enc(b ⊕ ρ)^{−1}), multiplies the column by
Enc(b_i)^{−p^i} and re-randomises it (·r^N for a fresh r): Enc(V − p^i·b_i), exact (Paillier has no noise), a
ciphertext distributed as a fresh one and sharing no byte with the old.

What S_key learns: uniform U and b ⊕ ρ, the digit positions (not their values). S_local: garbled tables, labels,
ciphertexts under pk. Semi-honest (as ``crypto.ckks_refresh``).
"""
from __future__ import annotations

import functools
import secrets

import gmpy2
import numpy as np

from ...crypto import garble
from ...crypto.paillier import PaillierCiphertext
from ...errors import CryptoError, ProtocolError
from .erase import GarbledHolder, GarbledKey, circuit_bytes


@functools.lru_cache(maxsize=32)
def digit_circuit(N: int, p: int, i: int) -> garble.Circuit:
    """Garbler inputs U (|N| bits), U mod M (|M| bits); evaluator inputs R, R mod M, ρ; output b_i ⊕ ρ
    (module docstring), M = p^{i+1}."""
    nb, M = N.bit_length(), p ** (i + 1)
    mb = M.bit_length()
    B = garble.CircuitBuilder()
    U, u = B.garbler_input(nb), B.garbler_input(mb)
    R, r, rho = B.evaluator_input(nb), B.evaluator_input(mb), B.evaluator_input(1)[0]
    zero = B.constant(0, 1)[0]
    wrap = B.lt(U, R)
    d, ge = B._x_plus_not_y_plus_1(u + [zero], r + [zero])
    lt = B.inv(ge)
    v = B.add(d, [lt if bit else zero for bit in garble.to_bits(M, mb + 1)])  # u − r mod M, in [0, M)
    v = B.add(v, [wrap if bit else zero for bit in garble.to_bits(N % M, mb + 1)])
    d, g = B._x_plus_not_y_plus_1(v, B.constant(M, mb + 1))
    v = [B.xor(x, B.and_(g, B.xor(x, y))) for x, y in zip(v[:mb], d[:mb])]  # V mod M
    B.output(B.xor(B.ge(v, B.constant(p ** i, mb)), rho))
    return B.build()


def _bits(v: int, k: int) -> list[int]:
    return [(v >> j) & 1 for j in range(k)]


class _Common:
    def __init__(self, public, params) -> None:
        self.public, self.params = public, params
        self.N, self.nsq, self.p = int(public.n), public.nsquare, params.base
        self.m = params.templates_per_slot(public.bits - 1)

    def _check_targets(self, targets, k: int) -> np.ndarray:
        t = np.asarray(targets)
        if (t.ndim != 2 or t.shape[1] != 2 or t.shape[0] < 1 or t.dtype.kind not in "iu" or np.any(t < 0)
                or np.any(t[:, 0] >= k) or np.any(t[:, 1] >= self.m)):
            raise ProtocolError("digit erasure: targets must be (ciphertext, digit) rows in range")
        return t.astype(np.int64)

    def _check_cts(self, cts, what: str) -> list:
        if not isinstance(cts, list) or not cts:
            raise ProtocolError(f"{what}: expected a list of Paillier ciphertexts")
        try:
            return [PaillierCiphertext(self.public, c).value for c in cts]
        except (CryptoError, TypeError, ValueError) as e:
            raise ProtocolError(f"{what}: {e}") from None


class PaillierEraseHolder(_Common, GarbledHolder):
    """S_local's side: ``start`` → ``evaluate`` → ``labels`` → ``finish`` (``erase.erase_digits`` runs them)."""

    @property
    def ct_bytes(self) -> int:
        """One ciphertext sent (⌈|N²|/8⌉ bytes; the answer is one per target, in ``target_bytes``)."""
        return (self.nsq.bit_length() + 7) // 8

    def target_bytes(self, row) -> int:
        return circuit_bytes(digit_circuit(self.N, self.p, int(row[1]))) + (self.nsq.bit_length() + 7) // 8

    def start(self, cts: list, targets) -> dict:
        cts = self._check_cts(cts, "digit erasure")
        t = self._check_targets(targets, len(cts))
        R = [secrets.randbelow(self.N) for _ in cts]
        masked = [int(c * (1 + r * self.N) % self.nsq) for c, r in zip(cts, R)]
        rho = [secrets.randbits(1) for _ in range(len(t))]
        choices, circuits = [], []
        for (k, i), bit in zip(t, rho):
            M = self.p ** (int(i) + 1)
            choices += _bits(R[k], self.N.bit_length()) + _bits(R[k] % M, M.bit_length()) + [bit]
            circuits.append(digit_circuit(self.N, self.p, int(i)))
        self._state = {"cts": cts, "t": t, "rho": rho, "circuits": circuits,
                       "choices": np.array(choices, dtype=np.uint8)}
        return {"masked": masked, "targets": t}

    def finish(self, fresh: list) -> list:
        """Enc(b ⊕ ρ) per target → the columns with Enc(b)^{−p^i} multiplied in, each re-randomised."""
        st = self._state
        fresh = self._check_cts(fresh, "the key holder's answer")
        if len(fresh) != len(st["t"]):
            raise ProtocolError(f"digit erasure: {len(fresh)} answers, {len(st['t'])} targets")
        cts = list(st["cts"])
        for (k, i), e, rho in zip(st["t"], fresh, st["rho"]):
            inv = gmpy2.invert(e, self.nsq)
            enc_b = (1 + self.N) * inv % self.nsq if rho else e  # Enc(1 − (b ⊕ 1)) = Enc(b)
            cts[k] = cts[k] * gmpy2.powmod(gmpy2.invert(enc_b, self.nsq), self.p ** int(i), self.nsq) % self.nsq
        touched = sorted({int(k) for k in st["t"][:, 0]})
        for k in touched:
            cts[k] = cts[k] * self.public.random_rn() % self.nsq
        del self._state
        return cts


class PaillierEraseKey(_Common, GarbledKey):
    """S_key's side (the Paillier secret key): ``open`` → ``transfer`` → ``close``."""

    def __init__(self, secret, params) -> None:
        super().__init__(secret.public_key, params)
        self.secret = secret

    def open(self, request: dict) -> dict:
        masked = self._check_cts(request.get("masked"), "digit erasure")
        t = self._check_targets(request.get("targets"), len(masked))
        U = {int(k): self.secret.decrypt(PaillierCiphertext(self.public, masked[int(k)])) for k in set(t[:, 0])}
        circuits, gbits = [], []
        for k, i in t:
            M = self.p ** (int(i) + 1)
            circuits.append(digit_circuit(self.N, self.p, int(i)))
            gbits.append(_bits(U[int(k)], self.N.bit_length()) + _bits(U[int(k)] % M, M.bit_length()))
        self._state = {"t": t}
        return self._garble(circuits, gbits)

    def close(self, outputs: list[bytes]) -> list:
        """Fresh Enc(b ⊕ ρ) per target."""
        bits = self._decode(outputs)
        del self._state
        return [self.public.encrypt(b).value for b in bits]


__all__ = ["PaillierEraseHolder", "PaillierEraseKey", "digit_circuit"]
