"""Seed 000 App. E (first paragraph): the honest-but-curious server simulates Π's transcripts exactly.

App. B proves Thm. 2 by a simulator that, knowing only C and pk, outputs transcripts
T = (C′, α*, β*, s*, r) distributed exactly as in the real authentication Π (case s = 0):

1. a′ ∈_R M;  2. β′ = β ⊞ Enc(a − a′) and C′ = (a′, β′);  3. r0 ∈_R M_inv, r1 ∈_R M;
4. (α*, β*) = BlindESED(C, C′, r0, r1, pk);  5. s* = r1;  6. r = 1.

App. E checks this by enumeration at toy sizes: feature dimension 1, |M| = 2^4 and a 10-bit modulus.
``hbcs_experiment`` does the same with the real parts — ``JoyeLibertPrivateKey.from_primes``,
Joye–Libert ``encrypt_with`` (encryption under given randomness), ``catalano_fiore.Level1``,
``blind_esed`` with ``Randomizers(r0, r1)`` and the client's level-2 ``decrypt`` — and compares, for
every (r0, r1), the multiset (``collections.Counter``) of real transcripts over all client coins
(b′, x′) ∈ M × Z*_N with the multiset of simulated ones over all simulator coins (a′, x) ∈ M × Z*_N.

The modulus. Seed 000 writes N = 17², "the only 10-bit value compatible with [20]"; but a Joye–Libert
modulus is N = pq with p ≠ q, p ≡ 1 (mod 2^k) and q ≡ 3 (mod 4) (y must be a non-residue modulo both
and decryption needs the order-2^k subgroup of Z*_p) — 17 ≡ 1 (mod 4), so 17² is no JL modulus. We use
p = 17 ≡ 1 (mod 16), q = 31 ≡ 3 (mod 4): N = 527, the smallest 10-bit one.

The server's own coins. BlindESED encrypts Σā² and r1 with fresh randomness of the server. The HBCS
knows its own random tape, and Thm. 2 must hold for each tape; so both worlds run BlindESED under the
same fixed server coins (``_ServerCoinsKey``: Enc(m) = Enc(m; x_S)), which makes T a function of
(C′, r0, r1) as App. B says, and the comparison exact.

Negative controls, which must come out unequal: a simulator that fixes a′ = 0 (wrong distribution of
C′), and a real client with s = SED(Γ, Γ′) = 1 simulated as if s = 0.
"""
from __future__ import annotations

import functools
import secrets
import time
from collections import Counter
from collections.abc import Iterable

import gmpy2

from ..crypto import catalano_fiore as cf
from ..crypto.joye_libert import JoyeLibertCiphertext, JoyeLibertPrivateKey, JoyeLibertPublicKey
from ..protocols.im2020.blind import Randomizers, blind_esed, decide, unblind

HBCS_P, HBCS_Q, HBCS_K = 17, 31, 4  # N = 527 (10 bits), |M| = 2^4
TAU = 1  # s < 1: the legitimate user of case s = 0 is accepted, s = 1 is not

Transcript = tuple  # (a′, β′, α*, β*_1, s*, r) as integers


class _ServerCoinsKey(JoyeLibertPublicKey):
    """The client's pk as the server uses it, with the server's encryption coins fixed to x_S."""

    __slots__ = ("server_coins",)

    def __init__(self, pk: JoyeLibertPublicKey, server_coins) -> None:
        super().__init__(pk.n, pk.y, pk.k, insecure_test_params=True)
        self.server_coins = server_coins

    def encrypt(self, m) -> JoyeLibertCiphertext:
        return JoyeLibertCiphertext._trusted(self, self.encrypt_with(int(m) % self.message_space, self.server_coins))


@functools.cache
def _units(n: int) -> tuple[int, ...]:
    return tuple(x for x in range(1, n) if gmpy2.gcd(x, n) == 1)


def real_coins(pk: JoyeLibertPublicKey, gamma2: int) -> Counter:
    """The client's C′ = (Γ′ − b′, Enc(b′; x′)) over every coin (b′, x′) ∈ M × Z*_N, with multiplicity."""
    space = pk.message_space
    return Counter(((gamma2 - b2) % space, int(pk.encrypt_with(b2, x)))
                   for b2 in range(space) for x in _units(int(pk.n)))


def simulated_coins(pk: JoyeLibertPublicKey, C: cf.Level1, a_choices: Iterable[int] | None = None) -> Counter:
    """App. B steps 1–2: C′ = (a′, β ⊞ Enc(a − a′; x)) over every simulator coin (a′, x) ∈ M × Z*_N;
    ``a_choices`` replaces a′ ∈ M (the negative control passes a′ = 0 for every draw)."""
    space = pk.message_space
    a_choices = range(space) if a_choices is None else a_choices
    return Counter((a2, int((C.beta + pk.ciphertext(pk.encrypt_with((C.a - a2) % space, x))).value))
                   for a2 in a_choices for x in _units(int(pk.n)))


