"""CryptoMask's four parties in one process (seed 001 §3.1, Fig. 1) and the identification run.

``KeyGenerator`` (trusted) makes the database keys (pk, sk), the verifier's (pk_v, sk_v) and, on the verifier's
"setup", k_sw = SwKeyGen(sk, sk_v) for the CS. ``CryptoMask`` wires a KG, a CS, and a verifier together:
``enrol`` (Alg. 1, through a DP) and ``identify`` (Alg. 2 then Alg. 3), counting the bytes of every message
per phase. The answer is the verifier's 1 bit: does any enrolled face reach the threshold. ``variant="wo"`` is the
paper's CryptoMask-WO (§5, Fig. 2): Alg. 2 without its masking and without Alg. 3, so the verifier decrypts every
distance (as HERS' key server does) and also learns which entry is best.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...crypto import rlwe
from ...crypto.lattice import generate_lattice_keypair
from ...crypto.millionaire import Wire
from ...crypto.native import ext
from ...errors import ProtocolError
from . import encoding
from .he import CloudServer, DataProvider, VerifierHE, basis_of, seed
from .params import CM_BFV, CM_BFV_TOY
from .reveal import DEFAULT_OT, OT_KINDS, refill, reveal, setup_ot

CHUNK = 1024
"""Gallery stacks per distances piece in process (the verifier decrypts one piece at a time: 128 packs of 4 088
templates at d = 128)."""

THREAT_MODEL = {
    "key_generator": "fully trusted (§3.2): generates every key, never online during identification",
    "cloud_server": "honest-but-curious, does not collude with the verifier",
    "verifier": "honest-but-curious, does not collude with the cloud server",
    "data_providers": "honest: encrypt their own face vectors under pk",
}
LEAKAGE = {
    "cloud_server": ["gallery size and dimension",
                     "that a query happened (its rows are RLWE ciphertexts under sk_v; R₁ encrypts a multiple of "
                     "sk_v, so this rests on circular security, as RGSW does)"],
    "verifier": ["the 1-bit answer (some enrolled face has cosine ≥ τ)", "gallery size (number of ciphertexts)"],
    "key_generator": ["nothing after setup (it sees no ciphertext)"],
}
#: CryptoMask-WO (seed 001 §5, Fig. 2): what the verifier learns instead of the bit.
LEAKAGE_WO = {**LEAKAGE, "verifier": ["every inner product ⟨a_i, b⟩ (as HERS' key server)", "gallery size"]}
VARIANTS = ("w", "wo")


def threshold(tau: float) -> int:
    """The verifier's integer threshold ts for a cosine τ at the §3.4 scale (2^SCALE_BITS per vector)."""
    return int(round(tau * (1 << (2 * encoding.SCALE_BITS))))


class KeyGenerator:
    """KG (§3.1): database keys and the verifier's keys; ``switching_key`` answers the verifier's setup."""

    def __init__(self, *, insecure_test_params: bool = False) -> None:
        params = CM_BFV_TOY if insecure_test_params else CM_BFV
        self.public, self._secret = generate_lattice_keypair(params, insecure_test_params=insecure_test_params)
        self._insecure = insecure_test_params
        self._verifiers: dict[str, object] = {}

    def verifier_keys(self, name: str):
        """(pk_v, sk_v) for a verifier, sent to it over a private channel."""
        pub_v, sec_v = generate_lattice_keypair(self.public.params, insecure_test_params=self._insecure)
        self._verifiers[name] = (pub_v, sec_v)
        return pub_v, sec_v

    def secret_bytes(self) -> bytes:
        """The database secret key sk, for the KG's own key store (``scale.cryptomask_gallery``); never sent."""
        return self._secret.secret_to_bytes()

    def _verifier_secret(self, name: str) -> np.ndarray:
        """sk_v's coefficients for a verifier the KG issued keys to."""
        if name not in self._verifiers:
            raise ProtocolError(f"no keys issued to verifier {name!r}")
        pub_v, sec_v = self._verifiers[name]
        return rlwe.secret_coefficients(basis_of(self.public), pub_v.seal_context, pub_v.evaluator, sec_v._secret_key)

    def switching_key(self, name: str) -> np.ndarray:
        """k_sw = SwKeyGen(sk, sk_v) (Alg. 2 line 1), for the CS only."""
        sv = self._verifier_secret(name)
        b = basis_of(self.public)
        s = rlwe.secret_coefficients(b, self.public.seal_context, self.public.evaluator, self._secret._secret_key)
        return b.native.swkeygen(s, sv, b.native.uniform(seed(), b.L, key=True), rlwe.cbd((b.L, b.n)))

    def galois_keys(self, name: str, dim: int) -> np.ndarray:
        """The Galois keys under sk_v with which the CS packs the distances of d-dimensional templates (``he``),
        for the CS only."""
        sv = self._verifier_secret(name)
        return basis_of(self.public).product.galois_keys(sv.astype(np.int64), encoding.stride(dim), seed(), seed())


