"""Resident gallery shards behind ``privface serve --protocol ident --role local --ray`` (issue 38 §1, §3).

A 3-node Ray test cluster (``ray.cluster_utils.Cluster`` in ``tests.helpers.ray_cluster``: three raylets on this
machine, one CPU each, every port on 127.0.0.1), a toy-ring hers gallery of 2^12 templates (4 blocks) in
PostgreSQL when CI gives one (``PRIVFACE_TEST_PG_URL``), else in a SQLite file all three nodes share; the key
server in this process, the local server a real ``privface serve`` child with 2 resident shards. Its answers
over HTTP equal the in-process local server's; then a node holding a shard is killed during a loop of
identifications: every answer is the in-process one or a 503 with Retry-After (never a wrong answer), and a
correct answer comes back within 60 s.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from privface.errors import UnavailableError
from privface.protocols.hers.messages import Query, Result
from privface.scale import NpySource, enrol
from privface.scale.ident import KeyRole, LocalRole
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.hers import IdentService
from privface.service.launch import serve_in_thread, serve_subprocess
from privface.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")
N, DIM, TAU = 1 << 12, 64, 0.7
RECOVERY_S, LOOP_S = 60.0, 150.0


class _Flaky:
    name, scopes, first_steps, steps = "flaky", {"go": "verify"}, ("go",), ("go",)
    max_body = {"go": 64}

    def handle(self, step, body, state):
        raise UnavailableError("a shard of the gallery is restarting", 12.5)


def test_unavailable_is_503_with_retry_after(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    with serve_in_thread(create_app(store, [_Flaky()])) as url:
        r = httpx.post(f"{url}/v1/flaky/go", content=b"x", headers={"content-type": "application/octet-stream"})
    store.close()
    assert r.status_code == 503 and r.headers["retry-after"] == "13" and r.json()["type"] == "UnavailableError"


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                pass
    return out


def _listening_off_loopback(pids: set[int]) -> list[str]:
    """Listening TCP sockets of these processes bound elsewhere than loopback (127.0.0.1, also IPv4-mapped)."""
    lines = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    mine = [line for line in lines if {int(p) for p in re.findall(r"pid=(\d+)", line)} & pids]
    assert mine, "no listening socket of the cluster found (ss -ltnp)"
    return [line for line in mine if line.split()[3].rsplit(":", 1)[0] not in ("127.0.0.1", "[::ffff:127.0.0.1]")]


def _read_json(proc) -> dict:
    """The helper's next JSON line (Ray prints its own notes on the same stdout)."""
    for line in proc.stdout:
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError("the Ray test cluster stopped")


def _identify(url: str, probe: np.ndarray) -> tuple[int, str | None, str | None]:
    r = httpx.post(f"{url}/v1/ident/identify", content=Query(np.asarray(probe, "<f8").tobytes()).to_bytes(),
                   headers={"content-type": "application/octet-stream"}, timeout=300)
    if r.status_code != 200:
        return r.status_code, r.headers.get("retry-after"), None
    return 200, None, Result.from_bytes(r.content).subject_id


