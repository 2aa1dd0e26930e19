"""Catalano–Fiore transform (seed 000 §II-C, after Catalano & Fiore, ePrint 2014/813) and the improved
transform HE′ of seed 000 §IV-A, over any LHE with a public message space M (``lhe.py``: Paillier,
Joye–Libert).

* Level 1: Enc(m) = (a, β) = (m − b, Enc^(b)) ∈ M × Ĉ with b ∈_R M; Dec = a + Dec^(β).
* Level 2: (α, β) ∈ Ĉ × Ĉ^(2×l), the columns (β_1,i, β_2,i). Dec (eq. 1):
  Dec^(α) + Σ_i Dec^(β_1,i)·Dec^(β_2,i) — 2l + 1 base decryptions.
* HE′ (§IV-A): Square gives the column (β, 0)ᵀ, stored here as ``(β, None)``; such a column decrypts to
  Dec^(β)² (eq. 2), one base decryption. ESED (eq. 3) builds the encrypted squared Euclidean distance of
  two encrypted k-vectors as one level-2 ciphertext with k square columns: k + 1 base decryptions
  instead of the 2k + 1 of the original transform (``sed_original``).

Level-2 decryption runs its independent base decryptions on several threads (the base key's batched
``decrypt_many`` when it has one); gmpy2 releases the GIL inside big-integer operations in those threads
(``parallel.release_gil``), so they use all cores. ``encrypt_many`` batches level-1 encryption the same way,
and ``esed_scaled`` computes BlindESED's r²·ESED with one multi-exponentiation for α.
(Seed 000 §IV-A writes β̄_i = β_i ⊞ β'_i; the difference ā_i = a_i − a'_i needs β_i ⊟ β'_i, as in its eq. 4.)
"""
from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gmpy2

from ..errors import CryptoError
from .lhe import LHECiphertext, LHEPrivateKey, LHEPublicKey
from .native import ext
from .numbers import as_int, batch_invert, centered, random_below_many
from .parallel import default_workers, parallel_map, run_chunks

_CIPHERTEXT_TYPES: set[type] = set()


def _is_ciphertext(x) -> bool:
    """isinstance(x, LHECiphertext), remembered per class: the structural Protocol check is slow."""
    if type(x) in _CIPHERTEXT_TYPES:
        return True
    if isinstance(x, LHECiphertext):
        _CIPHERTEXT_TYPES.add(type(x))
        return True
    return False


def _space(beta: LHECiphertext) -> int:
    return beta.public_key.message_space


@dataclass(frozen=True)
class Level1:
    """(a, β) ∈ M × Ĉ. ``+``/``-`` with Level1 or a public constant is Add₁, ``c * C`` is cMult₁."""

    a: int
    beta: LHECiphertext

    def __post_init__(self) -> None:
        if not _is_ciphertext(self.beta):
            raise CryptoError(f"level-1 β must be a base-scheme ciphertext, got {type(self.beta).__name__}")
        object.__setattr__(self, "a", int(as_int(self.a, "level-1 a")) % _space(self.beta))

    def __add__(self, other):
        return add1(self, other)

    __radd__ = __add__

    def __neg__(self):
        return Level1(-self.a, -self.beta)

    def __sub__(self, other):
        return add1(self, -other)

    def __rsub__(self, other):
        return add1(-self, other)

    def __mul__(self, c):
        return cmult1(c, self)

    __rmul__ = __mul__


Column = tuple[LHECiphertext, LHECiphertext | None]


@dataclass(frozen=True)
class Level2:
    """(α, β) ∈ Ĉ × Ĉ^(2×l); a column (β, None) is the (β, 0)ᵀ of Square. ``+`` is Add₂, ``c * D`` is cMult₂."""

    alpha: LHECiphertext
    columns: tuple[Column, ...] = ()

    def __post_init__(self) -> None:
        if not _is_ciphertext(self.alpha):
            raise CryptoError(f"level-2 α must be a base-scheme ciphertext, got {type(self.alpha).__name__}")
        cols = tuple((b1, b2) for b1, b2 in self.columns)
        pk = self.alpha.public_key
        for b1, b2 in cols:
            for b in (b1,) if b2 is None else (b1, b2):
                if not _is_ciphertext(b) or b.public_key != pk:
                    raise CryptoError("every ciphertext of a level-2 ciphertext must be under the same public key")
        object.__setattr__(self, "columns", cols)

    @property
    def base_decryptions(self) -> int:
        """How many base decryptions ``decrypt`` performs: 1 + 2 per product column + 1 per square column."""
        return 1 + sum(1 if b2 is None else 2 for _, b2 in self.columns)

    def __add__(self, other):
        return add2(self, other)

    def __mul__(self, c):
        return cmult2(c, self)

    __rmul__ = __mul__


