"""The pure-Python Joye–Libert discrete logarithm that privface.crypto.joye_libert ran before the native core
(native/src/jl.rs): the test oracle the native ``_dlog`` is compared with. Pohlig–Hellman split in halves
(joye_libert.py's module docstring), with the same tables."""
from __future__ import annotations

import gmpy2
from gmpy2 import mpz

from privface.crypto.joye_libert import fixed_base_table


def build_tables(g, p, k: int, w: int):
    """(w, leaf table, correction tables): leaf maps (g^(2^(k−w)))^i ↦ i for i < 2^w; for every inner node size
    n, T_n[j][v] = g_n^(−v·2^(8j)) with g_n = g^(2^(k−n))."""
    base = gmpy2.powmod(g, mpz(1) << (k - w), p)
    leaf, t = {}, mpz(1)
    for i in range(1 << w):
        leaf[int(t)] = i
        t = t * base % p
    inner, todo = {}, [k]
    while todo:
        n = todo.pop()
        if n <= w or n in inner:
            continue
        g_n_inv = gmpy2.invert(gmpy2.powmod(g, mpz(1) << (k - n), p), p)
        inner[n] = fixed_base_table(g_n_inv, n // 2, p)
        todo += [n // 2, n - n // 2]
    return w, leaf, inner


def dlog(hs: list, n: int, tables, p) -> list[int]:
    """[m mod 2^n for h in hs] with h = g_n^m, g_n = g^(2^(k−n)) of order 2^n."""
    w, leaf, inner = tables
    if n <= w:
        return [leaf[int(h)] >> (w - n) for h in hs]
    n1 = n // 2
    n2 = n - n1
    los = dlog([gmpy2.powmod(h, mpz(1) << n2, p) for h in hs], n1, tables, p)
    ts = []
    for h, lo in zip(hs, los):
        for row in inner[n]:
            if lo & 255:
                h = h * row[lo & 255] % p
            lo >>= 8
        ts.append(h)
    his = dlog(ts, n2, tables, p)
    return [lo + (hi << n1) for lo, hi in zip(los, his)]
