"""`make demo`: im2020 end to end over loopback HTTP on photos that ship in packages (no download, no dataset).

A `privface serve --protocol im2020` child process (SQLite store in a temporary directory, 112-bit keys)
holds only encrypted templates. The client enrols Grace Hopper (embed, quantize, Joye–Libert key pair,
C = Enc(Γ)), then authenticates altered copies of her photo (genuine) and other people (impostors);
each attempt prints the server's decision, the client/network timings and the bytes each way.
"""
from __future__ import annotations

import json
import tempfile
import time

from . import demo_data
from .errors import NoFaceError
from .faces.registry import make_backend
from .protocols.im2020 import Client, Im2020Params
from .service.clients import im2020 as remote
from .service.launch import serve_subprocess
from .templates import quantize


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)


def run_demo(as_json: bool = False) -> int:
    backend, params = make_backend(), Im2020Params.for_level(112)
    attempts = [(name, img, True) for name, img in demo_data.altered_copies(demo_data.enrolled_photo()).items()]
    attempts += [(name, path, False) for name, path in demo_data.impostor_photos().items()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            serve_subprocess("im2020", f"sqlite:///{tmp}/demo.db", ["--security-bits", "112"]) as url, \
            remote.service_client(url) as http:
        t0 = time.perf_counter()
        enrolled = quantize(backend.embed(demo_data.enrolled_photo()), params.scale)
        client = Client("grace-hopper", params)
        _, reg = remote.enrol(http, client, enrolled)
        enrol = {"ms": _ms(t0), "bytes_sent": reg["bytes_sent"], "bytes_received": reg["bytes_received"]}
        for name, img, genuine in attempts:
            t0 = time.perf_counter()
            try:
                probe = quantize(backend.embed(img), params.scale)
            except NoFaceError:
                rows.append({"attempt": name, "genuine": genuine, "decision": "no face", "accepted": False,
                             "correct": not genuine, "c1_face_ms": _ms(t0)})
                continue
            c1 = _ms(t0)
            r = remote.verify(http, client, probe)
            rows.append({"attempt": name, "genuine": genuine, "decision": r["decision"], "accepted": r["accepted"],
                         "correct": r["accepted"] == genuine, "c1_face_ms": c1,
                         "c2_encrypt_ms": r["c2_encrypt_ms"], "server_ms": r["server_ms"],
                         "c3_decrypt_ms": r["c3_decrypt_ms"], "network_ms": r["network_ms"], "total_ms": _ms(t0),
                         "bytes_sent": r["bytes_sent"], "bytes_received": r["bytes_received"]})
        remote.revoke(http, client)
    correct = sum(r["correct"] for r in rows)
    out = {"backend": backend.name, "protocol": "im2020", "transport": "http", "security_bits": params.security_bits,
           "tau": params.tau, "enrol": enrol, "attempts": rows, "correct": correct, "total": len(rows)}
    if as_json:
        print(json.dumps(out))
    else:
        _print_table(out)
    return 0 if correct == len(rows) else 1


def _print_table(out: dict) -> None:
    e = out["enrol"]
    print(f"privface demo — im2020 over loopback HTTP, {out['security_bits']}-bit keys, backend {out['backend']}, "
          f"τ = {out['tau']}")
    print(f"enrolled Grace Hopper (matplotlib sample photo) in {e['ms']:.0f} ms "
          f"(sent {e['bytes_sent']} B, received {e['bytes_received']} B)\n")
    print(f"{'attempt':<28} {'kind':<9} {'decision':<8} {'face':>6} {'enc':>6} {'server':>6} {'dec':>6} "
          f"{'net':>6} {'total':>6} {'sent B':>7} {'recv B':>7}")
    for r in out["attempts"]:
        kind = "genuine" if r["genuine"] else "impostor"
        wrong = "" if r["correct"] else "  ← wrong"
        if r["decision"] == "no face":
            print(f"{r['attempt']:<28} {kind:<9} {'no face':<8} {r['c1_face_ms']:>6.0f}{wrong}")
            continue
        print(f"{r['attempt']:<28} {kind:<9} {r['decision']:<8} {r['c1_face_ms']:>6.0f} {r['c2_encrypt_ms']:>6.0f} "
              f"{r['server_ms']:>6.0f} {r['c3_decrypt_ms']:>6.0f} {r['network_ms']:>6.1f} {r['total_ms']:>6.0f} "
              f"{r['bytes_sent']:>7} {r['bytes_received']:>7}{wrong}")
    print("(times in ms: face = detect+align+embed+quantize, enc = Enc(Γ′), server = BlindESED + decision, "
          "dec = Dec(S*), net = HTTP time − server time)")
    print(f"\n{out['correct']}/{out['total']} decisions correct")
