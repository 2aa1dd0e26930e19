"""`privface bench gallery`: what changing a persisted gallery costs (``scale.lifecycle``, issue 37 item 5).

A gallery of N seeded synthetic unit vectors is enrolled into a fresh SQLite store (timed once), then timed, each a
median over ``repeat`` runs: ``add_one_s`` (one identity, ``gallery add``), ``remove_s`` (one identity withdrawn,
``gallery remove``), ``update_s`` (one identity's template replaced, ``gallery update``); and once
``add_batch_s`` for ``batch`` identities in one change, with ``add_per_identity_s`` = add_batch_s / batch (the
amortised figure). hers, idface-ckks and cryptomask erase on remove and update (``scale.lifecycle``: S_key's masked
refresh — idface-ckks with a garbled circuit per digit, cryptomask with the key generator —, its key step run in this
process, so ``remove_s`` counts both servers' work on the shared cores); ``remove_bytes_to_key`` and
``remove_bytes_from_key`` are what one erasing remove exchanges with S_key, ``withdraw_s`` a remove without
erasure. Every change is a real one on the real store (new block generations, the meta write, the old
generations deleted, the WAL truncated). ``load_average`` is the host's (1, 5, 15 min) when the row was made.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ..scale import NpySource, enrol
from ..scale.gallery import Gallery, key_server
from ..scale.lifecycle import add, info, update, withdraw
from ..scale.schemes import GALLERY_SCHEMES
from ..scale.sources import ArraySource


def _unit(rng, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _key(url: str, scheme: str):
    """S_key's side of erasure in this process: hers' and idface-ckks' secret key, cryptomask's key generator."""
    if GALLERY_SCHEMES[scheme].own_layout:
        from ..scale.cryptomask_erase import erase_key

        return erase_key(url)
    return key_server(Gallery(url)).secret if GALLERY_SCHEMES[scheme].erasable else None


def bench_gallery(scheme: str = "hers", n: int = 1 << 14, dim: int = 128, *, batch: int = 1024, repeat: int = 3,
                  insecure_test_params: bool = False, workdir: str | None = None, progress: bool = False) -> dict:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "g.npy"
        gallery = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
        for lo in range(0, n, 1 << 16):
            gallery[lo:lo + (1 << 16)] = _unit(rng, min(1 << 16, n - lo), dim)
        gallery.flush()
        del gallery
        url = f"sqlite:///{tmp}/g.db"
        kw = {"lift": 0, "centring": "none"} if scheme.startswith("idface") else {}
        t = time.perf_counter()
        rep = enrol(url, NpySource([path]), scheme, tau=3.0 if scheme.startswith("idface") else 0.5,
                    insecure_test_params=insecure_test_params, progress=progress, **kw)
        enrol_s = time.perf_counter() - t
        key = _key(url, scheme)
        adds, removes, updates, withdraws, erase = [], [], [], [], {}
        for r in range(repeat):
            t = time.perf_counter()
            add(url, ArraySource([f"one.{r}"], _unit(rng, 1, dim)))
            adds.append(time.perf_counter() - t)
        t = time.perf_counter()
        add(url, ArraySource([f"batch.{i}" for i in range(batch)], _unit(rng, batch, dim)))
        batch_s = time.perf_counter() - t
        for r in range(repeat):
            t = time.perf_counter()
            erase = withdraw(url, [f"g.{r * 7}"], key=key)
            removes.append(time.perf_counter() - t)
            t = time.perf_counter()
            update(url, ArraySource([f"g.{r * 7 + 1}"], _unit(rng, 1, dim)), key=key)
            updates.append(time.perf_counter() - t)
            if key is not None and not GALLERY_SCHEMES[scheme].own_layout:  # cryptomask: no withdrawal without erasure
                t = time.perf_counter()
                withdraw(url, [f"g.{r * 7 + 2}"])
                withdraws.append(time.perf_counter() - t)
        after = info(url)
    return {"bench": "gallery", "scheme": scheme, "n": n, "dim": dim, "insecure_test_params": insecure_test_params,
            "enrol_s": round(enrol_s, 2), "storage_bytes": rep.storage_bytes, "blocks": rep.blocks,
            "add_one_s": round(statistics.median(adds), 4), "add_batch": batch, "add_batch_s": round(batch_s, 3),
            "add_per_identity_s": round(batch_s / batch, 6), "remove_s": round(statistics.median(removes), 4),
            "update_s": round(statistics.median(updates), 4), "repeat": repeat, "erased": bool(erase.get("erased")),
            "withdraw_s": round(statistics.median(withdraws), 4) if withdraws else None,
            "remove_bytes_to_key": erase.get("erase_bytes_sent"),
            "remove_bytes_from_key": erase.get("erase_bytes_received"),
            "erase_hiding_bits": erase.get("erase_hiding_bits"),
            "identities_after": after["identities"], "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()]}
