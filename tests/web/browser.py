"""Helpers of the browser tests: Debian's Chromium driven by playwright-core (web/test/browser.ts) against a
real `privface serve` on loopback. `fixture_bundle()` names the TEST FIXTURE build of the page (face
descriptors from the Python pipeline, queued by the test) while the browser face pipeline is not merged."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "web" / "dist-test" / "browser.mjs"
CHROMIUM = os.environ.get("PRIVFACE_CHROMIUM", "/usr/bin/chromium")


def chromium() -> str:
    if not (Path(CHROMIUM).is_file() and shutil.which("node") and RUNNER.is_file()):
        pytest.skip("Chromium, node or the built browser runner is missing (sudo .ci/install-chromium, make install)")
    return CHROMIUM


def fixture_bundle() -> str | None:
    """The page's test-fixture bundle unless the browser face pipeline is built into the real page."""
    if (ROOT / "web" / "src" / "face" / "index.ts").is_file() and not os.environ.get("PRIVFACE_WEB_FIXTURE"):
        return None
    return str(ROOT / "web" / "dist-test" / "app-fixture.js")


def run(url: str, steps: list[dict], *, timeout: float = 600, **job) -> list[dict]:
    """Run the steps in one headless page; the per-step results (status, state, report…)."""
    job = {"url": url, "chromium": chromium(), "fixture": fixture_bundle(), "steps": steps, **job}
    proc = subprocess.run(["node", str(RUNNER), json.dumps(job)], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT / "web")
    out = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {"error": proc.stderr[-2000:]}
    if "error" in out:
        raise AssertionError(f"browser runner failed: {out['error']}")
    return out["results"]
