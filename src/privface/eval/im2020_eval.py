"""`privface eval --protocol im2020`: every pair's squared distance (or decision) through the encrypted protocol.

Pair (i, j): image i is enrolled (``Client.register``), image j authenticates with in-process parties:

* mode ``basic`` — ``auth_start`` → BlindESED → level-2 decryption → unblinding; the server's s is the score;
* mode ``secure-comparison`` (§VII Fig. 8) — ``auth_start`` → ``compare_request`` → ``auth_compare`` →
  ``compare_finish``: the server learns only the decision bit, so scores (and the EER) come from the
  quantized plaintext and ``scores_from`` says so.

Each worker process keeps one client key pair for the whole run and caches the registration of every
enrolled image and the C′ of every probe image it has used. Pairs go out in small chunks
(``CHUNK_PAIRS``); each finished chunk is appended to the checkpoint (``checkpoint.py``) so a killed run
resumes with only the missing pairs.
"""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

import numpy as np

from ..protocols.im2020 import Client, Im2020Params, Server
from ..store import open_store
from .checkpoint import Checkpoint

CHUNK_PAIRS = 24  # ~10–20 s per chunk at 112-bit on one core: a kill loses well under a minute per worker

_STATE: dict = {}  # per worker process: params, templates, parties, caches


def _init_worker(params: Im2020Params, templates: np.ndarray) -> None:
    _STATE.clear()
    _STATE.update(params=params, templates=templates, client=Client("eval", params, workers=1, precompute=True),
                  server=Server(open_store("sqlite://"), params, workers=1), enrolments={}, probes={}, enrolled=None)


def _run_chunk(pairs: list[tuple[int, int]]) -> tuple[list[int] | None, list[bool]]:
    """(unblinded scores, or None in the secure-comparison mode; decisions) for the pairs."""
    st = _STATE
    client, server, q = st["client"], st["server"], st["templates"]
    basic = st["params"].mode == "basic"
    scores, decisions = [], []
    for i, j in pairs:
        if st["enrolled"] != i:
            if i not in st["enrolments"]:
                st["enrolments"][i] = client.enrol(q[i])
            server.enrol(st["enrolments"][i], replace=True)  # one subject id, enrolled pair by pair
            st["enrolled"] = i
        if j not in st["probes"]:
            st["probes"][j] = client.auth_start(q[j])
        challenge, session = server.auth_start(st["probes"][j])
        if basic:
            result, d = server.auth_finish(session, client.auth_finish(challenge))
            scores.append(d.score)
        else:
            request, evaluator = client.compare_request(challenge)
            garbled, compare_session = server.auth_compare(session, request)
            result = server.compare_finish(compare_session, client.compare_finish(evaluator, garbled))
        decisions.append(result.accepted)
    return (scores if basic else None), decisions


def checkpoint_settings(params: Im2020Params, q: np.ndarray, found: np.ndarray, i: np.ndarray,
                        j: np.ndarray) -> dict:
    """What a checkpoint must agree on: the protocol parameters and a digest of the pairs and templates."""
    h = hashlib.sha256()
    for a in (np.asarray(q, "<i8"), np.asarray(found, bool), np.asarray(i, "<i8"), np.asarray(j, "<i8")):
        h.update(str(a.shape).encode() + a.tobytes())
    return {"protocol": "im2020", "mode": params.mode, "compare_bits": params.circuit_bits if params.mode !=
            "basic" else None, "tau": params.tau, "security_bits": params.security_bits, "jl_bits": params.jl.bits,
            "jl_k": params.jl.k, "insecure_test_params": params.insecure_test_params, "pairs": int(len(i)),
            "inputs_sha256": h.hexdigest()}


