"""`privface bench cluster`: issue 38's node-loss run — resident gallery shards on a multi-node Ray test cluster,
one node killed during a loop of identifications and enrolments (issue 38 §3, "Done when").

Why a bench and not only a test: the run's figures (recovery time, identifications served) are measurements, and
the project measures with ``privface bench`` commands, never with timed unit tests; the same code runs at toy size
in ``tests/bench/test_cluster.py`` (``--runslow``), where it must report 0 wrong answers and 0 lost identities.

The run, with every process on this machine and every port on 127.0.0.1:

1. a gallery of ``n`` seeded synthetic templates (hers or cryptomask) enrolled into the given store (PostgreSQL:
   every node reads it) under a fresh name, its key store a SQLite file;
2. ``probes`` probes (90 % a gallery member with noise, 10 % strangers) answered by the server in one process — hers:
   ``scale.ident.LocalRole`` with every block in this process; cryptomask: ``serve --protocol cryptomask --role cs``
   without ``--ray``, asked over HTTP by the verifier (``VerifierClient``, its 1-bit answer) — the reference;
3. ``ray.cluster_utils.Cluster`` with ``nodes`` raylets of one CPU each (``bench.ray_cluster``, its own process), and
   the servers as ``privface serve`` children with ``--ray ADDRESS --shards K`` (hers: the key server and the local
   server; cryptomask: the CS); every probe over HTTP: ``probes_identical`` when every answer equals the reference;
4. ``duration`` seconds of a client loop: for hers an enrolment (``gallery/add`` of a new random identity) every
   ``ENROL_EVERY``-th step (cryptomask too: its CS's ``gallery/add``, the shards staging the grown gallery),
   else an identification of a reference probe or of an identity enrolled in the loop (its
   template with noise); ``kill_at`` seconds in, a node holding a shard is killed ungracefully. Every 200 answer is
   checked: ``wrong_answers`` counts those that differ from the expected id; a 503 (with Retry-After) is counted
   as ``unavailable``; ``recovery_s`` is the time from the kill to the first correct answer of an identification
   started after it;
5. after the loop, every identity enrolled in it must be listed by the gallery and identified by its own probe
   (``lost_identities`` counts those that are not), and ``recheck`` reference probes must still answer as before.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from ..errors import PrivfaceError

ENROL_EVERY = 4
"""One step in this many of the loop is an enrolment."""
NOISE = 0.05
"""A member probe: its template plus this much Gaussian noise per coordinate (cosine ≈ 0.9987 at d = 128)."""
TAU = 0.7
"""Decision threshold (cosine): far above a stranger's best score among 2^21 random templates at d = 128 (≈ 0.45),
far below a member probe's (≈ 0.998)."""


def _json_line(proc) -> dict:
    for line in proc.stdout:
        if line.startswith("{"):
            return json.loads(line)
    raise PrivfaceError("the Ray test cluster stopped")


class _Ident:
    """hers / idface through ``serve --protocol ident``: the client's identify and enrol over HTTP."""

    def __init__(self, url: str) -> None:
        self.url, self.http = url, httpx.Client(timeout=900)

    def identify(self, probe: np.ndarray) -> tuple[int, str | None]:
        from ..protocols.hers.messages import Query, Result

        r = self.http.post(f"{self.url}/v1/ident/identify",
                           content=Query(np.asarray(probe, "<f8").tobytes()).to_bytes(),
                           headers={"content-type": "application/octet-stream"})
        if r.status_code != 200:
            return r.status_code, None
        return 200, Result.from_bytes(r.content).subject_id

    def enrol(self, sid: str, template: np.ndarray) -> tuple[int, str]:
        body = json.dumps({"ids": [sid], "templates": [[float(v) for v in template]]}).encode()
        r = self.http.post(f"{self.url}/v1/ident/gallery/add", content=body,
                           headers={"content-type": "application/octet-stream"})
        return r.status_code, r.text[:300]

    @staticmethod
    def expect(sid: str) -> str:
        """The answer an identification of the enrolled ``sid`` should give."""
        return sid

    def close(self) -> None:
        self.http.close()


