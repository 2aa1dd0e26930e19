"""Enrolment proofs Π_en of Game-Set-MATCH (seed 004 §6 enrolment, §8, App. F) over our Paillier (g = N + 1).

The device D proves to the service provider SP, for its key epk = N and ciphertexts c_i = ⟦x_i; r_i⟧:

* **Π_epk** (§8.1) — N is a well-formed Paillier modulus. The paper defers to Hazay et al.; we implement the
  Paillier–Blum modulus proof Π^mod of Canetti, Gennaro, Goldfeder, Makriyannis, Peled, "UC Non-Interactive,
  Proactive, Threshold ECDSA with Identifiable Aborts" (CGGMP20, ePrint 2021/060, §6.3, Fig. 16), made
  non-interactive with Fiat–Shamir. It shows gcd(N, φ(N)) = 1 (every y has an N-th root, so (x, r) ↦ ⟦x; r⟧
  is a bijection Z_N × Z*_N → Z*_{N²}) and that N = p^a·q^b with p ≡ q ≡ 3 (mod 4), hence N = pq. Key
  generation constraint: Blum primes, ``generate_paillier_keypair(..., blum=True)``. CGGMP's companion
  "no small factor" proof Π^fac (it needs a ring-Pedersen setup from the verifier) is *not* implemented; the
  verifier instead refuses any N with a prime factor below 2^16 by a gcd with the primorial (a public check).
  A small factor only weakens the device's own key; the SP's checks rely on gcd(N, φ(N)) = 1 and |N|.
* **Π_ptxt-knwdg** (§8.2, Fig. 9, proof App. F.1) — batched proof of knowledge of all (x_i, r_i), with one
  response (w, z) for n ciphertexts; Fiat–Shamir challenges e_i of ``CHALLENGE_BITS`` bits (the paper draws
  them from Z*_N; any challenge space below the smallest prime factor keeps special soundness, and 128-bit
  challenges make the exponentiations 24× shorter).
* **Π_zk-L2** (§8.3, Fig. 10, proof App. F.2) — Σ x_i² = y over the integers (x_i read in (−N/2, N/2]), from
  a check mod N and a second check mod a prime N̂ the verifier draws after the x_i are fixed. The verifier's
  message carries secrets (α, β, β̂, ρ_i, N̂), so this proof stays interactive: ``NormVerifier.challenge`` is an
  SP → D message and ``norm_response`` the D → SP answer. Statistical security λ = 40: α ← [1, 2^40).

Malformed proof objects (wrong counts, values out of range, not in Z*_N / Z*_{N²}) raise ``ProtocolError``;
well-formed proofs whose equations fail make ``verify_*`` return False.
"""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpz

from ...crypto.numbers import crt, multiexp, random_prime, random_unit
from ...crypto.paillier import OwnerShortExponentRn, PaillierCiphertext, PaillierPrivateKey, PaillierPublicKey
from ...crypto.parallel import parallel_map
from ...errors import CryptoError, PrivfaceError, ProtocolError
from ...wire import Message, decode
from .messages import key_width

#: Statistical security parameter λ of seed 004 §9 (MAC key α ← [1, 2^λ) in Fig. 10).
STAT_LAMBDA = 40
#: Repetitions m of Π^mod (CGGMP20 Fig. 16): soundness error 2^−m per Fiat–Shamir query.
MOD_ROUNDS = 128
#: Bits of each Fiat–Shamir challenge e_i of Fig. 9 (soundness error 2^−128 per query).
CHALLENGE_BITS = 128
#: Bits of the verifier's prime N̂ of Fig. 10 (y ≪ N̂ ≪ N).
N_HAT_BITS = 128
#: No prime factor of N may be below this bound (public check beside Π^mod).
SMALL_FACTOR_BOUND = 2**16
_PRIMORIAL = gmpy2.primorial(SMALL_FACTOR_BOUND)

