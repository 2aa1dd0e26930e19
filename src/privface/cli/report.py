"""`privface report`: every eval and bench, one self-contained HTML page (privface.report)."""
from __future__ import annotations

import argparse
import sys

from ..errors import PrivfaceError


def cmd_report(a) -> int:
    from ..report import run_report

    if a.quick and a.full:
        raise PrivfaceError("give --quick or --full, not both")
    mode = a.jobs_mode or ("full" if a.full else "quick")
    data = run_report(a.out, mode=mode, fresh=a.fresh, progress=not a.no_progress, only=a.only or None)
    failed = [j["id"] for j in data["jobs"] if j["status"] == "error"]
    print(f"{a.out}/index.html  ({len(data['jobs'])} jobs, {len(failed)} failed, {data['wall_seconds']} s)")
    if failed:
        print("privface report: failed jobs: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


def register(sub) -> None:
    """report."""
    s = sub.add_parser("report", help="run the evals and benches; write index.html, report.json and plots",
                       description="Run the evals and benches (the same library calls as `privface bench …` and "
                                   "`privface eval …`), then write DIR/index.html, DIR/report.json and PNG plots. "
                                   "Each job's result is cached in DIR/cache by job, arguments and commit; a failed "
                                   "job is shown on the page and makes the exit status 1.")
    s.add_argument("--out", required=True, metavar="DIR", help="output folder (results cached in DIR/cache)")
    s.add_argument("--quick", action="store_true", help="small galleries and samples, minutes (default)")
    s.add_argument("--full", action="store_true", help="the reference run: galleries to 2^20, all pairs (hours)")
    s.add_argument("--fresh", action="store_true", help="ignore cached results and run every job again")
    s.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    # test-only: toy parameters and a job filter (tests/test_report.py)
    s.add_argument("--jobs-mode", choices=["tiny"], help=argparse.SUPPRESS)
    s.add_argument("--only", action="append", metavar="PREFIX", help=argparse.SUPPRESS)
    s.set_defaults(func=cmd_report)
