"""`privface bench identify --scheme hers --ray local|ADDRESS --shards 1,2,…`: the resident Ray shards of
``scale.resident`` beside the in-process local server, in the same invocation (issue 38 §1, §5; seed 003 §3.2).

The gallery (the seeded synthetic unit vectors of ``bench.identify``) is enrolled once into a throw-away SQLite
gallery store; the in-process row loads every block into this process (``Gallery.local_server``), each sharded
row starts K resident shards that load their blocks from the same store. Per row: ``load_s`` (start to every
block resident), ``identify_s`` (IP_DB + the key server's decision, median of ``repeat``), ``ip_db_s`` (IP_DB
alone), per shard its blocks, load time, resident bytes and median IP_DB time; ``fanout_overhead_s`` = the
sharded IP_DB time minus its slowest shard's own time in the same call (sending the query, collecting and
concatenating the parts), median over calls. Each sharded row times ``repeat`` rounds of one in-process and one
sharded identification back to back, so that both see the same machine load: ``in_process_identify_s`` and
``ratio`` = sharded identify_s / in-process identify_s come from those rounds. ``answer_equals_in_process``: the
IP_DB message is bit-identical to the in-process one and the decisions agree.
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

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
                  insecure_test_params: bool = False, seed: int = 0) -> list[dict]:
    """One row for the in-process local server, then one per shard count (``scheme`` hers)."""
    from ..scale import Gallery, NpySource, enrol, key_server
    from ..scale.actors import init_ray
    from ..scale.resident import ResidentLocalServer

    if n < 1 or dim < 1 or repeat < 1:
        raise PrivfaceError("--n, --dim and --repeat must be positive")
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
        identify_s, who = _median(lambda: decide(local), repeat)
        ip_db_s, msg = _median(lambda: local.identify_request(query), repeat)
        one = {"identify_s": identify_s, "answer": who, "msg": msg, "decide": lambda: decide(local)}
        rows = [dict(base, mode="in-process", shards=0, load_s=round(load_s, 3), identify_s=identify_s,
                     ip_db_s=ip_db_s, resident_bytes=sum(int(b.planes.nbytes) for b in local.blocks),
                     answer_equals_plaintext=who == expect)]
        init_ray(address, num_cpus=max(shards) if address == "auto" else None)
        for count in shards:
            rows.append(dict(base, **_sharded_row(lambda c=count: ResidentLocalServer(gallery, address=address,
                                                                                       shards=c),
                                                  decide, query, repeat, one)))
    return [{k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()} for row in rows]


def _sharded_row(start, decide, query, repeat: int, one: dict) -> dict:
    """One sharded row: ``start()`` the resident shards, then ``repeat`` rounds of one in-process and one sharded
    identification back to back (the same load on both), and the IP_DB message compared bit for bit."""
    t = time.perf_counter()
    sharded = start()
    load_s = time.perf_counter() - t
    inproc, ident, ip_db, overhead, per_shard = [], [], [], [], []
    try:
        for _ in range(repeat):
            t = time.perf_counter()
            one["decide"]()
            inproc.append(time.perf_counter() - t)
            t = time.perf_counter()
            who = decide(sharded)
            ident.append(time.perf_counter() - t)
            t = time.perf_counter()
            msg = sharded.identify_request(query)
            ip_db.append(time.perf_counter() - t)
            overhead.append(ip_db[-1] - max(sharded.shard_s))
            per_shard.append(sharded.shard_s)
        info = sharded.info()
    finally:
        sharded.close()
    same = (np.array_equal(msg.arrays, one["msg"].arrays) and msg.counts == one["msg"].counts
            and who == one["answer"])
    med = statistics.median
    return dict(mode="ray", shards=len(info), load_s=round(load_s, 3), identify_s=med(ident), ip_db_s=med(ip_db),
                in_process_identify_s=med(inproc), ratio=round(med(ident) / med(inproc), 3),
                resident_bytes=sum(i["resident_bytes"] for i in info), fanout_overhead_s=med(overhead),
                answer_equals_in_process=same,
                per_shard=[{"blocks": i["hi"] - i["lo"], "load_s": i["load_s"], "resident_bytes": i["resident_bytes"],
                            "ip_db_s": round(med(ts[k] for ts in per_shard), 6), "node": i["node"][:12]}
                           for k, i in enumerate(info)])
