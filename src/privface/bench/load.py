"""`privface bench load`: many clients authenticating at once against one `privface serve` (issue 8 §5).

A `privface serve --protocol im2020` child process (API keys on, SQLite store, loopback HTTP) gets ``identities``
subjects enrolled, then ``concurrency`` clients — threads spread over ``client_processes`` processes, each with
its own keep-alive connection and its own ``Client`` on its identity's key pair — run full authentications
back to back for ``seconds``: auth/start (C′ = Enc(Γ′) → BlindESED) then auth/finish (level-2 decryption of S*,
s* → decision), seed 000 §IV-B.3. A *request* is one whole authentication (two HTTP steps); its latency is the
client's wall time for it, client crypto (C2, C3) included. ``errors`` counts authentications that failed
(any error answer, lost connection or refused session) or were wrongly rejected (a genuine probe must be
accepted). ``server_peak_rss_mb`` is the child's VmHWM. The client processes share the machine with the server.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import tempfile
import threading
import time

import numpy as np

KEYS = ("protocol", "concurrency", "seconds", "requests", "throughput_rps", "p50_ms", "p95_ms", "p99_ms", "errors",
        "server_peak_rss_mb")


def _percentile(sorted_ms: list[float], q: float) -> float | None:
    if not sorted_ms:
        return None
    return round(sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))], 1)


def _client_process(url: str, api_key: str, params, identities: list, threads: int, seconds: float,
                    barrier, results) -> None:
    """``threads`` clients in one process: each authenticates its identity until the deadline."""
    from ..crypto.joye_libert import JoyeLibertPrivateKey
    from ..protocols.im2020 import Client
    from ..service.clients import im2020 as remote

    clients = []
    for i in range(threads):
        subject, (p, q, k, y), probe = identities[i % len(identities)]
        sk = JoyeLibertPrivateKey.from_primes(p, q, k, y, insecure_test_params=params.insecure_test_params)
        clients.append((Client(subject, params, keypair=(sk.public_key, sk), workers=1), np.asarray(probe)))
    out: list[tuple[float, str | None]] = []
    lock = threading.Lock()
    barrier.wait()
    deadline = time.monotonic() + seconds

    def run(client, probe) -> None:
        with remote.service_client(url, api_key=api_key, timeout=300) as http:
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                try:
                    error = None if remote.verify(http, client, probe)["accepted"] else "rejected"
                except Exception as e:  # noqa: BLE001 — every failure is counted and named, none stops the run
                    error = type(e).__name__
                with lock:
                    out.append(((time.perf_counter() - t0) * 1000, error))

    workers = [threading.Thread(target=run, args=c) for c in clients]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put(out)


def _peak_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def bench_load(protocol: str = "im2020", *, concurrency: int = 50, seconds: float = 60.0,
               identities: int | None = None, security_bits: int = 112, insecure_test_params: bool = False,
               client_processes: int | None = None) -> dict:
    """One load run (module docstring); the object of ``privface bench load --json``."""
    if protocol != "im2020":
        raise ValueError("bench load drives im2020 (the only protocol with a load client so far)")
    from ..eval.im2020_attacks import face_like_template
    from ..protocols.im2020 import Client, Im2020Params
    from ..service.auth import ApiKeys
    from ..service.clients import im2020 as remote
    from ..service.launch import serve_subprocess
    from ..store import open_store

    params = Im2020Params.toy() if insecure_test_params else Im2020Params.for_level(security_bits)
    # one subject per client by default: the server's per-subject lockout lets at most --lockout-failures
    # attempts of one subject run at once (service/limits.py), so 50 clients on 5 subjects would be refused
    identities = concurrency if identities is None else identities
    procs = max(1, min(concurrency, client_processes or os.cpu_count() or 1))
    rng = np.random.default_rng(5)
    options = ["--insecure-test-params"] if insecure_test_params else ["--security-bits", str(security_bits)]
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/load.db"
        with open_store(db) as store:
            _, api_key = ApiKeys(store).create("enrol,verify,admin", name="bench-load")
        server: list = []
        with serve_subprocess(protocol, db, options, auth=True, processes=server) as url:
            people = []
            with remote.service_client(url, api_key=api_key) as http:
                for i in range(identities):
                    client = Client(f"load-{i}", params)
                    ref = face_like_template(params, rng)
                    remote.enrol(http, client, ref)
                    probe = np.clip(ref + rng.integers(-3, 4, params.dims), -params.max_abs, params.max_abs)
                    sk = client._sk
                    people.append((client.subject_id, (int(sk.p), int(sk.q), int(client.pk.k), int(client.pk.y)),
                                   probe.tolist()))
            ctx = multiprocessing.get_context("spawn")
            barrier, results = ctx.Barrier(procs + 1), ctx.Queue()
            shares = [concurrency // procs + (i < concurrency % procs) for i in range(procs)]
            children = [ctx.Process(target=_client_process, args=(url, api_key, params, people, n, seconds,
                                                                   barrier, results), daemon=True) for n in shares]
            for c in children:
                c.start()
            barrier.wait(timeout=600)
            t0 = time.monotonic()
            samples = []
            for _ in children:
                try:
                    samples += results.get(timeout=seconds + 600)
                except queue.Empty:
                    samples.append((float("nan"), "client process lost"))
            wall = time.monotonic() - t0
            for c in children:
                c.join(30)
            rss = _peak_rss_mb(server[0].pid)
    ms = sorted(m for m, _ in samples)
    errors = [e for _, e in samples if e is not None]
    ok = len(samples) - len(errors)
    return {"protocol": protocol, "concurrency": concurrency, "seconds": seconds, "requests": len(samples),
            "throughput_rps": round(ok / wall, 2), "p50_ms": _percentile(ms, 0.50), "p95_ms": _percentile(ms, 0.95),
            "p99_ms": _percentile(ms, 0.99), "errors": len(errors), "server_peak_rss_mb": rss,
            "error_kinds": {e: errors.count(e) for e in sorted(set(errors))}, "identities": identities,
            "security_bits": params.security_bits, "jl_modulus_bits": params.jl.bits, "client_processes": procs,
            "wall_seconds": round(wall, 1), "loadavg_1min": round(os.getloadavg()[0], 2)}


def format_table(row: dict) -> str:
    return "\n".join(f"{k:<20} {row[k]}" for k in (*KEYS, "error_kinds", "identities", "security_bits",
                                                    "client_processes", "wall_seconds", "loadavg_1min"))