def transcript(sk: JoyeLibertPrivateKey, C: cf.Level1, c2: tuple[int, int], rnd: Randomizers, *,
               simulated: bool) -> Transcript:
    """T = (a′, β′, α*, β*_1, s*, r) for C′ = c2: S* = BlindESED(C, C′, r0, r1, pk) (step 4 / Π); then
    either the simulator's s* = r1, r = 1 (steps 5–6) or Π's s* = Dec(S*) by the client and
    r = [unblind(s*) < τ] by the server."""
    pk = sk.public_key
    C2 = cf.Level1(c2[0], pk.ciphertext(c2[1]))
    S = blind_esed([C], [C2], rnd)
    (beta_star, _), = S.columns
    if simulated:
        s_star, r = rnd.r1, True
    else:
        s_star = cf.decrypt(sk, S, workers=1)
        r = decide(unblind(s_star, rnd, pk.k), TAU, pk.message_space - 1).accepted
    return (c2[0], c2[1], int(S.alpha.value), int(beta_star.value), int(s_star), int(r))


def transcripts(sk: JoyeLibertPrivateKey, C: cf.Level1, coins: Counter, rnd: Randomizers, *,
                simulated: bool) -> Counter:
    """The multiset of T over the coins' multiset of C′ (T is a function of C′ for fixed r0, r1 and
    server coins, so each distinct C′ runs once and counts as often as its coins produce it)."""
    out: Counter = Counter()
    for c2, times in coins.items():
        out[transcript(sk, C, c2, rnd, simulated=simulated)] += times
    return out


def _randomizers(space: int, subset: int | None) -> list[Randomizers]:
    """All (r0, r1) ∈ M_inv × M (r0 odd), or ``subset`` of them drawn with the CSPRNG."""
    every = [Randomizers(r0, r1) for r0 in range(1, space, 2) for r1 in range(space)]
    if subset is None or subset >= len(every):
        return every
    pool = list(every)
    return [pool.pop(secrets.randbelow(len(pool))) for _ in range(subset)]


def hbcs_experiment(*, randomizer_pairs: int | None = None) -> dict:
    """Real vs simulated transcript multisets for every (r0, r1) (or ``randomizer_pairs`` of them).

    Keys: ``modulus``, ``message_bits``, ``randomizer_pairs``, ``transcripts`` (per world, counted with
    multiplicity), ``distinct`` (per world), ``equal`` (every (r0, r1) gives equal multisets),
    ``negative_controls`` (``fixed_a_prime``, ``nonzero_sed_as_zero``: each ``equal``, expected false),
    ``seconds``.
    """
    if randomizer_pairs is not None and randomizer_pairs < 1:
        raise ValueError(f"randomizer_pairs must be at least 1, got {randomizer_pairs}")
    t0 = time.perf_counter()
    base = JoyeLibertPrivateKey.from_primes(HBCS_P, HBCS_Q, HBCS_K, insecure_test_params=True)
    pk = _ServerCoinsKey(base.public_key, secrets.choice(_units(HBCS_P * HBCS_Q)))
    sk = JoyeLibertPrivateKey(pk, HBCS_P, HBCS_Q)
    space = pk.message_space
    gamma = secrets.randbelow(space)
    b = secrets.randbelow(space)
    C = cf.Level1(gamma - b, pk.ciphertext(pk.encrypt_with(b, secrets.choice(_units(int(pk.n))))))  # registration

    rnds = _randomizers(space, randomizer_pairs)
    real_c, sim_c = real_coins(pk, gamma), simulated_coins(pk, C)  # Γ′ = Γ: s = 0
    counted = distinct_real = distinct_sim = 0
    equal = True
    for rnd in rnds:
        real = transcripts(sk, C, real_c, rnd, simulated=False)
        sim = transcripts(sk, C, sim_c, rnd, simulated=True)
        counted += sum(real.values())
        distinct_real += len(real)
        distinct_sim += len(sim)
        equal &= real == sim
    rnd = rnds[0]
    sim = transcripts(sk, C, sim_c, rnd, simulated=True)
    fixed_a = transcripts(sk, C, simulated_coins(pk, C, [0] * space), rnd, simulated=True)
    nonzero = transcripts(sk, C, real_coins(pk, gamma + 1), rnd, simulated=False)
    return {"modulus": int(pk.n), "modulus_bits": int(pk.n).bit_length(), "message_bits": HBCS_K,
            "dims": 1, "randomizer_pairs": len(rnds), "coins_per_world": sum(real_c.values()),
            "transcripts": counted, "distinct": {"real": distinct_real, "simulated": distinct_sim},
            "equal": bool(equal),
            "negative_controls": {"fixed_a_prime": {"equal": fixed_a == sim},
                                  "nonzero_sed_as_zero": {"equal": nonzero == sim}},
            "seconds": round(time.perf_counter() - t0, 2)}
