"""Online changes on resident shards (issue 38 §2): ``gallery/add``, ``gallery/update`` and ``gallery/remove`` on a
local server whose blocks live in 2 Ray actors (a local Ray, every port on 127.0.0.1), and an enrolment of a new
block made by another process in the store, while a client identifies in a loop over real loopback HTTP: 0 errors,
every answer the gallery's before or after a change (never a mix), the new block placed on the last shard, and
after all changes every answer equal to the in-process local server's on the same store, also after the shard
holding the new block restarts with the range it was created with. Toy ring, real SEAL."""
import json
import threading
import time

import httpx
import numpy as np
import pytest

from privface.protocols.hers.messages import Query
from privface.scale import NpySource, enrol
from privface.scale.ident import KeyRole, LocalRole
from privface.scale.lifecycle import add, list_ids
from privface.scale.sources import ArraySource
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.hers import IdentService
from privface.service.clients.hers import IdentClient
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore

N, DIM, TAU, MORE = 1500, 32, 0.9, 600  # toy ring: 1024 slots → 2 blocks; MORE makes a third


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.slow
def test_changes_reach_the_shards_while_a_client_identifies(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    rng = np.random.default_rng(38)
    x = _unit(rng.standard_normal((N, DIM)))
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = f"sqlite:///{tmp_path / 'g.db'}"
    enrol(url, NpySource([tmp_path / "e.npy"]), "hers", tau=TAU, insecure_test_params=True)
    new, more = _unit(rng.standard_normal(DIM)), _unit(rng.standard_normal((MORE, DIM)))
    again = _unit(x[5] + 0.03 * rng.standard_normal(DIM))
    key_store, local_store = SQLiteStore(tmp_path / "g.keys.db"), SQLiteStore(tmp_path / "local.db")
    oracle_store = SQLiteStore(tmp_path / "g.keys.db")
    key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
    internal = key_keys.create("internal")[1]
    key = IdentService(key_store, role="key", insecure_test_params=True)
    answers, errors, stop = [], [], threading.Event()
    local = None
    try:
        with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
            local = IdentService(local_store, role="local", gallery_url=url, key_url=key_url, key_api_key=internal,
                                 ray="auto", shards=2)
            shards = local.party.shards
            assert [(i["lo"], i["hi"]) for i in shards.info()] == [(0, 1), (1, 2)]
            with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
                verify, enrol_key, admin = (local_keys.create(s)[1] for s in ("verify", "enrol", "admin"))

                def loop():
                    with IdentClient(local_url, api_key=verify) as c:
                        while not stop.is_set():
                            try:
                                answers.append((c.identify(new), c.identify(x[5]), c.identify(more[3])))
                            except Exception as e:  # noqa: BLE001 (every error counts)
                                errors.append(repr(e))

                def post(step, body, k):
                    return httpx.post(f"{local_url}/v1/ident/{step}", content=json.dumps(body).encode(),
                                      timeout=120, headers={"content-type": "application/octet-stream",
                                                            "authorization": f"Bearer {k}"})

                def wait(k):
                    n = len(answers)
                    while len(answers) < n + k and not errors:
                        time.sleep(0.05)

                t = threading.Thread(target=loop)
                t.start()
                wait(2)
                r = post("gallery/add", {"ids": ["g.0"], "templates": [new.tolist()]}, enrol_key)
                assert r.status_code == 200 and r.json()["added"] == 1, r.text
                wait(2)
                add(url, ArraySource([f"m.{i}" for i in range(MORE)], more))  # another process: a new block
                wait(2)
                r = post("gallery/update", {"ids": ["e.5"], "templates": [again.tolist()]}, admin)
                assert r.status_code == 200 and r.json()["replaced"] == 1, r.text
                wait(2)
                r = post("gallery/remove", {"ids": ["e.9"]}, admin)
                assert r.status_code == 200, r.text
                wait(2)
                stop.set()
                t.join()
                assert [(i["lo"], i["hi"]) for i in shards.info()] == [(0, 1), (1, 3)]  # the new block: last shard
                assert len({i["version"] for i in shards.info()}) == 1
                oracle = LocalRole(url, KeyRole(oracle_store, insecure_test_params=True))
                probes = [x[5], x[9], new, again, more[0], more[-1]] + [x[i] for i in rng.integers(0, N, 6)]
                probes += [_unit(p + 0.05 * rng.standard_normal(DIM)) for p in probes[:6]]
                with IdentClient(local_url, api_key=verify) as c:
                    for p in probes:
                        want = oracle.identify(Query(np.asarray(p, "<f8").tobytes()).to_bytes()).subject_id
                        assert c.identify(p) == want
                    assert c.identify(x[9]) is None and c.identify(more[0]) == "m.0"
                    # the last shard restarts (as after node loss) with the range it was created with: it loads the
                    # served version's blocks itself at the next identification, or the client gets a 503
                    pid = shards.info()[1]["pid"]
                    ray.kill(shards.shards[1], no_restart=False)
                    deadline, got = time.monotonic() + 60, None
                    while time.monotonic() < deadline:  # the kill is asynchronous: wait for the new actor first
                        try:
                            if shards.info()[1]["pid"] != pid:
                                break
                        except ray.exceptions.RayError:  # dead, or restarting
                            pass
                        time.sleep(0.5)
                    while time.monotonic() < deadline and got is None:
                        try:
                            got = c.identify(more[-1])
                        except Exception as e:  # noqa: BLE001
                            assert "503" in str(e) or "restarting" in str(e), e
                            time.sleep(1)
                    assert got == f"m.{MORE - 1}" and shards.info()[1]["pid"] != pid
                    assert [(i["lo"], i["hi"]) for i in shards.info()] == [(0, 1), (1, 3)]
                    for p in probes:
                        want = oracle.identify(Query(np.asarray(p, "<f8").tobytes()).to_bytes()).subject_id
                        assert c.identify(p) == want
    finally:
        stop.set()
        if local is not None:
            local.party.shards.close()
        ray.shutdown()
        for s in (key_store, local_store, oracle_store):
            s.close()
    assert errors == []
    firsts = [a for a, _, _ in answers]
    cut = firsts.index("g.0")
    assert firsts[:cut] == [None] * cut and firsts[cut:] == ["g.0"] * (len(firsts) - cut)
    assert [b for _, b, _ in answers] == ["e.5"] * len(answers)  # found throughout, before and after its update
    thirds = [c for _, _, c in answers]
    cut = thirds.index("m.3")
    assert thirds[:cut] == [None] * cut and thirds[cut:] == ["m.3"] * (len(thirds) - cut)
    assert "e.9" not in list_ids(url) and list_ids(url)[-1] == "e.5"
