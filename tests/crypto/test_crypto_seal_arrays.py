"""seal_arrays.mulmod (Shoup's multiplication in uint64, rows in cache-sized groups) against Python integers, for a
fixed factor broadcast over many rows (the refresh's a·s and c1·s) and at the extreme residues."""
from __future__ import annotations

import numpy as np
import pytest

from privface.crypto import seal_arrays

PRIMES = [1152921504606584833, 1152921504606748673, (1 << 61) - 1, 1073479681, 3]


@pytest.mark.parametrize("rows", [1, 7, 40])
def test_mulmod_broadcast_rows_equal_python_integers(rows):
    rng = np.random.default_rng(rows)
    q = np.array(PRIMES, dtype=np.uint64)[:, None]
    a = rng.integers(0, 1 << 63, (rows, len(PRIMES), 4096), dtype=np.uint64) % q
    b = rng.integers(0, 1 << 63, (len(PRIMES), 4096), dtype=np.uint64) % q
    a[0, :, :2], b[:, :2] = q - 1, q - 1  # (q − 1)² ≡ 1
    a[-1, :, 2], b[:, 3] = 0, 0
    got = seal_arrays.mulmod(a, b[None], q[None])
    assert got.shape == a.shape and got.dtype == np.uint64
    want = a.astype(object) * b[None].astype(object) % q[None].astype(object)
    assert np.array_equal(got.astype(object), want)
    assert np.all(got[0, :, :2] == 1)


def test_mulmod_factor_varying_along_every_axis():
    rng = np.random.default_rng(3)
    q = np.array(PRIMES[:2], dtype=np.uint64)[:, None]
    a = rng.integers(0, 1 << 60, (3, 2, 64), dtype=np.uint64) % q
    b = rng.integers(0, 1 << 60, (3, 2, 64), dtype=np.uint64) % q
    want = a.astype(object) * b.astype(object) % q.astype(object)
    assert np.array_equal(seal_arrays.mulmod(a, b, q).astype(object), want)
