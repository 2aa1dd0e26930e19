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

from ..protocols.im2020 import AuthChallenge, Client, Im2020Params, RevokeRequest
from ..protocols.im2020.service import Im2020Service
from ..store import open_store
from ..templates import quantize
from .im2020_attacks import face_like_template


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


def _run_in_process(params: Im2020Params, client: Client, enrolled, probe, repeat: int, c1, t: dict):
    """(registration bytes, auth sizes, accepted): parties in one process, ``Im2020Service.handle`` direct."""
    service = Im2020Service(open_store("sqlite://"), params=params)
    reg = client.register(enrolled).to_bytes()
    reg_resp = service.handle("register", reg, None).body
    sizes = accepted = None
    for _ in range(repeat):
        _time_c1(c1, t)
        t0 = time.perf_counter()
        start = client.auth_start(probe).to_bytes()
        t1 = time.perf_counter()
        step = service.handle("auth/start", start, None)
        t2 = time.perf_counter()
        finish = client.auth_finish(AuthChallenge.from_bytes(step.body)).to_bytes()
        t3 = time.perf_counter()
        result = service.handle("auth/finish", finish, step.state).body
        t4 = time.perf_counter()
        for key, dt in zip(("c2", "s1", "c3", "s2"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            t[key].append(dt)
        sizes = (len(start), len(step.body), len(finish), len(result))
        accepted = result[-1] == 1
    service.handle("revoke", RevokeRequest("bench").to_bytes(), None)
    return len(reg) + len(reg_resp), sizes, accepted


def _run_http(params: Im2020Params, client: Client, enrolled, probe, repeat: int, c1, t: dict):
    """The same over loopback HTTP to a `privface serve` child process: S1/S2 from its Server-Timing header,
    network = HTTP wall time − server compute."""
    from ..protocols.im2020 import remote
    from ..service.launch import serve_subprocess

    options = (["--insecure-test-params"] if params.insecure_test_params
               else ["--security-bits", str(params.security_bits)]) + ["--tau", str(params.tau)]
    with tempfile.TemporaryDirectory() as tmp, \
            serve_subprocess("im2020", f"sqlite:///{tmp}/bench.db", options) as url, \
            remote.service_client(url) as http:
        _, reg = remote.register(http, client, enrolled)
        sizes = accepted = None
        for _ in range(repeat):
            _time_c1(c1, t)
            since = len(http.stats)
            r = remote.verify(http, client, probe)
            for key, ms in (("c2", r["c2_encrypt_ms"]), ("s1", r["server_ms_by_step"]["auth/start"]),
                            ("c3", r["c3_decrypt_ms"]), ("s2", r["server_ms_by_step"]["auth/finish"]),
                            ("network", r["network_ms"])):
                t[key].append(ms / 1000)
            start, finish = http.stats[since:]
            sizes = (start.request_bytes, start.response_bytes, finish.request_bytes, finish.response_bytes)
            accepted = r["accepted"]
        remote.revoke(http, client.subject_id)
    return reg["bytes_sent"] + reg["bytes_received"], sizes, accepted


def _time_c1(c1, t: dict) -> None:
    if c1 is not None:
        t0 = time.perf_counter()
        c1()
        t["c1"].append(time.perf_counter() - t0)


def bench_level(params: Im2020Params, *, repeat: int = 10, workers: int | None = None, face: bool = True,
                transport: str = "in-process") -> dict:
    enrolled, probe, c1 = _templates(params, face)
    client = Client("bench", params, workers=workers)
    t = {k: [] for k in ("c1", "c2", "s1", "c3", "s2", "network")}
    run = {"in-process": _run_in_process, "http": _run_http}[transport]
    registration_bytes, sizes, accepted = run(params, client, enrolled, probe, repeat, c1, t)
    med = {k: round(statistics.median(v) * 1000, 3) if v else None for k, v in t.items()}
    network = med["network"] or 0.0
    k = params.dims
    m_bytes, n_bytes = (params.jl.k + 7) // 8, (params.jl.bits + 7) // 8
    return {
        "security_bits": params.security_bits, "jl_modulus_bits": params.jl.bits, "jl_k": params.jl.k, "k": k,
        "c1_face_ms": med["c1"], "c2_encrypt_ms": med["c2"], "s1_blind_esed_ms": med["s1"],
        "c3_decrypt_ms": med["c3"], "s2_unblind_ms": med["s2"], "network_ms": network,
        "total_ms": round(med["c2"] + med["s1"] + med["c3"] + med["s2"] + network, 3),
        "transport": transport, "repeat": repeat, "workers": workers or os.cpu_count() or 1,
        "auth_bytes": sum(sizes), "auth_bytes_by_message": dict(zip(("AuthStart", "AuthChallenge", "AuthFinish",
                                                                     "AuthResult"), sizes)),
        "registration_bytes": registration_bytes,
        "paper_auth_bytes": 268 * k + 140, "paper_registration_bytes": 140 * k + 264,
        # the same formulas at this level: |M| = k_JL/8 bytes, |Ĉ| = |N| bytes (paper: 12 and 128)
        "formula_auth_bytes": k * (m_bytes + n_bytes) + (k + 1) * n_bytes + m_bytes,
        "formula_registration_bytes": k * (m_bytes + n_bytes) + 2 * n_bytes + 8,
        "accepted": accepted, "goal_total_ms": 100,
        "loadavg_1min": round(os.getloadavg()[0], 2),
    }


def bench_im2020(levels=(112, 128), *, repeat: int = 10, workers: int | None = None, face: bool = True,
                 insecure_test_params: bool = False, transport: str = "in-process") -> list[dict]:
    kw = {"repeat": repeat, "workers": workers, "face": face, "transport": transport}
    if insecure_test_params:
        return [bench_level(Im2020Params.toy(), **kw)]
    return [bench_level(Im2020Params.for_level(b), **kw) for b in levels]


def format_table(rows: list[dict]) -> str:
    cols = ("security_bits", "c1_face_ms", "c2_encrypt_ms", "s1_blind_esed_ms", "c3_decrypt_ms", "s2_unblind_ms",
            "network_ms", "total_ms", "auth_bytes", "registration_bytes")
    lines = ["  ".join(f"{c:>16}" for c in cols)]
    lines += ["  ".join(f"{r[c]!s:>16}" for c in cols) for r in rows]
    return "\n".join(lines)