#: What each proof establishes, how, and what it reveals (the gsm catalogue can include it as data).
PROOFS = {
    "pi_epk": {"paper": "seed 004 §8.1; CGGMP20 (ePrint 2021/060) Fig. 16 Π^mod",
               "statement": "N = pq, p ≡ q ≡ 3 mod 4, gcd(N, φ(N)) = 1, no prime factor < 2^16",
               "rounds": 1, "fiat_shamir": True, "soundness_bits": MOD_ROUNDS,
               "leakage": "nothing beyond the statement (honest-verifier ZK, random-oracle model)"},
    "pi_ptxt_knwdg": {"paper": "seed 004 §8.2, Fig. 9, App. F.1", "statement": "D knows (x_i, r_i) of every c_i",
                      "rounds": 1, "fiat_shamir": True, "soundness_bits": CHALLENGE_BITS,
                      "leakage": "nothing (honest-verifier ZK; w = s + Σ e_i x_i with s uniform in Z_N)"},
    "pi_zk_l2": {"paper": "seed 004 §8.3, Fig. 10, App. F.2", "statement": "Σ x_i² = y over the integers",
                 "rounds": 2, "fiat_shamir": False, "soundness_bits": STAT_LAMBDA,
                 "leakage": "nothing (honest-verifier ZK); the verifier's challenge must stay secret and fresh"},
}
_DOMAIN = b"privface/gsm/zk/v1/"


# ---------------------------------------------------------------- Fiat–Shamir


