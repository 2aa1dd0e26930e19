"""The built documentation site's home page in headless Chromium (Debian's, driven by playwright-core from Node as
the web tests do) at a desktop and a phone (390×844) viewport: it renders (a non-blank screenshot, the title, the
first heading, the navigation — the sidebar on a desktop, the drawer button on a phone), nothing overflows
horizontally on the phone, nothing is requested from another origin and the console shows no error. The
screenshots are written under a temporary folder (PRIVFACE_SCREENSHOTS to keep them elsewhere). The CLI reference
is opened the same way: none of its code blocks runs past the right edge."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.helpers.static_server import serve

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PRIVFACE_CHROMIUM", "/usr/bin/chromium")
NODE_MODULES = ROOT / "web" / "node_modules"
VIEWPORTS = {"desktop": (1280, 900), "phone": (390, 844)}


@pytest.fixture(scope="module")
def served(site: Path):
    with serve(site) as url:
        yield url


def open_page(served: str, tmp_path_factory, page: str) -> dict[str, dict]:
    node = shutil.which("node")
    if not (Path(CHROMIUM).is_file() and node and (NODE_MODULES / "playwright-core").is_dir()):
        pytest.skip("Chromium, node or web/node_modules/playwright-core missing (.ci/install-chromium, make install)")
    shots = Path(os.environ.get("PRIVFACE_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots")).resolve()
    shots.mkdir(parents=True, exist_ok=True)
    job = {"url": f"{served}/{page}.html", "origin": served, "chromium": CHROMIUM,
           "viewports": [{"name": name, "width": w, "height": h, "path": str(shots / f"docs-{page}-{name}.png")}
                         for name, (w, h) in VIEWPORTS.items()]}
    proc = subprocess.run([node, str(Path(__file__).with_name("docs_page.cjs")), json.dumps(job)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
    lines = proc.stdout.strip().splitlines()
    out = json.loads(lines[-1]) if lines else {"error": proc.stderr[-2000:]}
    assert "error" not in out, f"docs page runner failed: {out['error']}"
    return {r["name"]: r for r in out["results"]}


@pytest.fixture(scope="module")
def pages(served: str, tmp_path_factory) -> dict[str, dict]:
    return open_page(served, tmp_path_factory, "index")


@pytest.fixture(scope="module")
def cli_pages(served: str, tmp_path_factory) -> dict[str, dict]:
    return open_page(served, tmp_path_factory, "cli")


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_docs_index_renders(pages, viewport):
    r = pages[viewport]
    assert r["title"].startswith("privface")
    assert r["h1"].rstrip("¶") == "privface" and r["header_title"] and r["header_visible"]  # ¶: the permalink
    assert r["nav_links"] >= 15  # every page of the nav is in the document
    assert r["text_length"] > 1000
    assert r["external"] == [], "requests to another origin (a CDN?)"
    assert r["errors"] == []
    png = Image.open(r["path"]).convert("L")
    assert png.size == VIEWPORTS[viewport]
    pixels = np.asarray(png, dtype=np.float64)
    assert pixels.std() > 10 and len(np.unique(pixels)) > 16, "blank screenshot"


def test_desktop_shows_the_sidebar(pages):
    assert pages["desktop"]["nav_visible"]


def test_phone_has_the_drawer_and_no_horizontal_overflow(pages):
    phone = pages["phone"]
    assert phone["drawer_button_visible"]
    assert phone["inner_width"] == 390
    assert phone["scroll_width"] <= phone["inner_width"], "the page scrolls sideways on a phone"


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_cli_reference_is_not_cut_off(cli_pages, viewport):
    """The CLI reference's help blocks (argparse text up to 80 columns) wrap inside the page: no code block is
    wider than its box, so nothing hides past the right edge, at 1280 px and on a phone."""
    r = cli_pages[viewport]
    assert r["pre_count"] > 15  # the overview and one help block per command
    assert r["pre_overflow"] == 0, f"{r['pre_overflow']} code blocks run past the right edge"
    assert r["scroll_width"] <= r["inner_width"]