def protocol_scores(q: np.ndarray, found: np.ndarray, i: np.ndarray, j: np.ndarray, plain_sed: np.ndarray,
                    missing: float, *, params: Im2020Params | None = None, workers: int | None = None,
                    progress: bool = False, checkpoint: str | os.PathLike | None = None,
                    settings: dict | None = None, chunk_pairs: int = CHUNK_PAIRS) -> tuple[np.ndarray, dict]:
    """(SED per pair — the protocol's in the basic mode, the plaintext one in the secure-comparison mode —
    MISSING where a face is missing; extra output keys). ``checkpoint``: resume from / append to this file
    (``settings`` are added to its header; a file with other settings is refused)."""
    params = params or Im2020Params()
    t0 = time.perf_counter()
    basic = params.mode == "basic"
    run = np.flatnonzero(found[i] & found[j])
    order = run[np.lexsort((j[run], i[run]))]
    workers = max(1, workers or os.cpu_count() or 1)
    scores = np.where(found[i] & found[j], plain_sed, missing).astype(np.float64)
    decisions = np.zeros(len(i), dtype=bool)
    ck = None
    if checkpoint is not None:
        ck = Checkpoint(checkpoint, {**(settings or {}), **checkpoint_settings(params, q, found, i, j)}, len(i))
    done = np.zeros(len(i), dtype=bool)
    if ck:
        for p, (s, d) in ck.done.items():
            done[p], decisions[p] = True, d
            if basic:
                scores[p] = s
    resumed = int(done[run].sum())
    todo = order[~done[order]]
    chunks = [todo[k:k + chunk_pairs] for k in range(0, len(todo), chunk_pairs)]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(run), initial=resumed, desc=f"im2020 {params.mode} pairs", unit="pair")

    def record(c: np.ndarray, result) -> None:
        s, d = result
        decisions[c] = d
        if s is not None:
            scores[c] = s
        if ck:
            ck.append(c.tolist(), s, d)
        if bar:
            bar.update(len(c))

    def pairs_of(c: np.ndarray) -> list[tuple[int, int]]:
        return list(zip(i[c].tolist(), j[c].tolist()))

    try:
        if workers == 1 or len(chunks) <= 1:
            if chunks:
                _init_worker(params, q)
            for c in chunks:
                record(c, _run_chunk(pairs_of(c)))
        else:
            _in_pool(chunks, workers, params, q, pairs_of, record)
    finally:
        if bar:
            bar.close()
        if ck:
            ck.close()
    plain_decisions = plain_sed[run] < params.tau
    extra = {
        "tau": params.tau,
        "security_bits": params.security_bits,
        "jl_modulus_bits": params.jl.bits,
        "mode": params.mode,
        "scores_from": "protocol" if basic else "plaintext (the server learns only the decision)",
        "pairs_run": int(len(run)),
        "pairs_resumed": resumed,
        "mismatches": int((decisions[run] != plain_decisions).sum()),
        "score_mismatches": int((scores[run] != plain_sed[run]).sum()) if basic else None,
        "accepted": int(decisions[run].sum()),
        "protocol_seconds": round(time.perf_counter() - t0, 2),
        "protocol_workers": workers,
        "checkpoint": None if ck is None else str(ck.path),
    }
    return scores, extra


def _pool_worker_init(params: Im2020Params, templates: np.ndarray) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (see _in_pool)
    _init_worker(params, templates)


def _in_pool(chunks, workers, params, q, pairs_of, record) -> None:
    """At most 2 chunks per worker in flight, recorded as they finish.

    A first Ctrl-C (SIGINT) stops submitting, lets the running chunks finish and records them, then raises
    KeyboardInterrupt; a second one (a second or more later) interrupts at once. (An interrupt raised inside the
    executor's machinery can leave ProcessPoolExecutor hanging, hence the flag.)"""
    # forkserver, not fork: a forked child inherits any lock one of the parent's threads (crypto pools, Ray)
    # held at the fork and can hang (see gsm_eval)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_pool_worker_init, initargs=(params, q),
                               mp_context=multiprocessing.get_context("forkserver"))
    pending: dict = {}
    queue = iter(chunks)
    stop: list[float] = []

    def fill() -> None:
        while len(pending) < 2 * workers and (c := next(queue, None)) is not None:
            pending[pool.submit(_run_chunk, pairs_of(c))] = c

    def on_sigint(signum, frame) -> None:
        if stop:
            if time.monotonic() - stop[0] > 1:  # not the same Ctrl-C delivered twice (e.g. by `timeout`)
                raise KeyboardInterrupt
            return
        stop.append(time.monotonic())
        print(f"privface: interrupted — finishing the {len(pending)} running chunks into the checkpoint "
              "(Ctrl-C again to drop them)", file=sys.stderr)

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    try:
        fill()
        while pending:
            finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for f in finished:
                record(pending.pop(f), f.result())
            if not stop:
                fill()
        if stop:
            raise KeyboardInterrupt
    finally:
        pool.shutdown(wait=not stop or not pending, cancel_futures=True)
        if in_main:
            signal.signal(signal.SIGINT, previous)