def _xof(label: bytes, *items) -> hashlib._Hash:
    """SHAKE-256 over a domain-separated transcript: tag, then each item length-prefixed."""
    h = hashlib.shake_256(_DOMAIN + label)
    for item in items:
        raw = bytes(item) if isinstance(item, (bytes, bytearray)) else int(item).to_bytes(
            (int(item).bit_length() + 7) // 8, "big")
        h.update(len(raw).to_bytes(4, "big") + raw)
    return h


def _split(h, count: int, size: int) -> list[mpz]:
    stream = h.digest(count * size)
    return [mpz(int.from_bytes(stream[i * size:(i + 1) * size], "big")) for i in range(count)]


def _as_bytes(data, what: str) -> bytes:
    if not isinstance(data, (bytes, bytearray)):
        raise ProtocolError(f"{what} must be bytes, got {type(data).__name__}")
    return bytes(data)


def _decode(cls, data, public_key: PaillierPublicKey | None = None):
    """The message ``cls`` from a wire frame (its integers ``key_width`` bytes wide for ``public_key``, when
    given); any framing error is a ProtocolError."""
    widths = None if public_key is None else {"n_bytes": key_width(_public_key(public_key).n)}
    try:
        return cls(**decode(data, cls.WIRE_NAME, widths)[1])
    except PrivfaceError as e:
        raise ProtocolError(f"malformed {cls.__name__}: {e}") from e


def _residue(v, n, what: str, unit: bool = True) -> mpz:
    """v as mpz if it is an integer with 0 ≤ v < n (and a unit of Z_n when ``unit``), else ProtocolError."""
    if isinstance(v, bool) or not isinstance(v, (int, type(mpz(0)))):
        raise ProtocolError(f"{what} must be an integer, got {type(v).__name__}")
    v = mpz(v)
    if not 0 <= v < n or (unit and gmpy2.gcd(v, n) != 1):
        raise ProtocolError(f"{what} is not in {'Z*' if unit else 'Z'}_n for this key (n = N or N²)")
    return v


def _ciphertexts(pk: PaillierPublicKey, ciphertexts) -> list[mpz]:
    cs = list(ciphertexts)
    if not cs:
        raise ProtocolError("the statement needs at least one ciphertext")
    for c in cs:
        if not isinstance(c, PaillierCiphertext) or c.public_key != pk:
            raise ProtocolError("every statement ciphertext must be a PaillierCiphertext under the proof's key")
    return [c.value for c in cs]


def _public_key(pk) -> PaillierPublicKey:
    if not isinstance(pk, PaillierPublicKey):
        raise ProtocolError(f"expected a PaillierPublicKey, got {type(pk).__name__}")
    return pk


def _check_width(msg, pk: PaillierPublicKey) -> None:
    """The message's integer width (``n_bytes``) is this key's: a wider or narrower encoding is refused."""
    if msg.n_bytes != key_width(pk.n):
        raise ProtocolError(f"{type(msg).__name__} carries integers of {msg.n_bytes} bytes; this key's are "
                            f"{key_width(pk.n)} bytes")


# ---------------------------------------------------------------- Π_epk: Paillier–Blum modulus (CGGMP20 Fig. 16)


@dataclass
class ModulusProof(Message):
    """π = (w, {x_i, a_i, b_i, z_i}_{i ≤ m}); ``ab[i] = a_i + 2·b_i``; integers ``n_bytes`` wide (N's width)."""

    WIRE_NAME = "gsm.ModulusProof"
    n_bytes: int
    w: int
    x: list[int]
    z: list[int]
    ab: bytes

    @classmethod
    def from_bytes(cls, data, public_key: PaillierPublicKey, rounds: int = MOD_ROUNDS) -> ModulusProof:
        """Parse and validate against N: exactly ``rounds`` entries, every value in Z*_N, a_i, b_i bits."""
        proof = _decode(cls, _as_bytes(data, "ModulusProof"), public_key)
        proof.check(public_key, rounds)
        return proof

    def check(self, public_key: PaillierPublicKey, rounds: int = MOD_ROUNDS) -> None:
        n = _public_key(public_key).n
        _check_width(self, public_key)
        if not isinstance(self.ab, bytes) or not isinstance(self.x, list) or not isinstance(self.z, list):
            raise ProtocolError("ModulusProof x, z must be lists and ab bytes")
        if not (len(self.x) == len(self.z) == len(self.ab) == rounds):
            raise ProtocolError(f"ModulusProof must have exactly {rounds} rounds")
        if any(b > 3 for b in self.ab):
            raise ProtocolError("ModulusProof a_i, b_i must be bits")
        _residue(self.w, n, "ModulusProof w")
        for v in (*self.x, *self.z):
            _residue(v, n, "ModulusProof x_i / z_i")


def _mod_challenges(n, w, rounds: int, context: bytes) -> list[mpz]:
    """y_1..y_m ∈ Z_N from H(N, w, context) (statistical distance 2^−128 from uniform)."""
    size = (n.bit_length() + 7) // 8 + 16
    return [y % n for y in _split(_xof(b"mod", n, w, context), rounds, size)]


def _fourth_root(y, w, p, q) -> tuple[int, mpz]:
    """(a + 2b, x) with x⁴ ≡ (−1)^a·w^b·y (mod pq), p ≡ q ≡ 3 (mod 4), (w|N) = −1.

    Exactly one of ±y, ±wy is a square mod p and mod q; for a square s mod p ≡ 3 (mod 4),
    s^((p+1)/4) is its square root that is itself a square, so s^(((p+1)/4)²) is a 4th root."""
    n = p * q
    for a, b in ((0, 0), (1, 0), (0, 1), (1, 1)):
        yp = (-y if a else y) * (w if b else 1) % n
        if gmpy2.legendre(yp, p) == 1 and gmpy2.legendre(yp, q) == 1:
            xp = gmpy2.powmod(yp, ((p + 1) // 4) ** 2 % (p - 1), p)
            xq = gmpy2.powmod(yp, ((q + 1) // 4) ** 2 % (q - 1), q)
            return a + 2 * b, crt(xp, xq, p, q, gmpy2.invert(q, p))
    raise CryptoError("y shares a factor with N")  # probability ≈ 2/√N


def prove_modulus(sk: PaillierPrivateKey, *, context: bytes = b"", rounds: int = MOD_ROUNDS,
                  workers: int | None = 1) -> ModulusProof:
    """P of Π^mod (CGGMP20 Fig. 16) with Fiat–Shamir: w with (w|N) = −1; y_i = H(N, w); z_i = y_i^(N⁻¹ mod φ(N)),
    x_i = ((−1)^a_i w^b_i y_i)^(1/4) mod N. Needs p ≡ q ≡ 3 (mod 4) (``blum=True`` key generation)."""
    p, q = sk.p, sk.q
    if p % 4 != 3 or q % 4 != 3:
        raise CryptoError("Π_epk needs a Paillier–Blum key (p ≡ q ≡ 3 mod 4): generate it with blum=True")
    n = p * q
    while True:
        w = random_unit(n)
        if gmpy2.jacobi(w, n) == -1:
            break
    ip = gmpy2.invert(n, p - 1), gmpy2.invert(n, q - 1)  # N⁻¹ mod φ(N), split by CRT
    q_inv_p = gmpy2.invert(q, p)

    def answer(y):
        z = crt(gmpy2.powmod(y, ip[0], p), gmpy2.powmod(y, ip[1], q), p, q, q_inv_p)
        return (int(z), *_fourth_root(y, w, p, q))

    rows = parallel_map(answer, _mod_challenges(n, w, rounds, bytes(context)), workers)
    return ModulusProof(key_width(n), int(w), [int(x) for _, _, x in rows], [z for z, _, _ in rows],
                        bytes(b for _, b, _ in rows))


def verify_modulus(pk: PaillierPublicKey, proof: ModulusProof, *, context: bytes = b"",
                   rounds: int = MOD_ROUNDS, workers: int | None = 1) -> bool:
    """V of Π^mod: N odd, not prime, no prime factor < 2^16, (w|N) = −1, and for every i
    z_i^N ≡ y_i and x_i⁴ ≡ (−1)^a_i·w^b_i·y_i (mod N)."""
    n = _public_key(pk).n
    if not isinstance(proof, ModulusProof):
        raise ProtocolError(f"expected a ModulusProof, got {type(proof).__name__}")
    proof.check(pk, rounds)
    if n % 2 == 0 or gmpy2.is_prime(n, 50) or gmpy2.gcd(n, _PRIMORIAL) != 1:
        return False
    w = mpz(proof.w)
    if gmpy2.jacobi(w, n) != -1:
        return False

    def holds(row) -> bool:
        y, x, z, bits = row
        return (gmpy2.powmod(z, n, n) == y
                and gmpy2.powmod(x, 4, n) == (-y if bits & 1 else y) * (w if bits & 2 else 1) % n)

    return all(parallel_map(holds, zip(_mod_challenges(n, w, rounds, bytes(context)), proof.x, proof.z, proof.ab),
                            workers))


# ---------------------------------------------------------------- Π_ptxt-knwdg: Fig. 9


@dataclass
class PlaintextKnowledgeProof(Message):
    """(a = ⟦s; u⟧, w, z) of Fig. 9; z is sent mod N (see ``prove_plaintext_knowledge``); integers ``n_bytes``
    wide (a: twice that)."""

    WIRE_NAME = "gsm.PlaintextKnowledgeProof"
    n_bytes: int
    a: int
    w: int
    z: int

    @classmethod
    def from_bytes(cls, data, public_key: PaillierPublicKey) -> PlaintextKnowledgeProof:
        proof = _decode(cls, _as_bytes(data, "PlaintextKnowledgeProof"), public_key)
        proof.check(public_key)
        return proof

    def check(self, public_key: PaillierPublicKey) -> None:
        """a ∈ Z*_{N²}, w ∈ Z_N, z ∈ Z*_N, else ProtocolError."""
        pk = _public_key(public_key)
        _check_width(self, pk)
        _residue(self.a, pk.nsquare, "PlaintextKnowledgeProof a")
        _residue(self.w, pk.n, "PlaintextKnowledgeProof w", unit=False)
        _residue(self.z, pk.n, "PlaintextKnowledgeProof z")


def _ptxt_challenges(pk: PaillierPublicKey, cs: list, a, context: bytes) -> list[mpz]:
    """e_1..e_n = H(N, c_1..c_n, a, context), ``CHALLENGE_BITS`` bits each."""
    return _split(_xof(b"ptxt", pk.n, len(cs), *cs, a, context), len(cs), CHALLENGE_BITS // 8)


def encrypt_with_witness(sk: PaillierPrivateKey, values, *, workers: int | None = 1
                         ) -> tuple[list[PaillierCiphertext], list[tuple[int, mpz]]]:
    """Π_en-Enc: c_i = ⟦x_i; r_i⟧ = (1 + x_i N)·r_i^N mod N² (x_i taken mod N) and the witness (x_i mod N, r_i).
    r_i = h^(s_i) with short s_i from fixed-base tables (``OwnerShortExponentRn``, DJN10 §4.2)."""
    pk = sk.public_key
    source = OwnerShortExponentRn(sk)

    def encrypt(v):
        x = mpz(int(v)) % pk.n
        r, rn = source.random_r_rn()
        return PaillierCiphertext._trusted(pk, pk.plain_factor(x) * rn % pk.nsquare), (int(x), r)

    rows = parallel_map(encrypt, values, workers)
    return [c for c, _ in rows], [w for _, w in rows]


def prove_plaintext_knowledge(pk: PaillierPublicKey, ciphertexts, witness, *,
                              context: bytes = b"") -> PlaintextKnowledgeProof:
    """P of Fig. 9 with e_i = H(...): a = ⟦s; u⟧, w = s + Σ e_i x_i mod N, z = u·g^t·Π r_i^e_i.

    With g = N + 1, (g^t)^N ≡ 1 (mod N²) and z^N mod N² depends only on z mod N, so z is sent reduced
    mod N (g^t ≡ 1 mod N): the verification equation ⟦w; z⟧ = a·Π c_i^e_i is the paper's, unchanged."""
    pk = _public_key(pk)
    cs = _ciphertexts(pk, ciphertexts)
    if len(witness) != len(cs):
        raise CryptoError("the witness needs one (x_i, r_i) per ciphertext")
    n, n2 = pk.n, pk.nsquare
    s, u = mpz(secrets.randbelow(n)), random_unit(n)
    a = pk.plain_factor(s) * gmpy2.powmod(u, n, n2) % n2
    es = _ptxt_challenges(pk, cs, a, bytes(context))
    w, z = s, u
    for e, (x, r) in zip(es, witness):
        w += e * x
        z = z * gmpy2.powmod(r, e, n) % n
    return PlaintextKnowledgeProof(key_width(n), int(a), int(w % n), int(z))


def verify_plaintext_knowledge(pk: PaillierPublicKey, ciphertexts, proof: PlaintextKnowledgeProof, *,
                               context: bytes = b"") -> bool:
    """V of Fig. 9: accept iff ⟦w; z⟧ = g^w·z^N ≡ a·Π c_i^e_i (mod N²)."""
    pk = _public_key(pk)
    cs = _ciphertexts(pk, ciphertexts)
    if not isinstance(proof, PlaintextKnowledgeProof):
        raise ProtocolError(f"expected a PlaintextKnowledgeProof, got {type(proof).__name__}")
    proof.check(pk)
    n, n2 = pk.n, pk.nsquare
    rhs = mpz(proof.a) * multiexp(cs, _ptxt_challenges(pk, cs, proof.a, bytes(context)), n2) % n2
    return pk.plain_factor(mpz(proof.w)) * gmpy2.powmod(mpz(proof.z), n, n2) % n2 == rhs


# ---------------------------------------------------------------- Π_zk-L2: Fig. 10


@dataclass
class NormChallenge(Message):
    """V → P of Fig. 10: N̂ and ⟦w_i⟧, ⟦v⟧, ⟦v̂⟧ (ciphertext values mod N², 2·``n_bytes`` wide)."""

    WIRE_NAME = "gsm.NormChallenge"
    n_bytes: int
    n_hat: int
    w: list[int]
    v: int
    v_hat: int

    @classmethod
    def from_bytes(cls, data, public_key: PaillierPublicKey, count: int) -> NormChallenge:
        msg = _decode(cls, _as_bytes(data, "NormChallenge"), public_key)
        msg.check(public_key, count)
        return msg

    def check(self, public_key: PaillierPublicKey, count: int) -> None:
        """``count`` ciphertexts in Z*_{N²}, N̂ a prime of ``N_HAT_BITS`` bits, else ProtocolError."""
        pk = _public_key(public_key)
        _check_width(self, pk)
        if len(self.w) != count:
            raise ProtocolError(f"NormChallenge must carry {count} ciphertexts ⟦w_i⟧, got {len(self.w)}")
        if mpz(self.n_hat).bit_length() != N_HAT_BITS or not gmpy2.is_prime(self.n_hat, 50):
            raise ProtocolError(f"NormChallenge N̂ must be a {N_HAT_BITS}-bit prime")
        for c in (*self.w, self.v, self.v_hat):
            _residue(c, pk.nsquare, "NormChallenge ciphertext")


@dataclass
class NormResponse(Message):
    """P → V of Fig. 10: z ∈ Z_N (``n_bytes`` wide) and ẑ ∈ Z_N̂."""

    WIRE_NAME = "gsm.NormResponse"
    n_bytes: int
    z: int
    z_hat: int

    @classmethod
    def from_bytes(cls, data) -> NormResponse:
        return _decode(cls, _as_bytes(data, "NormResponse"))


def norm_response(sk: PaillierPrivateKey, challenge: NormChallenge, count: int, *,
                  workers: int | None = 1) -> NormResponse:
    """P of Fig. 10: decrypt w_i, v, v̂; z = v + Σ w_i² mod N, ẑ = v̂ + Σ w_i² mod N̂."""
    pk = sk.public_key
    if not isinstance(challenge, NormChallenge):
        raise ProtocolError(f"expected a NormChallenge, got {type(challenge).__name__}")
    challenge.check(pk, count)
    *ws, v, v_hat = parallel_map(lambda c: mpz(sk.decrypt(PaillierCiphertext._trusted(pk, mpz(c)))),
                                 [*challenge.w, challenge.v, challenge.v_hat], workers)
    squares = sum(w * w for w in ws)
    n_hat = mpz(challenge.n_hat)
    return NormResponse(key_width(pk.n), int((v + squares) % pk.n), int((v_hat + squares) % n_hat))


class NormVerifier:
    """V of Fig. 10 for one statement (pk, ⟦x_1⟧..⟦x_n⟧, y): ``challenge()`` then one ``verify(response)``.

    Holds the secrets α ∈ [1, 2^λ), ρ_i, β, β̂ ∈ Z_N and the prime N̂ drawn after the x_i are fixed; they are
    dropped after the single verification (a second answer to the same challenge is refused)."""

    def __init__(self, pk: PaillierPublicKey, ciphertexts, y: int, *, stat_lambda: int = STAT_LAMBDA,
                 pool=None, workers: int | None = 1) -> None:
        """``pool``: an ``RnPool`` of r^N values the SP computed ahead of time (n + 2 are used)."""
        self.public_key = _public_key(pk)
        _ciphertexts(self.public_key, ciphertexts)
        if isinstance(y, bool) or not isinstance(y, int) or not 0 <= y < self.public_key.n:
            raise ProtocolError("the L2-norm statement y must be a non-negative integer below N")
        self.ciphertexts = list(ciphertexts)
        self.y = y
        self._lambda = stat_lambda
        self._pool = pool
        self._workers = workers
        self._secrets = None
        self._used = False

    def challenge(self) -> NormChallenge:
        """⟦w_i⟧ = α⟦x_i⟧ + ⟦ρ_i⟧, ⟦v⟧ = Σ(−2αρ_i⟦x_i⟧ − ρ_i²) + ⟦β⟧, ⟦v̂⟧ = Σ ĉ_i⟦x_i⟧ + d̂ + ⟦β̂⟧ with
        ĉ_i = −2αρ_i mod N̂, d̂ = Σ −ρ_i² mod N̂ (Fig. 10)."""
        if self._secrets is not None or self._used:
            raise ProtocolError("this NormVerifier already issued its challenge")
        pk = self.public_key
        n, n2 = pk.n, pk.nsquare
        n_hat = random_prime(N_HAT_BITS)
        alpha = mpz(1 + secrets.randbelow(2**self._lambda - 1))
        beta, beta_hat = mpz(secrets.randbelow(n)), mpz(secrets.randbelow(n))
        rhos = [mpz(secrets.randbelow(n)) for _ in self.ciphertexts]
        ws = parallel_map(lambda pair: (alpha * pair[0] + pk.encrypt(pair[1], pool=self._pool)).value,
                          zip(self.ciphertexts, rhos), self._workers)
        v_exp = [(-2 * alpha * rho) % n for rho in rhos]
        vh_exp = [(-2 * alpha * rho) % n_hat for rho in rhos]
        v = pk.encrypt(beta - sum(rho * rho for rho in rhos), pool=self._pool).value
        v_hat = pk.encrypt(beta_hat, pool=self._pool).value * pk.plain_factor(
            sum(-(rho * rho) for rho in rhos) % n_hat) % n2
        xs = [c.value for c in self.ciphertexts]
        v = v * multiexp(xs, v_exp, n2, workers=self._workers) % n2
        v_hat = v_hat * multiexp(xs, vh_exp, n2) % n2
        self._secrets = (alpha, beta, beta_hat, n_hat)
        return NormChallenge(key_width(n), int(n_hat), [int(c) for c in ws], int(v), int(v_hat))

    def verify(self, response: NormResponse) -> bool:
        """Accept iff z = yα² + β (mod N) and ẑ ≡ yα² + β̂ (mod N̂); usable once per challenge."""
        if self._secrets is None:
            raise ProtocolError("NormVerifier.verify before challenge()" if not self._used
                                else "this NormVerifier already verified a response; run a fresh one")
        if not isinstance(response, NormResponse):
            raise ProtocolError(f"expected a NormResponse, got {type(response).__name__}")
        alpha, beta, beta_hat, n_hat = self._secrets
        n = self.public_key.n
        _check_width(response, self.public_key)
        if not (0 <= response.z < n and 0 <= response.z_hat < n_hat):
            raise ProtocolError("NormResponse z must be in Z_N and ẑ in Z_N̂")
        self._secrets, self._used = None, True
        a2y = alpha * alpha * self.y
        return response.z == (a2y + beta) % n and response.z_hat == (a2y + beta_hat) % n_hat
