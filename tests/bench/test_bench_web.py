"""`privface bench web` end to end (two verifications, one enrolment) in headless Chromium: the keys the issue
names, real 112-bit figures, every verification of the genuine probe accepted."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.web.browser import chromium

pytestmark = pytest.mark.browser


def test_bench_web_prints_the_issue_keys():
    chromium()
    out = subprocess.run([sys.executable, "-m", "privface.cli", "bench", "web", "--repeat", "2", "--json"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    row = json.loads(out.stdout)
    keys = ("browser", "security_bits", "runs", "keygen_ms", "register_ms", "face_ms", "encrypt_ms", "server_ms",
            "decrypt_ms", "network_ms", "total_ms", "total_excl_face_ms", "auth_bytes")
    assert set(keys) <= set(row) and row["runs"] == 2 and row["security_bits"] == 112
    assert row["browser"].startswith("Chromium") and row["accepted_frac"] == 1.0
    assert all(row[k] > 0 for k in keys[3:] if row[k] is not None)
    assert row["auth_bytes"] > 2 * 128 * 256  # 128 ciphertexts of 2048 bits each way
