"""`make demo`: enrol one face and verify genuine and impostor attempts, on photos that ship in packages.

Plaintext baseline for now: the protocol issues switch the matching step to encrypted templates.
"""
from __future__ import annotations

import json
import time

from . import demo_data
from .errors import NoFaceError
from .faces.registry import make_backend


def run_demo(as_json: bool = False) -> int:
    backend = make_backend()
    t0 = time.perf_counter()
    enrolled = backend.embed(demo_data.enrolled_photo())
    enrol_ms = (time.perf_counter() - t0) * 1000
    attempts = [(name, img, True) for name, img in demo_data.altered_copies(demo_data.enrolled_photo()).items()]
    attempts += [(name, path, False) for name, path in demo_data.impostor_photos().items()]
    rows, correct = [], 0
    for name, img, same in attempts:
        t = time.perf_counter()
        try:
            dist = float(backend.distance(enrolled, backend.embed(img)))
            match = dist <= backend.threshold
        except NoFaceError:
            dist, match = None, False
        ms = (time.perf_counter() - t) * 1000
        correct += match == same
        rows.append({"attempt": name, "genuine": same, "distance": None if dist is None else round(dist, 4),
                     "match": match, "correct": match == same, "ms": round(ms, 1)})
    out = {"backend": backend.name, "protocol": "plain", "threshold": backend.threshold,
           "enrol_ms": round(enrol_ms, 1), "attempts": rows, "correct": correct, "total": len(rows)}
    if as_json:
        print(json.dumps(out))
    else:
        print(f"privface demo — backend {backend.name}, protocol plain, threshold {backend.threshold}")
        print(f"enrolled Grace Hopper (matplotlib sample photo) in {enrol_ms:.0f} ms\n")
        print(f"{'attempt':<28} {'kind':<9} {'distance':>8}  {'decision':<8} {'ms':>6}")
        for r in rows:
            d = "no face" if r["distance"] is None else f"{r['distance']:.4f}"
            print(f"{r['attempt']:<28} {'genuine' if r['genuine'] else 'impostor':<9} {d:>8}  "
                  f"{'accept' if r['match'] else 'reject':<8} {r['ms']:>6.0f}{'' if r['correct'] else '  ← wrong'}")
        print(f"\n{correct}/{len(rows)} decisions correct")
    return 0 if correct == len(rows) else 1
