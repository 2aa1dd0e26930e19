"""schemathesis against every service role (issue 8 §3): ``python fuzz/api.py [--roles R …] [--max-examples N]``.

Each role (``roles.py``) is served by uvicorn on a loopback port with API keys on and seeded by one real
protocol run; then the schemathesis CLI runs its phases (examples, coverage, fuzzing, stateful) against the
role's ``/openapi.json`` — one operation per step (service/openapi.py) — with the ``not_a_server_error``
check and the hooks of ``st_hooks.py``. Prints one JSON object per role: ``role, operations, phases`` (each
phase's status), ``test_cases, requests`` (schemathesis' requests), ``setup_requests`` (session-opening replays),
``statuses``, ``server_errors`` (5xx answers), ``server_logged_errors`` (steps the service logged as failed),
``failures`` (schemathesis' unique failures), ``seconds``. Exit 1 when any role had a server error.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from roles import ROLES, roles  # noqa: E402


class _Failures(logging.Handler):
    """Counts the service's 'step failed' log lines (app.py logs a 500's exception type)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record) -> None:
        self.count += 1


def run_role(role, tmp: Path, max_examples: int, seed: int) -> dict:
    cfg, tally, report = tmp / f"{role.name}.json", tmp / f"{role.name}.tally.json", tmp / f"{role.name}-report"
    cfg.write_text(json.dumps({
        "url": role.url, "api_key": role.api_key, "protocol": role.protocol, "tally": str(tally),
        "first_steps": list(role.first_steps),
        "seeds": {s: [b.hex() for b in bs] for s, bs in role.seeds.items()},
        "flows": [[(s, b.hex()) for s, b in flow] for flow in role.flows]}))
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "st_hooks", "PRIVFACE_FUZZ_ROLE": str(cfg),
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    failed = _Failures()
    logging.getLogger("privface.service").addHandler(failed)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())",
         "run", f"{role.url}/openapi.json", "-H", f"Authorization: Bearer {role.api_key}",
         "--checks", "not_a_server_error", "--max-examples", str(max_examples), "--seed", str(seed),
         "--exclude-path", "/v1/{protocol}/{step}", "--exclude-path", "/healthz",
         "--report", "json", "--report-dir", str(report), "--workers", "1"],
        env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    logging.getLogger("privface.service").removeHandler(failed)
    reports = sorted(report.glob("*.json"))
    if not reports or not tally.exists():
        raise RuntimeError(f"schemathesis did not run for {role.name}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    rep, t = json.loads(reports[-1].read_text()), json.loads(tally.read_text())
    server_errors = sum(n for c, n in [*t["statuses"].items(), *t["setup_statuses"].items()] if c.startswith("5"))
    return {"role": role.name, "operations": rep["operations"]["tested"],
            "phases": {name: p["status"] for name, p in rep["phases"].items()},
            "test_cases": rep["test_cases"]["generated"],
            "requests": t["requests"], "setup_requests": t["setup_requests"],
            "statuses": dict(sorted(t["statuses"].items())), "server_errors": server_errors,
            "server_logged_errors": failed.count, "failures": rep["test_cases"]["unique_failures"],
            "schemathesis_exit": proc.returncode, "seconds": round(seconds, 1),
            **({"output": proc.stdout[-3000:]} if proc.returncode or server_errors else {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roles", nargs="+", choices=ROLES, default=list(ROLES))
    ap.add_argument("--max-examples", type=int, default=100, help="per operation and phase (schemathesis -n)")
    ap.add_argument("--seed", type=int, default=8)
    a = ap.parse_args(argv)
    bad = 0
    with tempfile.TemporaryDirectory() as d, roles(Path(d), a.roles) as served:
        for role in served:
            row = run_role(role, Path(d), a.max_examples, a.seed)
            bad += row["server_errors"] + row["server_logged_errors"] + row["failures"]
            print(json.dumps(row), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