# ---------------------------------------------------------------- level 1 (§II-C)


def encrypt(key: LHEPublicKey | LHEPrivateKey, m: int) -> Level1:
    """Enc(m) = (m − b, Enc^(b)), b ∈_R M. With the private key the owner's faster base encryption is used."""
    space = key.message_space
    b = secrets.randbelow(space)
    return Level1((as_int(m, "plaintext") - b) % space, key.encrypt(b))


def encrypt_many(key: LHEPublicKey | LHEPrivateKey, ms: Sequence[int], workers: int | None = None) -> list[Level1]:
    """[Enc(m) for m in ms], with the key's batched base encryption (``encrypt_many``) when it has one."""
    space = key.message_space
    ms = [as_int(m, "plaintext") for m in ms]
    bs = random_below_many(space, len(ms))
    batched = getattr(key, "encrypt_many", None)
    betas = batched(bs, workers) if batched is not None else [key.encrypt(b) for b in bs]
    return [Level1((m - b) % space, beta) for m, b, beta in zip(ms, bs, betas)]


def add1(c1: Level1, c2) -> Level1:
    """Add₁: (a₁ + a₂, β₁ ⊞ β₂); a public integer constant is added to a alone."""
    if isinstance(c2, Level1):
        return Level1(c1.a + c2.a, c1.beta + c2.beta)
    if isinstance(c2, Level2):
        raise CryptoError("Add₁ takes level-1 ciphertexts; lift with to_level2() and use add2")
    return Level1(c1.a + as_int(c2, "constant"), c1.beta)


def cmult1(c, c1: Level1) -> Level1:
    """cMult₁: (c·a, c·β)."""
    if not isinstance(c1, Level1):
        raise CryptoError(f"cMult₁ takes a level-1 ciphertext, got {type(c1).__name__}")
    c = as_int(c, "constant")
    return Level1(c * c1.a, c * c1.beta)


# ---------------------------------------------------------------- level 2 (§II-C, §IV-A)


def mult(c1: Level1, c2: Level1) -> Level2:
    """Mult: α = Enc^(a₁a₂) ⊞ a₁·β₂ ⊞ a₂·β₁, β = (β₁, β₂)ᵀ."""
    if not (isinstance(c1, Level1) and isinstance(c2, Level1)):
        raise CryptoError("Mult takes two level-1 ciphertexts")
    pk = c1.beta.public_key
    alpha = pk.encrypt(c1.a * c2.a) + c1.a * c2.beta + c2.a * c1.beta
    return Level2(alpha, ((c1.beta, c2.beta),))


def square(c1: Level1) -> Level2:
    """Square (HE′, §IV-A): (Enc^(a²) ⊞ 2a·β, (β, 0)ᵀ) — decrypts to (a + b)² with one base decryption of β."""
    if not isinstance(c1, Level1):
        raise CryptoError("Square takes a level-1 ciphertext")
    pk = c1.beta.public_key
    return Level2(pk.encrypt(c1.a * c1.a) + (2 * c1.a) * c1.beta, ((c1.beta, None),))


def add2(d1: Level2, d2: Level2) -> Level2:
    """Add₂: (α₁ ⊞ α₂, [β₁, β₂])."""
    if not (isinstance(d1, Level2) and isinstance(d2, Level2)):
        raise CryptoError("Add₂ takes two level-2 ciphertexts (lift level 1 with to_level2)")
    return Level2(d1.alpha + d2.alpha, d1.columns + d2.columns)


def cmult2(c, d: Level2) -> Level2:
    """cMult₂: (c·α, [(c·β_1,i, β_2,i)]). A square column (β, 0)ᵀ becomes the product column (c·β, β)."""
    if not isinstance(d, Level2):
        raise CryptoError(f"cMult₂ takes a level-2 ciphertext, got {type(d).__name__}")
    c = as_int(c, "constant")
    return Level2(c * d.alpha, tuple((c * b1, b1 if b2 is None else b2) for b1, b2 in d.columns))


def cmult2_square(r, d: Level2) -> Level2:
    """Multiply by the square r²: (r²·α, [(r·β, 0)ᵀ]) — keeps HE′'s square columns (the r₀ of seed 000 eq. 4–5)."""
    if not isinstance(d, Level2):
        raise CryptoError(f"expected a level-2 ciphertext, got {type(d).__name__}")
    r = as_int(r, "constant")
    return Level2((r * r) * d.alpha, tuple((r * b1, None) if b2 is None else (r * b1, r * b2) for b1, b2 in d.columns))


def to_level2(c1: Level1) -> Level2:
    """A level-1 ciphertext as a level-2 one with no columns: α = Enc^(a) ⊞ β."""
    if not isinstance(c1, Level1):
        raise CryptoError("to_level2 takes a level-1 ciphertext")
    return Level2(c1.beta.public_key.encrypt(c1.a) + c1.beta)


