"""Seed 000 App. E: the security experiments against a malicious client, run on the real parties.

* MC2 forges s* (Thm. 4, forge(s*)): a random s* ∈ M against a fresh (r0, r1) — no HE needed.
* MC2 forges C′: random valid ciphertexts (a_i ∈_R M, β_i = Enc(random), uniform by Def. 3) through the
  whole protocol; MC2 owns the device, so it decrypts S* honestly.
* MC2 forges Γ′: random templates from the valid range through the protocol; their acceptance is
  compared with the plaintext rate c of random templates (Def. 2).
* MC1 (App. C/E): s* + ε against the real server (r0, r1) and against the simulator MIC1 (r0′, r1′);
  the two decisions must agree.
* HBCS (App. B/E): real and simulated transcripts enumerated at toy sizes (``im2020_hbcs``), key ``hbcs``.
"""
from __future__ import annotations

import secrets
import time

import numpy as np

from ..protocols.im2020 import AuthFinish, AuthSession, AuthStart, Client, Im2020Params, Randomizers, Server
from ..protocols.im2020.blind import decide, unblind
from ..store import open_store
from .im2020_hbcs import hbcs_experiment

FACE_NORM = 1.4  # typical L2 norm of a dlib-resnet128 embedding (1.27–1.57 on ORL)


def face_like_template(params: Im2020Params, rng: np.random.Generator) -> np.ndarray:
    """A random direction of norm FACE_NORM, ×scale and floored: shaped like an enrolled ×128 dlib template."""
    v = rng.standard_normal(params.dims)
    return np.floor(v / np.linalg.norm(v) * FACE_NORM * params.scale).astype(np.int64)


def setup(params: Im2020Params, template: np.ndarray, subject_id: str = "victim") -> tuple[Client, Server]:
    client, server = Client(subject_id, params), Server(open_store("sqlite://"), params)
    server.enrol(client.enrol(template))
    return client, server


def forged_s_star(server: Server, subject_id: str, k: int, trials: int) -> dict:
    accepted = 0
    for _ in range(trials):
        session = AuthSession(subject_id, k, Randomizers.draw(k))
        result, _ = server.auth_finish(session, AuthFinish(secrets.randbelow(1 << k)))
        accepted += result.accepted
    return {"attack": "forged_s_star", "trials": trials, "accepted": accepted, "rate": accepted / trials}


def forged_c_prime(client: Client, server: Server, trials: int) -> dict:
    pk, dims, accepted = client.pk, client.params.dims, 0
    for _ in range(trials):
        a = [secrets.randbelow(pk.message_space) for _ in range(dims)]
        beta = [int(pk.encrypt(secrets.randbelow(pk.message_space)).value) for _ in range(dims)]
        challenge, session = server.auth_start(AuthStart(client.subject_id, client.params.backend, a, beta))
        result, _ = server.auth_finish(session, client.auth_finish(challenge))
        accepted += result.accepted
    return {"attack": "forged_c_prime", "trials": trials, "accepted": accepted, "rate": accepted / trials}


def random_templates(client: Client, server: Server, enrolled: np.ndarray, trials: int, plain_trials: int,
                     rng: np.random.Generator) -> dict:
    """Γ′ uniform in [−max_abs, max_abs]^dims: protocol decisions vs plaintext, and the plaintext rate c."""
    p = client.params
    accepted = mismatches = 0
    for _ in range(trials):
        probe = rng.integers(-p.max_abs, p.max_abs + 1, p.dims)
        challenge, session = server.auth_start(client.auth_start(probe))
        result, _ = server.auth_finish(session, client.auth_finish(challenge))
        accepted += result.accepted
        mismatches += result.accepted != (int(((probe - enrolled) ** 2).sum()) < p.tau)
    c_hits = 0
    for start in range(0, plain_trials, 100_000):
        n = min(100_000, plain_trials - start)
        probes = rng.integers(-p.max_abs, p.max_abs + 1, (n, p.dims))
        c_hits += int((((probes - enrolled) ** 2).sum(axis=1) < p.tau).sum())
    return {"attack": "random_templates", "trials": trials, "accepted": accepted, "rate": accepted / max(trials, 1),
            "mismatches": mismatches, "plain_trials": plain_trials, "c": c_hits / max(plain_trials, 1)}


def mc1_simulation(params: Im2020Params, k: int, trials: int) -> dict:
    """Real server (r0, r1) vs simulator MIC1 (r0′, r1′) on s* + ε, for a legitimate s < τ."""
    differ = accepted = 0
    space = 1 << k
    top_quarter = 0
    for _ in range(trials):
        s = secrets.randbelow(params.tau)
        real, sim = Randomizers.draw(k), Randomizers.draw(k)
        eps = 1 + secrets.randbelow(space - 1)
        s_c = unblind((real.r0 * real.r0 * s + real.r1 + eps) % space, real, k)
        s_c_sim = unblind((sim.r0 * sim.r0 * s + sim.r1 + eps) % space, sim, k)
        r_c = decide(s_c, params.tau, params.max_sed).accepted
        r_c_sim = decide(s_c_sim, params.tau, params.max_sed).accepted
        differ += r_c != r_c_sim
        accepted += r_c
        top_quarter += s_c >= 3 * space // 4
    return {"attack": "mc1_modified_s_star", "trials": trials, "decisions_differ": differ, "accepted": accepted,
            "s_c_top_quarter_fraction": top_quarter / trials}


def run_all(params: Im2020Params, *, trials: int = 1_000_000, he_trials: int = 20, seed: int = 0,
            hbcs_pairs: int | None = None) -> dict:
    """Every experiment; ``trials`` for the cheap ones, ``he_trials`` for those that run BlindESED + decryption,
    ``hbcs_pairs`` (r0, r1) pairs of the HBCS enumeration (None: all of them; its toy key is fixed by App. E)."""
    rng = np.random.default_rng(seed)
    enrolled = face_like_template(params, rng)
    client, server = setup(params, enrolled)
    k = int(client.pk.k)
    t0 = time.perf_counter()
    rows = [forged_s_star(server, client.subject_id, k, trials),
            forged_c_prime(client, server, he_trials),
            random_templates(client, server, enrolled, he_trials, trials, rng),
            mc1_simulation(params, k, trials)]
    return {"protocol": "im2020", "security_bits": params.security_bits, "k": k, "tau": params.tau,
            "tau_over_M": params.tau / (1 << k), "experiments": rows,
            "hbcs": hbcs_experiment(randomizer_pairs=hbcs_pairs), "seconds": round(time.perf_counter() - t0, 2)}
