"""`privface eval --protocol im2020`: every pair's squared distance through the encrypted protocol.

Pair (i, j): image i is enrolled (``Client.register``), image j authenticates (``auth_start`` →
BlindESED → level-2 decryption → unblinding) with in-process parties. Each worker process has its own
client key pair and caches the encryption of every image it has used (registration per enrolled image,
C′ per probe image). The unblinded scores and decisions are compared with the quantized plaintext.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ..protocols.im2020 import Client, Im2020Params, Server
from ..store import open_store


def _run_chunk(params: Im2020Params, templates: dict[int, np.ndarray], pairs: list[tuple[int, int]]):
    client = Client("eval", params, workers=1)
    server = Server(open_store("sqlite://"), params)
    probes: dict[int, object] = {}
    enrolled_now = None
    scores, decisions = [], []
    for i, j in pairs:
        if enrolled_now != i:
            server.register(client.register(templates[i]))
            enrolled_now = i
        if j not in probes:
            probes[j] = client.auth_start(templates[j])
        challenge, session = server.auth_start(probes[j])
        result, d = server.auth_finish(session, client.auth_finish(challenge))
        scores.append(d.score)
        decisions.append(result.accepted)
    return scores, decisions


def protocol_scores(q: np.ndarray, found: np.ndarray, i: np.ndarray, j: np.ndarray, plain_sed: np.ndarray,
                    missing: float, *, params: Im2020Params | None = None, workers: int | None = None,
                    progress: bool = False) -> tuple[np.ndarray, dict]:
    """(encrypted SED per pair, MISSING where a face is missing; extra output keys)."""
    params = params or Im2020Params()
    t0 = time.perf_counter()
    run = np.flatnonzero(found[i] & found[j])
    order = run[np.lexsort((j[run], i[run]))]
    workers = max(1, workers or os.cpu_count() or 1)
    n_chunks = min(len(order), workers * 8) or 1
    chunks = [c for c in np.array_split(order, n_chunks) if len(c)]
    scores = np.full(len(i), missing, dtype=np.float64)
    decisions = np.zeros(len(i), dtype=bool)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(order), desc="im2020 pairs", unit="pair")
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = []
        for c in chunks:
            needed = set(i[c].tolist()) | set(j[c].tolist())
            futures.append((c, pool.submit(_run_chunk, params, {k: q[k] for k in needed},
                                           list(zip(i[c].tolist(), j[c].tolist())))))
        for c, f in futures:
            s, d = f.result()
            scores[c], decisions[c] = s, d
            if bar:
                bar.update(len(c))
    if bar:
        bar.close()
    plain_decisions = plain_sed[run] < params.tau
    extra = {
        "tau": params.tau,
        "security_bits": params.security_bits,
        "jl_modulus_bits": params.jl.bits,
        "pairs_run": int(len(run)),
        "mismatches": int((decisions[run] != plain_decisions).sum()),
        "score_mismatches": int((scores[run] != plain_sed[run]).sum()),
        "accepted": int(decisions[run].sum()),
        "protocol_seconds": round(time.perf_counter() - t0, 2),
        "protocol_workers": workers,
    }
    return scores, extra