class _CryptoMask:
    """cryptomask through ``serve --protocol cryptomask --role cs``: the verifier's 1-bit answer over HTTP (its sk_v
    from the key store); enrolment through the CS's ``gallery/add`` (the verifier takes the grown layout)."""

    def __init__(self, url: str, keys_url: str, name: str) -> None:
        from ..service.clients.cryptomask import VerifierClient

        self.client = VerifierClient(url, keys_url, name=name, timeout=900)
        self.url, self.http = url, httpx.Client(timeout=900)

    def enrol(self, sid: str, template: np.ndarray) -> tuple[int, str]:
        body = json.dumps({"ids": [sid], "templates": [[float(v) for v in template]]}).encode()
        r = self.http.post(f"{self.url}/v1/cryptomask/gallery/add", content=body,
                           headers={"content-type": "application/octet-stream"})
        return r.status_code, r.text[:300]

    @staticmethod
    def expect(sid: str) -> bool:
        """The answer an identification of an enrolled identity should give (the verifier learns one bit)."""
        return True

    def identify(self, probe: np.ndarray) -> tuple[int, bool | None]:
        from ..service.client import ServiceError

        try:
            return 200, bool(self.client.identify(probe)["match"])
        except ServiceError as e:
            return e.status or 599, None

    def close(self) -> None:
        self.client.close()
        self.http.close()


