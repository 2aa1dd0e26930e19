"""The documentation site, built once per session into a temporary folder (as `make docs` builds site/)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.is_file():
        pytest.skip("mkdocs is not installed (the docs extra: make install)")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out
