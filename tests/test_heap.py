"""heap.retain: glibc keeps freed large blocks, so a second buffer of the same size faults no fresh pages."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from privface import heap
from privface.errors import PrivfaceError

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")

# 256 MB allocated, written, freed and allocated again; prints the page faults of the second round
PROBE = """
import resource, sys
import numpy as np
from privface import heap
print(heap.retain(), file=sys.stderr)
def touch():
    a = np.empty(256 << 20, dtype=np.uint8)
    a[::4096] = 1
    return a
touched = touch(); del touched
f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
touched = touch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)
"""


def _faults(env: dict) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    return int(out.stdout)


@glibc
def test_a_retained_heap_reuses_a_freed_large_block():
    env = {k: v for k, v in os.environ.items() if k != "PRIVFACE_HEAP"}
    assert _faults(env) < 16                                   # the second 256 MB: from the heap
    assert _faults({**env, "PRIVFACE_HEAP": "system"}) >= 128  # glibc's default: fresh pages, 65 536 (or 128 huge)


def test_the_setting_is_checked(monkeypatch):
    monkeypatch.setenv("PRIVFACE_HEAP", "jemalloc")
    with pytest.raises(PrivfaceError, match="PRIVFACE_HEAP"):
        heap.retain()
    monkeypatch.setenv("PRIVFACE_HEAP", "system")
    assert heap.retain() is False
