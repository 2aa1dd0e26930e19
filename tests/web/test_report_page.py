"""The `privface report` page in headless Chromium at desktop and phone width (390×844): it loads with no console
error, and at phone width nothing but the tables' own scroll boxes is wider than the screen."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from privface.report import build, html, jobs
from tests.helpers.static_server import serve

from .browser import ROOT, run

pytestmark = pytest.mark.browser
SHOTS = Path(os.environ.get("PRIVFACE_SCREENSHOTS") or ROOT / "reports" / "screenshots").resolve()
MOBILE = {"width": 390, "height": 844}


def _outcome(job_id, result):
    return jobs.Outcome(jobs.Job(job_id, job_id, f"privface {job_id} --json", "job_identify"), result, "ok", 2.0)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A report page (figures from a few made-up job results) served at http://127.0.0.1:PORT/app/."""
    root = tmp_path_factory.mktemp("site")
    out = root / "app"
    out.mkdir()
    outcomes = [_outcome(f"bench.identify.{s}.n{n}", {"scheme": s, "n": n, "dim": 512, "identify_s": t * n / 1024,
                                                      "comm_bytes": b, "storage_bytes": 2048 * n, "threads": 2})
                for s, t, b in (("plain", 1e-4, 0), ("hers", 0.12, 131076), ("idface-ckks", 0.03, 262148),
                                ("cryptomask", 1.1, 4193735)) for n in (1024, 4096, 16384)]
    outcomes.append(_outcome("bench.gsm.l128-m16", {"ell": 128, "m": 16, "paillier_bits": 3072, "pi1_ms": 20.5,
                                                    "pi2_ms": 40.0, "pi3_ms": 120.0, "pi1_m1_bytes": 8464,
                                                    "pi1_total_bytes": 8980, "pi2_m1_bytes": 13584,
                                                    "pi2_total_bytes": 14360, "pi3_m1_bytes": 13584,
                                                    "pi3_total_bytes": 128425, "repeat": 2}))
    data = build.build(outcomes, out, mode="quick", commit="0" * 40, started=0.0, load_start=[1.5, 1.2, 0.9],
                       data_note="PRIVFACE_DATA is not set: no dataset evaluation ran.")
    (out / "index.html").write_text(html.render(data))
    (out / "report.json").write_text(html.write_json(data))
    with serve(root) as url:
        yield url


@pytest.mark.parametrize("name,viewport", [("desktop", None), ("mobile", MOBILE)])
def test_report_page_renders(site, name, viewport):
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"report-{name}.png"
    kw = {"viewport": viewport} if viewport else {}
    results = run(site, [{"do": "goto"}, {"do": "screenshot", "path": str(shot)}], timeout=180, **kw)
    assert results[0]["http"] == 200
    assert results[-1]["errors"] == []
    with Image.open(shot) as img:
        width, height = img.size
    assert width == (viewport or {"width": 1280})["width"]  # full-page shot: no horizontal overflow of the page
    assert height > 844
