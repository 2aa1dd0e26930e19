"""`privface report`: run the evals and benches, write index.html, report.json and PNG plots (issue 21).

Modules: ``jobs`` (what runs, cached, atomically), ``papers`` (the papers' figures, papers.json), ``build`` (the
report's data), ``plots`` (matplotlib PNGs), ``html`` (the page). Imported only by the CLI (cli/report.py)."""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from . import build, html, jobs

__all__ = ["run_report"]


def _data_note() -> tuple[bool, str]:
    from ..errors import PrivfaceError

    root = os.environ.get("PRIVFACE_DATA")
    if not root:
        return False, "PRIVFACE_DATA is not set: no dataset evaluation ran (accuracy columns empty)."
    try:
        from ..eval.datasets import data_root

        base = data_root(None)
    except PrivfaceError as e:
        return False, f"PRIVFACE_DATA={root}: {e}; no dataset evaluation ran."
    missing = [d for d in ("orl", "lfw") if not (Path(base) / d).is_dir()]
    if missing:
        return False, f"PRIVFACE_DATA={root} lacks {', '.join(missing)}: no dataset evaluation ran."
    return True, f"PRIVFACE_DATA={root} (ORL, LFW)."


def run_report(out: str | os.PathLike, *, mode: str = "quick", fresh: bool = False, progress: bool = True,
               only: Iterable[str] | None = None) -> dict:
    """Run the jobs of ``mode`` (reusing ``out/cache``), write ``out/index.html``, ``out/report.json`` and the
    PNGs; returns the report's data. ``only``: job id prefixes (tests)."""
    started, load_start = time.time(), build.loadavg()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    commit = build.git_commit()
    available, note = _data_note()
    plan = jobs.plan(mode, only=only)
    if progress:
        print(f"privface report: {len(plan)} jobs ({mode}), results cached in {out / 'cache'}", file=sys.stderr)
    outcomes = jobs.run_jobs(plan, out / "cache", commit, fresh=fresh, progress=progress, data_available=available)
    data = build.build(outcomes, out, mode=mode, commit=commit, started=started, load_start=load_start,
                       data_note=note)
    # the page and its data are for reading (0644, as the PNGs); the cache stays the owner's (0600)
    jobs.write_atomically(out / "report.json", html.write_json(data), 0o644)
    jobs.write_atomically(out / "index.html", html.render(data), 0o644)
    return data
