"""The commands the documentation tells a reader to type are commands the CLI accepts: every `privface …` line of
the ```sh blocks of Getting started, the CLI overview and each protocol page's "Run it" parses with the real
argparse parser (so a renamed or removed option fails here, not in a reader's shell), and Getting started's
first step, which copies photos out of installed packages, runs as written."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from privface.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "getting-started.md", ROOT / "docs" / "cli.md",
         *sorted((ROOT / "docs" / "protocols").glob("*.md"))]


def sh_blocks(page: Path) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", page.read_text(), re.S | re.M)


def commands(page: Path) -> list[str]:
    """The `privface …` lines of a page's sh blocks, continuation lines joined and comments dropped."""
    out = []
    for block in sh_blocks(page):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            line = re.sub(r"^(\.\./)?\.venv/bin/", "", line)
            if line.startswith("privface "):
                out.append(line)
    return out


def test_pages_have_commands():
    assert len(commands(ROOT / "docs" / "getting-started.md")) >= 10
    for page in PAGES[2:]:
        assert "## Run it" in page.read_text(), f"{page.name}: no Run it section"
        assert commands(page), page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_documented_commands_parse(page, capsys):
    bad = []
    for line in commands(page):
        if "[" in line or "|" in line:  # a synopsis (optional parts, alternatives), not a command to paste
            continue
        words = shlex.split(line.replace("…", "X"))
        try:
            build_parser().parse_args(words[1:])
        except SystemExit:
            bad.append(f"{line}: {capsys.readouterr().err.strip().splitlines()[-1:]}")
    assert not bad, f"{page.name}: " + "; ".join(bad)


def test_getting_started_photos_step_runs(tmp_path):
    block = next(b for b in sh_blocks(ROOT / "docs" / "getting-started.md") if "demo_data" in b)
    script = re.search(r"<<'PY'\n(.*?)^PY$", block, re.S | re.M).group(1)
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True, timeout=120)
    assert {p.name for p in tmp_path.iterdir()} == {"me.jpg", "me-again.jpg", "someone.png", "stranger.png"}