def bench_cluster(scheme: str, n: int, *, store: str, dim: int = 128, nodes: int = 3, shards: int = 2,
                  probes: int = 200, duration: float = 300.0, kill_at: float = 60.0, recheck: int = 50,
                  insecure_test_params: bool = False, seed: int = 38, progress: bool = False) -> dict:
    """The node-loss run (module docstring) → its JSON row."""
    from ..scale import NpySource, enrol
    from ..scale.ident import KeyRole, LocalRole
    from ..scale.lifecycle import list_ids
    from ..service.launch import serve_subprocess
    from ..store.sqlite import SQLiteStore

    if scheme not in ("hers", "cryptomask"):
        raise PrivfaceError("bench cluster runs --scheme hers or cryptomask")
    cm = scheme == "cryptomask"
    if n < 1 or probes < 10 or duration <= kill_at or shards >= nodes or shards < 1:
        raise PrivfaceError("bench cluster needs --n ≥ 1, --probes ≥ 10, a kill inside the loop, and fewer "
                            "--shards than --nodes (a lost shard needs a free node's CPU to restart on)")

    def say(what: str) -> None:
        if progress:
            print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)

    rng = np.random.default_rng(seed)
    row: dict = {"bench": "cluster", "scheme": scheme, "n": n, "dim": dim, "nodes": nodes, "shards": shards,
                 "store": store.split(":", 1)[0], "insecure_test_params": insecure_test_params}
    name = f"cluster{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="privface-bench-cluster-") as tmp:
        x = np.empty((n, dim), dtype=np.float32)
        for lo in range(0, n, 1 << 16):
            x[lo:lo + (1 << 16)] = rng.standard_normal((min(n, lo + (1 << 16)) - lo, dim), dtype=np.float32)
        np.save(Path(tmp) / "g.npy", x)
        keys_url = f"sqlite:///{tmp}/keys.db"
        say(f"enrolling {n} templates into {row['store']}")
        t = time.perf_counter()
        enrol(store, NpySource([Path(tmp) / "g.npy"]), scheme, key_store_url=keys_url, tau=TAU,
              insecure_test_params=insecure_test_params, name=name)
        row["enrol_s"] = round(time.perf_counter() - t, 1)
        members = rng.integers(0, n, probes - probes // 10)
        P = [x[i] + NOISE * rng.standard_normal(dim) for i in members]
        P += [rng.standard_normal(dim) for _ in range(probes // 10)]  # strangers
        del x

        say("the reference: every probe in process")
        t = time.perf_counter()
        if cm:  # the CS in one process (every block in it), over HTTP as the sharded one
            with serve_subprocess("cryptomask", f"sqlite:///{tmp}/one.db", [
                    "--role", "cs", "--gallery", store, "--gallery-name", name, "--rate-limit", "0"],
                    start_timeout=3600) as url:
                t = time.perf_counter()
                ref_client = _CryptoMask(url, keys_url, name)
                answers = [ref_client.identify(p) for p in P]
                ref_client.close()
            if any(status != 200 for status, _ in answers):
                raise PrivfaceError("the in-process CS did not answer every probe")
            expected = [bit for _, bit in answers]
        else:
            from ..protocols.hers.messages import Query

            key_store = SQLiteStore(Path(tmp) / "keys.db")
            ref = LocalRole(store, KeyRole(key_store, name, insecure_test_params=insecure_test_params), name)
            t = time.perf_counter()
            expected = [ref.identify(Query(np.asarray(p, "<f8").tobytes()).to_bytes()).subject_id for p in P]
            del ref
            gc.collect()  # its blocks (5 GB at 2^20) before the shards load theirs
            key_store.close()
        row["in_process_s_per_identification"] = round((time.perf_counter() - t) / len(P), 3)
        row["probes_accepted"] = sum(e not in (None, False) for e in expected)

        with _test_cluster(nodes) as (cluster, address):
            say(f"cluster at {address}; starting the servers with {shards} shards")
            t = time.perf_counter()
            with _servers(cm, store, name, keys_url, tmp, address, shards, insecure_test_params) as url:
                row["sharded_start_s"] = round(time.perf_counter() - t, 1)  # every shard loaded
                client = _CryptoMask(url, keys_url, name) if cm else _Ident(url)
                say("every probe over HTTP")
                t = time.perf_counter()
                got = [client.identify(p) for p in P]
                row["sharded_s_per_identification"] = round((time.perf_counter() - t) / len(P), 3)
                row["probes_identical"] = got == [(200, e) for e in expected]
                row["probes_differing"] = sum(g != (200, e) for g, e in zip(got, expected))
                row.update(_loop(client, cluster, P, expected, dim, rng, duration, kill_at, say))
                enrolled = row.pop("_enrolled")
                say("after the loop: every identity enrolled, and a recheck of the reference probes")
                ids = set(list_ids(store, name)) if enrolled else set()
                lost = [sid for sid, v in enrolled.items()
                        if sid not in ids
                        or client.identify(v + NOISE * rng.standard_normal(dim)) != (200, client.expect(sid))]
                row["lost_identities"] = len(lost)
                pick = random.Random(seed).sample(range(len(P)), min(recheck, len(P)))
                row["recheck_identical"] = all(client.identify(P[i]) == (200, expected[i]) for i in pick)
                client.close()
    row["load_average"] = [round(v, 2) for v in os.getloadavg()]
    return row


@contextlib.contextmanager
def _servers(cm: bool, store: str, name: str, keys_url: str, tmp: str, address: str, shards: int,
             insecure_test_params: bool):
    """The sharded server's URL: the cryptomask CS, or the ident key server and local server."""
    from ..service.launch import serve_subprocess

    ray = ["--ray", address, "--shards", str(shards), "--rate-limit", "0", "--max-requests-per-caller", "1000"]
    if cm:
        with serve_subprocess("cryptomask", f"sqlite:///{tmp}/cs.db", [
                "--role", "cs", "--gallery", store, "--gallery-name", name, *ray], start_timeout=3600) as url:
            yield url
        return
    key_opts = ["--role", "key", "--gallery-name", name, "--key-workers", "1"]
    key_opts += ["--insecure-test-params"] if insecure_test_params else []
    with serve_subprocess("ident", keys_url, key_opts, start_timeout=300) as key_url, \
            serve_subprocess("ident", f"sqlite:///{tmp}/local.db", [
                "--role", "local", "--gallery", store, "--gallery-name", name, "--key-url", key_url,
                "--lockout-failures", "0", *ray], start_timeout=3600) as url:
        yield url


def _loop(client, cluster, P, expected, dim, rng, duration, kill_at, say, enrol: bool = True) -> dict:
    """Step 4 of the module docstring → the loop's counts (and ``_enrolled``: id → template)."""
    enrolled: dict[str, np.ndarray] = {}
    counts = {"identifications": 0, "enrolments": 0, "wrong_answers": 0, "unavailable_503": 0, "other_errors": 0}
    t0, t_kill, recovered, step = time.monotonic(), None, None, 0
    while time.monotonic() - t0 < duration:
        if t_kill is None and time.monotonic() - t0 >= kill_at:
            cluster.stdin.write("kill\n")
            cluster.stdin.flush()
            killed = _json_line(cluster)
            t_kill = time.monotonic()
            say(f"killed node {killed['killed'][:12]}")
        step += 1
        if enrol and step % ENROL_EVERY == 0:
            sid = f"loop.{len(enrolled)}"
            v = rng.standard_normal(dim)
            status, text = client.enrol(sid, v)
            if status == 200:
                enrolled[sid] = v
                counts["enrolments"] += 1
            elif status == 503:
                counts["unavailable_503"] += 1
                time.sleep(1)
            else:
                counts["other_errors"] += 1
                say(f"enrolment {sid}: {status} {text}")
            continue
        if enrolled and rng.random() < 0.3:
            sid = list(enrolled)[int(rng.integers(len(enrolled)))]
            probe, want = enrolled[sid] + NOISE * rng.standard_normal(dim), client.expect(sid)
        else:
            i = int(rng.integers(len(P)))
            probe, want = P[i], expected[i]
        started = time.monotonic()
        status, who = client.identify(probe)
        counts["identifications"] += 1
        if status == 503:
            counts["unavailable_503"] += 1
            time.sleep(1)
        elif status != 200:
            counts["other_errors"] += 1
        elif who != want:
            counts["wrong_answers"] += 1
            say(f"WRONG: {who!r} for {want!r}")
        elif t_kill is not None and recovered is None and started >= t_kill:
            recovered = time.monotonic() - t_kill
            say(f"first correct answer {recovered:.1f} s after the kill")
    return {**counts, "duration_s": round(time.monotonic() - t0, 1), "killed_at_s": kill_at,
            "recovery_s": None if recovered is None else round(recovered, 1), "_enrolled": enrolled}


@contextlib.contextmanager
def _test_cluster(nodes: int):
    """``bench.ray_cluster`` in a child process: (its Popen, the address on 127.0.0.1); stopped on exit."""
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_worker_niceness="0")
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    cluster = subprocess.Popen([sys.executable, "-m", "privface.bench.ray_cluster", str(nodes)], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        address = _json_line(cluster)["address"]
        if not address.startswith("127.0.0.1:"):
            raise PrivfaceError(f"the Ray test cluster is not on loopback: {address}")
        yield cluster, address
    finally:
        if cluster.poll() is None:
            cluster.stdin.write("quit\n")
            cluster.stdin.flush()
            try:
                cluster.wait(180)
            except subprocess.TimeoutExpired:
                cluster.kill()


def _rss(pid: int) -> int | None:
    """A process's resident set in bytes (every node of the test cluster is on this machine)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def bench_spread(n: int, *, store: str, dim: int = 128, nodes: int = 3, shards: int = 3, probes: int = 20,
                 insecure_test_params: bool = False, seed: int = 38, progress: bool = False) -> dict:
    """A hers gallery of ``n`` templates resident on ``shards`` shards of a ``nodes``-node test cluster (issue 38,
    "Done when": 2^21 on 3 nodes): each node's resident bytes (the shards' block arrays, and their processes' RSS)
    and ``probes`` identifications (member probes with noise and strangers) against the plaintext answer (the id of
    the best cosine if it reaches τ) — no in-process reference: the gallery need not fit one process."""
    from ..scale import Gallery, NpySource, enrol, key_server
    from ..scale.actors import init_ray
    from ..scale.resident import ResidentLocalServer
    from ..scale.sources import unit

    def say(what: str) -> None:
        if progress:
            print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)

    rng = np.random.default_rng(seed)
    row: dict = {"bench": "cluster-spread", "scheme": "hers", "n": n, "dim": dim, "nodes": nodes, "shards": shards,
                 "store": store.split(":", 1)[0], "insecure_test_params": insecure_test_params}
    name = f"spread{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="privface-bench-spread-") as tmp:
        x = np.empty((n, dim), dtype=np.float32)
        for lo in range(0, n, 1 << 16):
            x[lo:lo + (1 << 16)] = rng.standard_normal((min(n, lo + (1 << 16)) - lo, dim), dtype=np.float32)
        np.save(Path(tmp) / "g.npy", x)
        keys_url = f"sqlite:///{tmp}/keys.db"
        say(f"enrolling {n} templates into {row['store']}")
        t = time.perf_counter()
        enrol(store, NpySource([Path(tmp) / "g.npy"]), "hers", key_store_url=keys_url, tau=TAU,
              insecure_test_params=insecure_test_params, name=name)
        row["enrol_s"] = round(time.perf_counter() - t, 1)
        P = [x[i] + NOISE * rng.standard_normal(dim) for i in rng.integers(0, n, probes - probes // 4)]
        P += [rng.standard_normal(dim) for _ in range(probes // 4)]
        Y = unit(np.asarray(P))
        best, score = np.zeros(len(P), dtype=np.int64), np.full(len(P), -np.inf)
        for lo in range(0, n, 1 << 16):
            s = unit(x[lo:lo + (1 << 16)].astype(np.float64)) @ Y.T
            j = np.argmax(s, axis=0)
            better = s[j, np.arange(len(P))] > score
            best[better], score[better] = lo + j[better], s[j, np.arange(len(P))][better]
        expected = [f"g.{b}" if v >= TAU else None for b, v in zip(best, score)]
        del x
        with _test_cluster(nodes) as (_, address):
            ray = init_ray(address)
            try:
                gallery = Gallery(store, name)
                say(f"starting {shards} shards")
                t = time.perf_counter()
                local = ResidentLocalServer(gallery, address=address, shards=shards)
                row["load_s"] = round(time.perf_counter() - t, 1)
                info = local.info()
                per_node: dict = {}
                for i in info:
                    node = per_node.setdefault(i["node"][:12], {"shards": 0, "resident_bytes": 0, "rss_bytes": 0})
                    node["shards"] += 1
                    node["resident_bytes"] += i["resident_bytes"]
                    node["rss_bytes"] += _rss(i["pid"]) or 0
                row["gallery_resident_bytes"] = sum(i["resident_bytes"] for i in info)
                row["per_node"] = per_node
                row["shard_load_s"] = [i["load_s"] for i in info]
                key = key_server(gallery, keys_url)
                say("identifying")
                t = time.perf_counter()
                got = [local.resolve(key.decide(local.identify_request(unit(p.reshape(1, -1))))) for p in P]
                row["identify_s"] = round((time.perf_counter() - t) / len(P), 3)
                row["answers_correct"] = got == expected
                row["probes"], row["probes_accepted"] = len(P), sum(e is not None for e in expected)
                local.close()
            finally:
                ray.shutdown()
    row["load_average"] = [round(v, 2) for v in os.getloadavg()]
    return row


def format_table(row: dict) -> str:
    return "\n".join(f"{k:32} {v}" for k, v in row.items())
