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

``keep`` (``--keep DIR``): the gallery is enrolled into DIR once and reused by later runs with the same scheme, N,
dimension and parameters (``enrol_s`` then null; ``reused`` true) — for measuring the changes at 2^20 more than once
without its minutes of enrolment. Each run adds new identities and removes / updates ones still present, so a kept
gallery drifts a little from N (``identities_after`` says by how much).
"""
from __future__ import annotations

import json
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ..scale import NpySource, enrol
from ..scale.gallery import Gallery, key_server
from ..scale.lifecycle import add, info, list_ids, update, withdraw
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


def _enrolled(tmp: Path, scheme: str, n: int, dim: int, insecure_test_params: bool, progress: bool,
              keep: bool) -> tuple[str, float | None]:
    """The gallery's URL in ``tmp`` and its enrolment time: enrolled here, or None when ``keep`` finds one made
    with the same settings (``bench.json``); a kept directory holding another gallery is refused."""
    url, mark = f"sqlite:///{tmp}/g.db", tmp / "bench.json"
    want = {"scheme": scheme, "n": n, "dim": dim, "insecure_test_params": insecure_test_params}
    if keep and mark.exists():
        if json.loads(mark.read_text()) != want:
            raise ValueError(f"{tmp} keeps another bench gallery ({mark.read_text().strip()}); use another --keep")
        return url, None
    if keep and (tmp / "g.db").exists():
        raise ValueError(f"{tmp} holds a g.db not made by a finished `bench gallery --keep`; remove it first")
    rng = np.random.default_rng(0)
    path = tmp / "g.npy"
    gallery = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    for lo in range(0, n, 1 << 16):
        gallery[lo:lo + (1 << 16)] = _unit(rng, min(1 << 16, n - lo), dim)
    gallery.flush()
    del gallery
    kw = {"lift": 0, "centring": "none"} if scheme.startswith("idface") else {}
    t = time.perf_counter()
    enrol(url, NpySource([path]), scheme, tau=3.0 if scheme.startswith("idface") else 0.5,
          insecure_test_params=insecure_test_params, progress=progress, **kw)
    enrol_s = time.perf_counter() - t
    path.unlink()
    if keep:
        mark.write_text(json.dumps(want) + "\n")
    return url, enrol_s


def bench_gallery(scheme: str = "hers", n: int = 1 << 14, dim: int = 128, *, batch: int = 1024, repeat: int = 3,
                  insecure_test_params: bool = False, workdir: str | None = None, progress: bool = False,
                  keep: str | None = None) -> dict:
    if keep is None:
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            return _bench(Path(tmp), scheme, n, dim, batch, repeat, insecure_test_params, progress, False)
    Path(keep).mkdir(parents=True, exist_ok=True)
    return _bench(Path(keep), scheme, n, dim, batch, repeat, insecure_test_params, progress, True)


def _bench(tmp: Path, scheme: str, n: int, dim: int, batch: int, repeat: int, insecure_test_params: bool,
           progress: bool, keep: bool) -> dict:
    url, enrol_s = _enrolled(tmp, scheme, n, dim, insecure_test_params, progress, keep)
    before = info(url, tau=False)
    rng = np.random.default_rng(secrets.randbits(32) if enrol_s is None else 1)
    tag = secrets.token_hex(4) if enrol_s is None else "0"  # a reused gallery gets fresh names
    present = [i for i in list_ids(url) if i.startswith("g.")][:7 * repeat]
    if len(present) < 7 * repeat:
        raise ValueError("bench gallery: too few enrolled identities left to remove (use a fresh --keep)")
    key = _key(url, scheme)
    adds, removes, updates, withdraws, erase = [], [], [], [], {}
    for r in range(repeat):
        t = time.perf_counter()
        add(url, ArraySource([f"one.{tag}.{r}"], _unit(rng, 1, dim)))
        adds.append(time.perf_counter() - t)
    t = time.perf_counter()
    add(url, ArraySource([f"batch.{tag}.{i}" for i in range(batch)], _unit(rng, batch, dim)))
    batch_s = time.perf_counter() - t
    for r in range(repeat):
        t = time.perf_counter()
        erase = withdraw(url, [present[r * 7]], key=key)
        removes.append(time.perf_counter() - t)
        t = time.perf_counter()
        update(url, ArraySource([present[r * 7 + 1]], _unit(rng, 1, dim)), key=key)
        updates.append(time.perf_counter() - t)
        if key is not None and not GALLERY_SCHEMES[scheme].own_layout:  # cryptomask: no withdrawal without erasure
            t = time.perf_counter()
            withdraw(url, [present[r * 7 + 2]])
            withdraws.append(time.perf_counter() - t)
    after = info(url)
    return {"bench": "gallery", "scheme": scheme, "n": n, "dim": dim, "insecure_test_params": insecure_test_params,
            "enrol_s": None if enrol_s is None else round(enrol_s, 2), "reused": enrol_s is None,
            "storage_bytes": before["storage_bytes"], "blocks": before["blocks"],
            "add_one_s": round(statistics.median(adds), 4), "add_batch": batch, "add_batch_s": round(batch_s, 3),
            "add_per_identity_s": round(batch_s / batch, 6), "remove_s": round(statistics.median(removes), 4),
            "update_s": round(statistics.median(updates), 4), "repeat": repeat, "erased": bool(erase.get("erased")),
            "withdraw_s": round(statistics.median(withdraws), 4) if withdraws else None,
            "remove_bytes_to_key": erase.get("erase_bytes_sent"),
            "remove_bytes_from_key": erase.get("erase_bytes_received"),
            "erase_hiding_bits": erase.get("erase_hiding_bits"),
            "identities_after": after["identities"], "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()]}