def _pairs(C: Sequence[Level1], C2: Sequence[Level1]) -> list[tuple[Level1, Level1]]:
    if len(C) != len(C2) or not C:
        raise CryptoError(f"encrypted vectors must be non-empty and of equal length, got {len(C)} and {len(C2)}")
    if not all(isinstance(x, Level1) for x in (*C, *C2)):
        raise CryptoError("encrypted vectors must hold level-1 ciphertexts")
    return list(zip(C, C2))


def esed(C: Sequence[Level1], C2: Sequence[Level1]) -> Level2:
    """ESED (eq. 3): α = Enc^(Σ ā_i²) ⊞ (⊞ 2ā_i·β̄_i), β = [(β̄_i, 0)ᵀ], ā_i = a_i − a'_i, β̄_i = β_i ⊟ β'_i.

    Decrypts to Σ (m_i − m'_i)² mod |M| with k + 1 base decryptions.
    """
    pairs = _pairs(C, C2)
    pk = pairs[0][0].beta.public_key
    space = pk.message_space
    diffs = [((x.a - y.a) % space, x.beta - y.beta) for x, y in pairs]
    alpha = pk.encrypt(sum(a * a for a, _ in diffs))
    for a, beta in diffs:
        alpha = alpha + (2 * a) * beta
    return Level2(alpha, tuple((beta, None) for _, beta in diffs))


ALPHA = 0.28
"""esed_scaled's α multi-exponentiation over k bases, as a fraction of k column exponentiations (modexp.rs)."""


