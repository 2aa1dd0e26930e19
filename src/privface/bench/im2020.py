"""`privface bench im2020`: seed 000 Table I — per-step medians of one authentication, and wire sizes.

Steps (§VI-C): C1 face processing (detect, align, embed, quantize), C2 client encryption of Γ′ (AuthStart
bytes), S1 server validation + BlindESED (``Im2020Service.handle("auth/start")``), C3 client level-2
decryption of S* (k + 1 base decryptions on ``workers`` threads), S2 unblinding and decision. Parties run
in one process (``transport: "in-process"``, network_ms = 0) or, with ``transport: "http"``, over loopback
HTTP to a `privface serve` child process (S1/S2 from its Server-Timing header, network_ms = HTTP wall time
minus server compute); total_ms = C2 + S1 + C3 + S2 + network (C1 excluded, as Table I's privacy-preserving
part). Byte counts are measured wire frames; ``paper_*_bytes`` are Table I's
formulas (268k + 140, 140k + 264) at k = 128 for its λ = 80 sizes; ``formula_*_bytes`` the same
counts at this level's sizes (the measured frames add the wire's length prefixes and headers).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

from ..eval.im2020_attacks import face_like_template
from ..protocols.im2020 import AuthChallenge, Client, CompareChallenge, Im2020Params, RevokeRequest
from ..service.bindings.im2020 import Im2020Service
from ..store import open_store
from ..templates import quantize


def _templates(params: Im2020Params, face: bool):
    """(enrolled, probe, c1 timer): the demo photo and an altered copy through dlib, or synthetic vectors."""
    if face:
        from .. import demo_data
        from ..faces.registry import make_backend

        backend = make_backend()
        photo = demo_data.enrolled_photo()
        probe_img = next(iter(demo_data.altered_copies(photo).values()))

        def c1():
            return quantize(backend.embed(probe_img), params.scale)

        return quantize(backend.embed(photo), params.scale), c1(), c1
    rng = np.random.default_rng(0)
    enrolled = face_like_template(params, rng)
    return enrolled, np.clip(enrolled + rng.integers(-3, 4, params.dims), -params.max_abs, params.max_abs), None


def _run_in_process(params: Im2020Params, client: Client, enrolled, probe, repeat: int, c1, t: dict, pool: bool):
    """(registration bytes, auth sizes, accepted): parties in one process, ``Im2020Service.handle`` direct."""
    service = Im2020Service(open_store("sqlite://"), params=params)
    reg = client.enrol(enrolled).to_bytes()
    reg_resp = service.handle("enrol", reg, None).body
    if pool:
        client.prepare()
    sizes = accepted = None
    for _ in range(repeat):
        _time_c1(c1, t)
        t0 = time.perf_counter()
        start = client.auth_start(probe).to_bytes()
        t1 = time.perf_counter()
        step = service.handle("auth/start", start, None)
        t2 = time.perf_counter()
        challenge = AuthChallenge.from_bytes(step.body)
        if challenge.compare_bits is None:
            finish = client.auth_finish(challenge).to_bytes()
            t3 = time.perf_counter()
            result = service.handle("auth/finish", finish, step.state).body
            middle = (finish,)
        else:
            s_star = client.blinded_score(challenge)
            t3 = time.perf_counter()
            request, evaluator = client.compare_request(challenge, s_star)
            garbled = service.handle("auth/compare", request.to_bytes(), step.state)
            finish = client.compare_finish(evaluator, CompareChallenge.from_bytes(garbled.body)).to_bytes()
            t_fin = time.perf_counter()
            result = service.handle("auth/finish", finish, garbled.state).body
            t["s3"].append(time.perf_counter() - t3)
            t["s2_fin"].append(time.perf_counter() - t_fin)
            middle = (request.to_bytes(), garbled.body, finish)
        t4 = time.perf_counter()
        for key, dt in zip(("c2", "s1", "c3", "s2"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            t[key].append(dt)
        sizes = (len(start), len(step.body), *map(len, middle), len(result))
        accepted = result[-1] == 1
        _time_offline(client, probe, t, pool)
    service.handle("revoke", RevokeRequest("bench").to_bytes(), None)
    return len(reg) + len(reg_resp), sizes, accepted


def _run_http(params: Im2020Params, client: Client, enrolled, probe, repeat: int, c1, t: dict, pool: bool):
    """The same over loopback HTTP to a `privface serve` child process: S1/S2 from its Server-Timing header,
    network = HTTP wall time − server compute."""
    from ..service.clients import im2020 as remote
    from ..service.launch import serve_subprocess

    options = (["--insecure-test-params"] if params.insecure_test_params
               else ["--security-bits", str(params.security_bits)]) + ["--tau", str(params.tau)]
    options += ["--mode", params.mode] + (["--compare-bits", "64"] if params.compare_bits == 64 else [])
    with tempfile.TemporaryDirectory() as tmp, \
            serve_subprocess("im2020", f"sqlite:///{tmp}/bench.db", options) as url, \
            remote.service_client(url) as http:
        _, reg = remote.enrol(http, client, enrolled)
        if pool:
            client.prepare()
        sizes = accepted = None
        for _ in range(repeat):
            _time_c1(c1, t)
            since = len(http.stats)
            r = remote.verify(http, client, probe)
            steps = http.stats[since:]
            network = r["network_ms"]
            if "s3_compare_ms" in r:  # its wall time includes its own HTTP: count only auth/start's network
                t["s3"].append(r["s3_compare_ms"] / 1000)
                network = max(steps[0].seconds - (steps[0].server_seconds or 0.0), 0.0) * 1000
            for key, ms in (("c2", r["c2_encrypt_ms"]), ("s1", r["server_ms_by_step"]["auth/start"]),
                            ("c3", r["c3_decrypt_ms"]), ("s2", r["server_ms_by_step"]["auth/finish"]),
                            ("network", network)):
                t[key].append(ms / 1000)
            sizes = tuple(b for st in steps for b in (st.request_bytes, st.response_bytes))  # messages in order
            accepted = r["accepted"]
            _time_offline(client, probe, t, pool)
        remote.revoke(http, client)
    return reg["bytes_sent"] + reg["bytes_received"], sizes, accepted


def _time_offline(client: Client, probe, t: dict, pool: bool) -> None:
    """After an attempt: C2 without precomputed randomness (c2_full, result discarded), then — with the
    pool — refill it for the next attempt: the OT receiver's randomness of the secure-comparison mode
    (s3_offline), then C2's (c2_offline)."""
    t0 = time.perf_counter()
    client.auth_start(probe).to_bytes()
    t["c2_full"].append(time.perf_counter() - t0)
    if pool:
        t0 = time.perf_counter()
        if client.prepare_comparison():
            t["s3_offline"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        client.prepare()
        t["c2_offline"].append(time.perf_counter() - t0)


def _time_c1(c1, t: dict) -> None:
    if c1 is not None:
        t0 = time.perf_counter()
        c1()
        t["c1"].append(time.perf_counter() - t0)


def bench_level(params: Im2020Params, *, repeat: int = 10, workers: int | None = None, face: bool = True,
                transport: str = "in-process", pool: bool = True) -> dict:
    """One level's medians. In the secure-comparison mode (§VII Fig. 8) also ``s3_compare_ms`` (OT + garbling
    + evaluation + decoding, both parties, and over HTTP its round trips), ``compare_bytes`` and
    ``compare_bits``; then total_ms = C2 + S1 + C3 + S3 (+ auth/start's network)."""
    enrolled, probe, c1 = _templates(params, face)
    client = Client("bench", params, workers=workers, precompute=True)  # a long-lived client: tables built once
    t = {k: [] for k in ("c1", "c2", "s1", "c3", "s2", "network", "s3", "s2_fin", "c2_full", "c2_offline",
                         "s3_offline")}
    run = {"in-process": _run_in_process, "http": _run_http}[transport]
    enrol_bytes, sizes, accepted = run(params, client, enrolled, probe, repeat, c1, t, pool)
    med = {k: round(statistics.median(v) * 1000, 3) if v else None for k, v in t.items()}
    network = med["network"] or 0.0
    k = params.dims
    m_bytes, n_bytes = (params.jl.k + 7) // 8, (params.jl.bits + 7) // 8
    secure = params.mode == "secure-comparison"
    names = (("AuthStart", "AuthChallenge", "CompareRequest", "CompareChallenge", "CompareFinish", "AuthResult")
             if secure else ("AuthStart", "AuthChallenge", "AuthFinish", "AuthResult"))
    if secure:
        med["s2"] = med["s2_fin"] if transport == "in-process" else med["s2"]
        last = med["s3"]
    else:
        last = med["s2"]
    row = {
        "security_bits": params.security_bits, "jl_modulus_bits": params.jl.bits, "jl_k": params.jl.k, "k": k,
        "c1_face_ms": med["c1"], "c2_encrypt_ms": med["c2"], "s1_blind_esed_ms": med["s1"],
        "c3_decrypt_ms": med["c3"], "s2_unblind_ms": med["s2"], "network_ms": network,
        "total_ms": round(med["c2"] + med["s1"] + med["c3"] + last + network, 3),
        "transport": transport, "repeat": repeat, "workers": workers or os.cpu_count() or 1,
        "auth_bytes": sum(sizes), "auth_bytes_by_message": dict(zip(names, sizes)), "mode": params.mode,
        "enrol_bytes": enrol_bytes,
        "paper_auth_bytes": 268 * k + 140, "paper_enrol_bytes": 140 * k + 264,
        # the same formulas at this level: |M| = k_JL/8 bytes, |Ĉ| = |N| bytes (paper: 12 and 128)
        "formula_auth_bytes": k * (m_bytes + n_bytes) + (k + 1) * n_bytes + m_bytes,
        "formula_enrol_bytes": k * (m_bytes + n_bytes) + 2 * n_bytes + 8,
        "randomness_pool": pool, "c2_offline_ms": med["c2_offline"], "c2_encrypt_full_ms": med["c2_full"],
        "total_ms_without_pool": round(med["c2_full"] + med["s1"] + med["c3"] + last + network, 3),
        "accepted": accepted, "goal_total_ms": 100,
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }
    if secure:
        row.update(s3_compare_ms=med["s3"], compare_bytes=sum(sizes[2:]), compare_bits=params.circuit_bits,
                   s3_offline_ms=med["s3_offline"])
    return row


def bench_im2020(levels=(112, 128), *, repeat: int = 10, workers: int | None = None, face: bool = True,
                 insecure_test_params: bool = False, transport: str = "in-process", mode: str = "basic",
                 compare_bits: int | None = None, pool: bool = True) -> list[dict]:
    kw = {"repeat": repeat, "workers": workers, "face": face, "transport": transport, "pool": pool}
    pkw = {"mode": mode, "compare_bits": compare_bits}
    if insecure_test_params:
        return [bench_level(Im2020Params.toy(**pkw), **kw)]
    return [bench_level(Im2020Params.for_level(b, **pkw), **kw) for b in levels]


def format_table(rows: list[dict]) -> str:
    cols = ("security_bits", "c1_face_ms", "c2_encrypt_ms", "s1_blind_esed_ms", "c3_decrypt_ms", "s2_unblind_ms",
            "network_ms", "total_ms", "auth_bytes", "enrol_bytes")
    if any("s3_compare_ms" in r for r in rows):
        cols += ("s3_compare_ms", "compare_bytes")
    lines = ["  ".join(f"{c:>16}" for c in cols)]
    lines += ["  ".join(f"{r[c]!s:>16}" for c in cols) for r in rows]
    return "\n".join(lines)
