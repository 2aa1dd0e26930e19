"""The browser client's code under Node (web/test/driver.ts, built by `make install` / `npm run build`):
a JSON-lines subprocess the web tests talk to."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "web" / "dist-test" / "driver.mjs"
GSM_DRIVER = ROOT / "web" / "dist-test" / "gsmDriver.mjs"


class NodeDriver:
    def __init__(self, path: Path = DRIVER) -> None:
        node = shutil.which("node")
        if node is None or not path.is_file():
            pytest.skip("node or the built web test driver is missing (run make install)")
        self.proc = subprocess.Popen([node, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, **request) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