def esed_scaled(C: Sequence[Level1], C2: Sequence[Level1], r, workers: int | None = None, *,
                plus: int = 0, check=None) -> Level2:
    """cmult2_square(r, esed(C, C2)) ⊞ Enc(plus) computed directly in the base scheme's group (BlindESED,
    seed 000 eq. (4)–(5), with plus = r1): the columns r·β̄_i = (β_i·β'_i⁻¹)^r on ``workers`` threads, and

        α = Enc^(r²·Σ ā_i² + plus) ⊞ Π_i β̄_i^(2·ā_i·r² mod |M|)

    as one multi-exponentiation. It decrypts like the composition; α's randomness differs (the exponents are
    reduced mod |M|) but is fresh and uniform all the same, from the one fresh Enc^.
    ``check`` (e.g. the key's ``validate``), if given, runs on every β'_i value in the column threads — for a
    C2 received with only its range checked (``in_range``): the group-membership tests then overlap the other
    threads' exponentiations, and a failure is raised (naming its index) before anything is returned.
    Base schemes without a group representation fall back to the composition.
    """
    pairs: list[tuple[Any, Any]] = _pairs(C, C2)  # group ciphertexts below: .value, ._trusted
    pk = pairs[0][0].beta.public_key
    X = getattr(pk, "group_modulus", None)
    r = as_int(r, "constant")
    if X is None:
        for i, (_, y) in enumerate(pairs):
            _check_one(check, i, y.beta.value)
        d = cmult2_square(r, esed(C, C2))
        return Level2(d.alpha + pk.encrypt(plus), d.columns)
    for x, y in pairs:
        for b in (x.beta, y.beta):
            if b.public_key is not pk and b.public_key != pk:
                raise CryptoError("ciphertexts under different public keys cannot be combined")
    space = pk.message_space
    cls = type(pairs[0][0].beta)
    a_bar = [(x.a - y.a) % space for x, y in pairs]
    try:
        inv = batch_invert([y.beta.value for _, y in pairs], X)
    except CryptoError:
        for i, (_, y) in enumerate(pairs):  # name the culprit when a check can
            _check_one(check, i, y.beta.value)
        raise
    beta_bar = [x.beta.value * v % X for (x, _), v in zip(pairs, inv)]
    r = int(r) % space
    r2 = r * r % space
    jobs = [("alpha", None)] + [("col", i) for i in range(len(beta_bar))]
    mod = ext.MontModulus(int(X).to_bytes((int(X).bit_length() + 7) // 8, "big"))
    size, e_bytes = mod.size, (int(space).bit_length() + 7) // 8

    def pack(values, width=size) -> bytes:
        return b"".join(int(v).to_bytes(width, "big") for v in values)

    def unpack(data: bytes) -> list:
        return [gmpy2.mpz(int.from_bytes(data[i:i + size], "big")) for i in range(0, len(data), size)]

    def run(chunk):
        out = []
        cols = [i for kind, i in chunk if kind == "col"]
        if any(kind == "alpha" for kind, _ in chunk):
            e = pack((2 * a * r2 % space for a in a_bar), e_bytes)
            fresh = pk.encrypt(sum(a * a for a in a_bar) * r2 + as_int(plus, "constant"))
            out.append(fresh.value * unpack(mod.multiexp(pack(beta_bar), e, e_bytes))[0] % X)
        # β'_i is checked just before its column's exponentiation, eight at a time: a check holds the GIL
        # (Jacobi symbol), and short bursts let the other threads' Python run in between
        r_bytes = r.to_bytes(max(1, (r.bit_length() + 7) // 8), "big")
        for j in range(0, len(cols), 8):
            part = cols[j:j + 8]
            for i in part:
                _check_one(check, i, pairs[i][1].beta.value)
            out += unpack(mod.pow_many(pack(beta_bar[i] for i in part), r_bytes))
        return out

    # The α multi-exponentiation costs about as much as ALPHA·k column exponentiations, a check 0.2 of one:
    # the α thread takes fewer columns so all threads end together. Both run in the native core (modexp.rs,
    # OpenSSL's Montgomery arithmetic, variable-time: r and the e_i are this attempt's, used once).
    w = default_workers(workers)
    n = len(beta_bar)
    col = 1.2 if check is not None else 1.0
    head = 1 + max(0, min(n, round(((col + ALPHA) * n / w - ALPHA * n) / col))) if w > 1 else len(jobs)
    rest = jobs[head:]
    step = -(-len(rest) // max(1, w - 1)) if rest else 1
    values = run_chunks(run, [jobs[:head]] + [rest[i:i + step] for i in range(0, len(rest), step)])
    alpha = cls._trusted(pk, values[0])
    return Level2(alpha, tuple((cls._trusted(pk, v), None) for v in values[1:]))


def _check_one(check, i: int, value) -> None:
    if check is not None:
        try:
            check(value)
        except CryptoError as e:
            raise CryptoError(f"C2 entry {i}: {e}") from None


def sed_original(C: Sequence[Level1], C2: Sequence[Level1]) -> Level2:
    """The same SED with the original transform (§IV-A, first display): Add₁, Mult and Add₂ — 2k + 1 decryptions."""
    total = None
    for x, y in _pairs(C, C2):
        diff = x - y
        term = mult(diff, diff)
        total = term if total is None else add2(total, term)
    return total  # type: ignore[return-value]  # _pairs refuses empty vectors


# ---------------------------------------------------------------- decryption (eq. 1, eq. 2)


def decrypt(sk: LHEPrivateKey, c: Level1 | Level2, *, signed: bool = False, workers: int | None = None) -> int:
    """Level-1: a + Dec^(β). Level-2: Dec^(α) + Σ Dec^(β_1,i)·Dec^(β_2,i), or Dec^(β_1,i)² for square columns.

    Result in [0, |M|), or in (−|M|/2, |M|/2] with ``signed``. Level-2 base decryptions run on
    ``workers`` threads (default: one per core; 1 = serial).
    """
    space = sk.message_space
    if isinstance(c, Level1):
        m = c.a + sk.decrypt(c.beta)
    elif isinstance(c, Level2):
        jobs = [c.alpha] + [b for b1, b2 in c.columns for b in ((b1,) if b2 is None else (b1, b2))]
        values = iter(_decrypt_all(sk, jobs, workers))
        m = next(values)
        for _, b2 in c.columns:
            v = next(values)
            m += v * v if b2 is None else v * next(values)
    else:
        raise CryptoError(f"expected a level-1 or level-2 ciphertext, got {type(c).__name__}")
    return centered(m, space) if signed else m % space


def decrypt_received(sk: LHEPrivateKey, alpha, squares: Sequence, workers: int | None = None) -> int:
    """Eq. (2) for a level-2 ciphertext with square columns (α, [(β_i, 0)ᵀ]) received as integers: each is
    checked to be a ciphertext under sk's key and decrypted, Dec^(α) + Σ Dec^(β_i)² mod |M|. The key's
    ``decrypt_values`` does the checks inside its decryption threads when it has one. CryptoError if any
    value is not a ciphertext."""
    batched = getattr(sk, "decrypt_values", None)
    if batched is None:
        pk: Any = sk.public_key  # a group key (Paillier, Joye–Libert): ciphertext() from an integer
        return decrypt(sk, Level2(pk.ciphertext(alpha), tuple((pk.ciphertext(b), None) for b in squares)),
                       workers=workers)
    ms = batched([alpha, *squares], default_workers(workers))
    return (ms[0] + sum(m * m for m in ms[1:])) % sk.message_space


def _decrypt_all(sk: LHEPrivateKey, jobs: list, workers: int | None) -> list[int]:
    workers = default_workers(workers)
    batched = getattr(sk, "decrypt_many", None)
    if batched is not None:
        return batched(jobs, workers)
    return parallel_map(sk.decrypt, jobs, workers)