@pytest.mark.slow
def test_resident_shards_answer_as_one_process_and_survive_node_loss(tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every Ray port on 127.0.0.1
    monkeypatch.setenv("RAY_worker_niceness", "0")
    rng = np.random.default_rng(38)
    x = rng.standard_normal((N, DIM))
    np.save(tmp_path / "faces.npy", x)
    name = f"r{secrets.token_hex(6)}"
    gallery = PG_URL or f"sqlite:///{tmp_path / 'gallery.db'}"
    keys_url = f"sqlite:///{tmp_path / 'keys.db'}"
    enrol(gallery, NpySource([tmp_path / "faces.npy"]), "hers", key_store_url=keys_url, tau=TAU,
          insecure_test_params=True, name=name)
    key_store = SQLiteStore(tmp_path / "keys.db")
    in_process = LocalRole(gallery, KeyRole(key_store, name, insecure_test_params=True), name)

    def want(probe):
        return in_process.identify(Query(np.asarray(probe, "<f8").tobytes()).to_bytes()).subject_id

    probes = [x[i] + 0.05 * rng.standard_normal(DIM) for i in rng.integers(0, N, 40)]
    probes += [rng.standard_normal(DIM) for _ in range(10)]  # strangers: rejected
    expected = [want(p) for p in probes]
    assert sum(e is not None for e in expected) >= 35 and expected[-10:] == [None] * 10

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    cluster = subprocess.Popen([sys.executable, "-m", "tests.helpers.ray_cluster", "3"], cwd=ROOT, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    serving: list = []
    try:
        address = _read_json(cluster)["address"]
        assert address.startswith("127.0.0.1:")
        key_keys = ApiKeys(key_store)
        internal = key_keys.create("internal", name="local server")[1]
        key = IdentService(key_store, role="key", gallery_name=name, insecure_test_params=True)
        with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url, \
                serve_subprocess("ident", f"sqlite:///{tmp_path / 'local.db'}", [
                    "--role", "local", "--gallery", gallery, "--gallery-name", name, "--key-url", key_url,
                    "--key-api-key", internal, "--ray", address, "--shards", "2", "--rate-limit", "0",
                    "--lockout-failures", "0"], start_timeout=300, processes=serving) as url:
            assert [_identify(url, p)[2] for p in probes] == expected  # identical to the in-process server
            pids = _descendants(cluster.pid) | _descendants(serving[0].pid)
            assert _listening_off_loopback(pids) == []

            cluster.stdin.write("kill\n")
            cluster.stdin.flush()
            killed = _read_json(cluster)
            t_kill = time.monotonic()
            assert killed["killed"] in {n for b in killed["bundles"].values() for n in b.values()}
            answers, recovered, wrong, unavailable = 0, None, [], 0
            while time.monotonic() - t_kill < LOOP_S and answers < 300:
                i = answers % len(probes)
                status, retry_after, got = _identify(url, probes[i])
                answers += 1
                if status == 503:
                    assert retry_after is not None and int(retry_after) >= 1
                    unavailable += 1
                    time.sleep(1)
                    continue
                assert status == 200, status
                if got != expected[i]:
                    wrong.append((i, got, expected[i]))
                if recovered is None and unavailable:
                    recovered = time.monotonic() - t_kill
                if recovered is not None and answers >= 2 * len(probes) + unavailable:
                    break
            assert wrong == []
            assert unavailable == 0 or (recovered is not None and recovered <= RECOVERY_S), (unavailable, recovered)
            assert [_identify(url, p)[2] for p in probes] == expected  # after the restart: every answer again
            assert _listening_off_loopback(_descendants(cluster.pid) | _descendants(serving[0].pid)) == []
            print(json.dumps({"test": "resident-shards-node-loss", "n": N, "nodes": 3, "shards": 2,
                              "store": "postgresql" if PG_URL else "sqlite", "identifications": answers,
                              "unavailable_503": unavailable, "wrong": len(wrong),
                              "recovery_s": None if recovered is None else round(recovered, 1)}))
    finally:
        if cluster.poll() is None:
            cluster.stdin.write("quit\n")
            cluster.stdin.flush()
            try:
                cluster.wait(120)
            except subprocess.TimeoutExpired:
                cluster.kill()
        key_store.close()


def test_shards_answering_for_other_blocks_give_no_answer():
    from privface.protocols.hers.scheme import CKKSScores
    from privface.scale.resident import ResidentLocalServer, ShardView

    server = ResidentLocalServer.__new__(ResidentLocalServer)
    server.scheme = None
    view = ShardView(server, "v", [(0, 2), (2, 3)], [1024, 1024, 7], [])

    def part(lo, hi, counts):
        return lo, hi, CKKSScores(np.zeros((len(counts), 1, 2, 1, 4), np.uint64), counts), 0.0

    for parts in ([part(0, 2, [1024, 1024]), part(0, 2, [1024, 1024])],  # a restarted shard with another range
                  [part(0, 2, [1024, 1024]), part(2, 3, [1024])]):  # a block of another size
        with pytest.raises(UnavailableError):
            server._combine(parts, view)


def test_serve_ray_options_are_checked():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    for args, message in ((["--role", "key", "--ray", "local"], "--ray and --shards apply to"),
                          (["--role", "local", "--shards", "2", "--key-url", "http://127.0.0.1:9"], "needs --ray")):
        r = subprocess.run([sys.executable, "-m", "privface.cli", "serve", "--protocol", "ident", "--db",
                            "sqlite:///:memory:", *args], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode != 0 and message in r.stderr, r.stderr[-500:]


def test_a_growing_gallery_stays_spread_over_the_shards():
    """New blocks extend the last range until it holds two blocks more than the least loaded shard; then the
    boundaries are drawn evenly again, each moving by at most one block (issue 38 §2: new blocks on the least
    loaded shard, not piled on the last)."""
    from privface.scale.resident import block_ranges, grown_ranges

    assert grown_ranges([(0, 1), (1, 2)], 3) == [(0, 1), (1, 3)]  # a tie: no shard reloads anything
    ranges = block_ranges(256, 2)
    for nblocks in range(257, 600):
        new = grown_ranges(ranges, nblocks)
        sizes = [hi - lo for lo, hi in new]
        assert new[0][0] == 0 and new[-1][1] == nblocks and all(a[1] == b[0] for a, b in zip(new, new[1:]))
        assert max(sizes) - min(sizes) <= 1 + (new[:-1] == ranges[:-1])
        assert all(abs(a[1] - b[1]) <= 1 for a, b in zip(new[:-1], ranges[:-1]))  # a boundary moves ≤ 1 block
        ranges = new
    three = block_ranges(100, 3)
    for nblocks in range(101, 400):
        three = grown_ranges(three, nblocks)
        assert max(hi - lo for lo, hi in three) - min(hi - lo for lo, hi in three) <= 2