def distance_steps() -> dict:
    """The CS's thread-seconds per step of Alg. 2's distances in this process since the last call (native
    ``bfv.distance_steps``: products_mac, products_intt, drop, pack, pack_ntt — the NTTs inside pack's key switches —
    and finish), then reset; a profile for ``privface bench identify``."""
    return {k: round(v, 6) for k, v in ext.bfv.distance_steps()}


@dataclass
class Run:
    """One identification: the verifier's bit, the bytes per phase and the verifier–CS exchanges (``rounds``: the
    query with its distances, then each Alg. 3 round)."""

    match: bool
    bytes: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    rounds: int = 0  # verifier–CS round trips: the query and its distances, then Alg. 3's
    best: int | None = None  # CryptoMask-WO only: the entry with the largest inner product
    steps: dict = field(default_factory=dict)  # the CS's distance steps, thread-seconds (``distance_steps``)

    @property
    def comm_bytes(self) -> int:
        return sum(v for k, v in self.bytes.items() if k != "setup")


class CryptoMask:
    """KG + CS + one verifier, in process. ``tau`` is the cosine threshold the verifier uses."""

    def __init__(self, dim: int, *, tau: float = 0.5, insecure_test_params: bool = False,
                 batch: int | None = None, precompute: bool = True, variant: str = "w",
                 ot: str = DEFAULT_OT) -> None:
        """``batch``: Alg. 3 entries per batch (None: the whole gallery in one, a constant number of rounds);
        ``precompute``: the CS keeps the gallery lifted over Q in NTT form, or at p₁ and lifts it per query
        (``he.CloudServer``); ``variant``: "w" (Alg. 2 + Alg. 3, one bit) or "wo" (CryptoMask-WO: the verifier
        decrypts the distances, no Alg. 3 and no OT setup); ``ot``: Alg. 3's OTs (``reveal.OT_KINDS``: Ferret's
        silent COTs, refilled between identifications by ``prepare``, or SoftSpokenOT / IKNP extension)."""
        if not -1.0 < tau < 1.0:
            raise ProtocolError("tau must be a cosine in (−1, 1)")
        if variant not in VARIANTS:
            raise ProtocolError(f"variant must be one of {VARIANTS}")
        if ot not in OT_KINDS:
            raise ProtocolError(f"ot must be one of {OT_KINDS}")
        self.ot, self._ferret_params = ot, "toy" if insecure_test_params else "regular"
        self.refilled = {"bytes": 0, "seconds": 0.0, "ots": 0}  # Ferret's refills so far, for the amortised share
        self.dim, self.tau, self.batch, self.variant = dim, tau, batch, variant
        self.kg = KeyGenerator(insecure_test_params=insecure_test_params)
        self.cs = CloudServer(self.kg.public, dim, precompute=precompute)
        self.setup_wire = Wire()
        pub_v, sec_v = self.kg.verifier_keys("verifier")
        self.verifier = VerifierHE(self.kg.public, pub_v, sec_v, dim)
        K = self.kg.switching_key("verifier")  # the verifier's "setup" signal, KG → CS
        G = self.kg.galois_keys("verifier", dim)
        self.setup_wire.send("setup", 4 * K.size + 4 * G.size)
        self.cs.set_switching_key(K, G)
        self._ot = self._setup_ot() if variant == "w" else None
        self.enrol_bytes = 0

    def _setup_ot(self):
        return setup_ot(self.setup_wire, self.ot, ferret_params=self._ferret_params)

    def prepare(self) -> None:
        """Between identifications: refill Ferret's pools to hold the next identification's COTs (Alg. 3 on every
        entry), counted in ``refilled``; nothing for an OT extension or CryptoMask-WO."""
        if self._ot is None or self.ot != "ferret":
            return
        t, before = time.perf_counter(), self._ot[0].available
        sent = refill(self._ot, self.cs.count, self.batch)
        if sent:
            self.refilled["bytes"] += sent
            self.refilled["seconds"] += time.perf_counter() - t
            self.refilled["ots"] += self._ot[0].available - before

    @property
    def ts(self) -> int:
        return threshold(self.tau)

    def enrol(self, vectors) -> None:
        """Alg. 1 through one DP: the CS's indicator out, the DP's ciphertexts in."""
        up = DataProvider(self.kg.public).enrol(vectors, self.cs.ind)
        self.enrol_bytes += up.nbytes + 4
        self.cs.receive(up)

    def identify(self, query, *, variant: str | None = None) -> Run:
        """One identification (``variant``: this object's unless given; "w" sets up the OTs on first use)."""
        variant = self.variant if variant is None else variant
        if variant not in VARIANTS:
            raise ProtocolError(f"variant must be one of {VARIANTS}")
        if variant == "w" and self._ot is None:
            self._ot = self._setup_ot()
        if variant == "w":
            self.prepare()  # a no-op when the caller refilled between identifications
        pool = self._ot[0].available if variant == "w" and self.ot == "ferret" else 0
        wire, clock = Wire(), [time.perf_counter()]

        def lap() -> float:
            clock.append(time.perf_counter())
            return round(clock[-1] - clock[-2], 4)

        q = self.verifier.query(query)
        wire.send("query", q.nbytes)
        seconds = {"query": lap(), "distances": 0.0, "shares": 0.0}
        cs, R, wo = self.cs, self.cs.prepare(q), variant == "wo"
        distance_steps()  # from zero
        d0s, d1s = [], []
        step = max(CHUNK, cs.group)
        for lo in range(0, cs.ciphertexts, step):  # one message, read chunk by chunk as over HTTP
            hi = min(cs.ciphertexts, lo + step)
            msg, d0 = cs.distances_of(R, lo, hi, mask=not wo)
            wire.send("distances", msg.nbytes)
            seconds["distances"] += lap()
            read = self.verifier.distances if wo else self.verifier.shares
            d1s.append(read(msg, min(cs.count, hi * cs.delta) - lo * cs.delta))
            d0s.append(d0)
            seconds["shares"] += lap()
        d0, d1 = np.concatenate(d0s), np.concatenate(d1s)
        seconds = {k: round(v, 4) for k, v in seconds.items()}
        steps = distance_steps()
        if wo:  # the verifier holds the distances themselves (d_0 = 0): its threshold in the clear
            best = int(np.argmax(d1))
            seconds["decide"] = lap()
            return Run(bool(d1[best] >= self.ts), dict(wire.bytes), seconds, 1, best, steps)
        bit = reveal(*self._ot, d0, d1, self.ts, wire, self.batch)
        seconds["reveal"] = lap()
        if pool:  # this run's share of the refills (bytes and time per COT taken): counted, not in its wall time
            used, made = pool - self._ot[0].available, max(self.refilled["ots"], 1)
            wire.send("ot_refill", round(used * self.refilled["bytes"] / made))
            seconds["ot_refill"] = round(used * self.refilled["seconds"] / made, 4)
        return Run(bit, dict(wire.bytes), seconds, 1 + wire.rounds, steps=steps)
