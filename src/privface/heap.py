"""Keep freed memory in the process (glibc's malloc), so that a query's large buffers are not zeroed again.

glibc serves every block above 32 MB with its own mmap and unmaps it at free; the next query's buffers of the
same size (cryptomask's OT-extension u, ≈ 0.12 GB per query at 2^20 on SoftSpokenOT, 0.5 GB on IKNP; hers' inner
products) are then fresh pages that the kernel zeroes on first touch. ``retain`` takes blocks of every size from
the heap (``M_MMAP_MAX`` 0) and keeps up to ``TRIM`` bytes of free memory at its top (``M_TRIM_THRESHOLD``), as
jemalloc or tcmalloc would. The price: a process keeps up to ``TRIM`` of freed memory resident after a large query.
``privface``'s command line (hence ``serve``) and its benchmark children call it; ``PRIVFACE_HEAP=system`` leaves
glibc's defaults. A library user calls it once, or not.
"""
from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # <malloc.h>
TRIM = 1 << 30


def retain() -> bool:
    """Apply the settings to this process (and let ``spawn``ed children do so); False where they do not apply
    (not glibc, or ``PRIVFACE_HEAP=system``)."""
    choice = os.environ.get("PRIVFACE_HEAP", "retain")
    if choice not in ("retain", "system"):
        from .errors import PrivfaceError

        raise PrivfaceError(f"PRIVFACE_HEAP is 'retain' (the default) or 'system', not {choice!r}")
    if choice == "system" or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM))
