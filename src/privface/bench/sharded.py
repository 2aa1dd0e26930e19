"""`privface bench identify --scheme hers --ray local|ADDRESS --shards 1,2,…`: the resident Ray shards of
``scale.resident`` beside the in-process local server, in the same invocation (issue 38 §1, §5; seed 003 §3.2).

The gallery (the seeded synthetic unit vectors of ``bench.identify``) is enrolled once into a throw-away SQLite
gallery store; the in-process row loads every block into this process (``Gallery.local_server``), each sharded
row starts K resident shards that load their blocks from the same store. Per row: ``load_s`` (start to every
block resident), ``identify_s`` (IP_DB + the key server's decision, median of ``repeat``), ``ip_db_s`` (IP_DB
alone), per shard its blocks, load time, resident bytes and median IP_DB time; ``fanout_overhead_s`` = the
sharded IP_DB time minus its slowest shard's own time in the same call (sending the query, collecting and
concatenating the parts), median over calls. Each sharded row times ``repeat`` rounds of one in-process and one
sharded identification back to back (which goes first alternates), so that both see the same machine load:
``in_process_identify_s`` and ``ratio`` = sharded identify_s / in-process identify_s come from those rounds;
``cpu_ratio`` = the shards' summed IP_DB CPU seconds / the in-process IP_DB's (the work sharding adds, whatever
the load), ``driver_cpu_s`` the driver's CPU seconds for one fan-out (sending the query, collecting the parts).
Where a ratio above 1 comes from when ``cpu_ratio`` is not: ``shard_cpu_share`` = a shard's IP_DB CPU seconds over
the fan-out's wall time (mean over the shards; 1 = a core to itself all along), ``in_process_cpu_share`` the same
for the in-process IP_DB's threads, and ``shard_imbalance`` = the slowest shard's IP_DB time over the fastest's
(the in-process threads share the blocks dynamically; a shard's blocks are its own, so the call waits for the
slowest).
``answer_equals_in_process``: the IP_DB message is bit-identical to the in-process one and the decisions agree.

CPU seconds (``ip_db_cpu_s``, per shard and per identity) are what the sizing rule (docs/sizing.md) scales from:
on a shared machine the wall-clock times depend on what else runs. The key side (issue 38 §4; S_key with
``scale.key_pool``'s worker processes, ``$PRIVFACE_KEY_WORKERS``, default one per core, in every row): the
in-process row gives the decryption of one identification's ``key_ciphertexts`` in the key server's own process
(``key_decrypt_serial_s``, ``key_decrypt_ct_per_s``, ``key_decrypt_cpu_s_per_ct``) and over its workers
(``key_decrypt_parallel_s``, ``key_decrypt_parallel_ct_per_s``; ``key_decrypt_same``: equal scores); each sharded
row its ``key_server_s`` (S_key's decision on the sharded message, median).
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ..crypto.parallel import default_workers
from ..errors import PrivfaceError
from .identify import TAU, _median, synthetic


def parse_shards(text: str) -> list[int]:
    """``1,2,…`` → shard counts (positive, no repeats)."""
    try:
        out = [int(v) for v in text.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1 or len(set(out)) != len(out):
        raise PrivfaceError(f"--shards takes positive shard counts, comma-separated, each once; got {text!r}")
    return out


def bench_sharded(n: int, dim: int, shards: list[int], *, address: str = "auto", repeat: int = 5,
                  insecure_test_params: bool = False, seed: int = 0, key_workers: int | None = None,
                  runs: int = 1) -> list[dict]:
    """One row for the in-process local server, then ``runs`` per shard count (``scheme`` hers), each with fresh
    shards and its own same-run ratio."""
    from ..scale import Gallery, NpySource, enrol, key_server
    from ..scale.actors import init_ray
    from ..scale.key_pool import DecryptPool
    from ..scale.resident import ResidentLocalServer

    if n < 1 or dim < 1 or repeat < 1 or runs < 1:
        raise PrivfaceError("--n, --dim, --repeat and --runs must be positive")
    x, y, _ = synthetic(n, dim, seed)
    query = y.astype(np.float64).reshape(1, -1)
    with tempfile.TemporaryDirectory(prefix="privface-bench-shards-") as tmp:
        np.save(Path(tmp) / "g.npy", x)
        url = f"sqlite:///{tmp}/g.db"
        t = time.perf_counter()
        enrol(url, NpySource([Path(tmp) / "g.npy"]), "hers", tau=TAU["hers"], insecure_test_params=insecure_test_params)
        enrol_s = time.perf_counter() - t
        scores = x @ y
        best = int(np.argmax(scores))
        expect = f"g.{best}" if scores[best] >= TAU["hers"] else None
        del x, scores
        gallery = Gallery(url)
        key = key_server(gallery)
        base = {"scheme": "hers", "n": n, "dim": dim, "blocks": gallery.nblocks, "enrol_s": round(enrol_s, 3),
                "insecure_test_params": insecure_test_params}

        def decide(local):
            return local.resolve(key.decide(local.identify_request(query)))

        t = time.perf_counter()
        local = gallery.local_server()
        load_s = time.perf_counter() - t
        serial = key.secret
        key.secret = pool = DecryptPool(serial, gallery.settings, gallery.pk_bytes, _secret_key(gallery), key_workers)
        try:
            identify_s, who = _median(lambda: decide(local), repeat)
            ip_db_s, msg = _median(lambda: local.identify_request(query), repeat)
            ip_db_cpu_s = _median_cpu(lambda: local.identify_request(query), repeat)
            one = {"identify_s": identify_s, "answer": who, "msg": msg, "decide": lambda: decide(local),
                   "ip_db_cpu_s": ip_db_cpu_s,
                   "cpu_share": round(ip_db_cpu_s / ip_db_s / min(default_workers(None), gallery.nblocks), 3)}
            resident = sum(int(b.planes.nbytes) for b in local.blocks)
            rows = [dict(base, mode="in-process", shards=0, load_s=round(load_s, 3), identify_s=identify_s,
                         ip_db_s=ip_db_s, ip_db_cpu_s=ip_db_cpu_s, resident_bytes=resident,
                         resident_bytes_per_identity=round(resident / n, 1),
                         ip_db_cpu_s_per_identity=ip_db_cpu_s / n,
                         **_key_side(serial, pool, msg, repeat), answer_equals_plaintext=who == expect)]
            init_ray(address, num_cpus=max(shards) if address == "auto" else None)
            for count in (c for c in shards for _ in range(runs)):
                rows.append(dict(base, **_sharded_row(lambda c=count: ResidentLocalServer(gallery, address=address,
                                                                                           shards=c),
                                                      decide, query, repeat, one, key)))
        finally:
            pool.close()
    return [{k: round(v, 9 if k.endswith("per_identity") else 6) if isinstance(v, float) else v
             for k, v in row.items()} for row in rows]


def _secret_key(gallery) -> bytes:
    """The gallery's sk record from its (bench-local) key store: the key server's decryption workers rebuild it."""
    from ..scale.gallery import KEY, default_key_store
    from ..scale.layout import record_key
    from ..store import open_store

    with open_store(default_key_store(gallery.url)) as keys:
        return keys.get(KEY, record_key(gallery.name, "sk"))


def _median_cpu(fn, repeat: int) -> float:
    """Median CPU seconds of this process (every thread) over ``repeat`` calls of ``fn``."""
    out = []
    for _ in range(repeat):
        c = time.process_time()
        fn()
        out.append(time.process_time() - c)
    return statistics.median(out)


def _key_side(serial, pool, msg, repeat: int) -> dict:
    """S_key's decryption of one identification's IP_DB message (``len(msg.counts)`` ciphertexts): in its own
    process (wall and CPU seconds) and over its ``pool.workers`` worker processes (``scale.key_pool``)."""
    cts = len(msg.counts)
    one_s, scores = _median(lambda: serial.decrypt_scores(msg), repeat)
    one_cpu = _median_cpu(lambda: serial.decrypt_scores(msg), repeat)
    par_s, par = _median(lambda: pool.decrypt_scores(msg), repeat)
    return {"key_ciphertexts": cts, "key_workers": pool.workers, "key_decrypt_serial_s": one_s,
            "key_decrypt_cpu_s_per_ct": one_cpu / cts, "key_decrypt_ct_per_s": round(cts / one_s, 1),
            "key_decrypt_parallel_s": par_s, "key_decrypt_parallel_ct_per_s": round(cts / par_s, 1),
            "key_decrypt_same": bool(np.array_equal(scores, par))}


def _sharded_row(start, decide, query, repeat: int, one: dict, key) -> dict:
    """One sharded row: ``start()`` the resident shards, then ``repeat`` rounds of one in-process and one sharded
    identification back to back (the same load on both), and the IP_DB message compared bit for bit."""
    t = time.perf_counter()
    sharded = start()
    load_s = time.perf_counter() - t
    inproc, ident, ip_db, overhead, per_shard, per_cpu, key_s, driver_cpu = [], [], [], [], [], [], [], []
    try:
        for r in range(repeat):  # alternate which goes first: neither always follows the other's work
            for first in ((True, False) if r % 2 == 0 else (False, True)):
                t = time.perf_counter()
                if first:
                    one["decide"]()
                    inproc.append(time.perf_counter() - t)
                else:
                    who = decide(sharded)
                    ident.append(time.perf_counter() - t)
            t, c = time.perf_counter(), time.process_time()
            msg = sharded.identify_request(query)
            ip_db.append(time.perf_counter() - t)
            driver_cpu.append(time.process_time() - c)
            overhead.append(ip_db[-1] - max(sharded.shard_s))
            per_shard.append(sharded.shard_s)
            per_cpu.append(sharded.shard_cpu_s)
            t = time.perf_counter()
            key.decide(msg)
            key_s.append(time.perf_counter() - t)
        info = sharded.info()
    finally:
        sharded.close()
    same = (np.array_equal(msg.arrays, one["msg"].arrays) and msg.counts == one["msg"].counts
            and who == one["answer"])
    med = statistics.median
    return dict(mode="ray", shards=len(info), load_s=round(load_s, 3), identify_s=med(ident), ip_db_s=med(ip_db),
                in_process_identify_s=med(inproc), ratio=round(med(ident) / med(inproc), 3),
                resident_bytes=sum(i["resident_bytes"] for i in info), fanout_overhead_s=med(overhead),
                key_server_s=med(key_s), answer_equals_in_process=same,
                ip_db_cpu_s=med(sum(c) for c in per_cpu), driver_cpu_s=med(driver_cpu),
                cpu_ratio=round(med(sum(c) for c in per_cpu) / one["ip_db_cpu_s"], 3),
                shard_cpu_share=round(med(sum(c) / len(c) / w for c, w in zip(per_cpu, ip_db)), 3),
                in_process_cpu_share=one["cpu_share"],
                shard_imbalance=round(med(max(ts) / max(min(ts), 1e-9) for ts in per_shard), 3),
                per_shard=[{"blocks": i["hi"] - i["lo"], "load_s": i["load_s"], "resident_bytes": i["resident_bytes"],
                            "ip_db_s": round(med(ts[k] for ts in per_shard), 6),
                            "ip_db_cpu_s": round(med(ts[k] for ts in per_cpu), 6),
                            "ip_db_cpu_s_per_identity": round(med(ts[k] for ts in per_cpu)
                                                              / max(1, sum(msg.counts[i["lo"]:i["hi"]])), 9),
                            "node": i["node"][:12]}
                           for k, i in enumerate(info)])
