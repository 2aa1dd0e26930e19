"""A gallery after enrolment (issue 37 item 3, as far as it goes): ``gallery info | list | remove``.

``remove`` withdraws identities from the answers (the packed ciphertexts keep the template: scale.lifecycle says
why); these tests check that it does that for hers, idface-ckks and idface-paillier, atomically per block, online
over real loopback HTTP (a client identifying in a loop sees every answer before or after, never an error), across
kill -9 of `privface gallery remove`, and that the store's files (db + -wal) keep no superseded commit record
naming a withdrawn id. Toy parameters (insecure_test_params), real SEAL / Paillier.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from privface.scale import NpySource, enrol, identify
from privface.scale import layout as lay
from privface.scale.layout import GalleryError
from privface.scale.lifecycle import info, list_ids, withdraw
from tests.helpers.erasure import after_lease_expiry, kill_runs

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
TAU = {"hers": 0.5, "idface-ckks": 10.0, "idface-paillier": 10.0}


def _gallery(tmp_path, scheme, n=40, dim=128, seed=3):
    x = np.random.default_rng(seed).standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([tmp_path / "e.npy"]), scheme, tau=TAU[scheme], insecure_test_params=True)
    return url, x


def _file_bytes(tmp_path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("g.db*")))


@pytest.mark.parametrize("scheme", sorted(TAU))
def test_withdrawn_ids_are_not_answered_and_not_left_in_the_files(tmp_path, scheme):
    url, x = _gallery(tmp_path, scheme)
    assert list_ids(url) == [f"e.{i}" for i in range(40)]
    before = info(url)
    assert (before["scheme"], before["identities"], before["withdrawn"], before["tau"]) == (scheme, 40, 0, TAU[scheme])
    report = withdraw(url, ["e.7", "e.31"])
    assert report["withdrawn"] == ["e.7", "e.31"] and report["erased"] is False and report["store_purged"]
    assert list_ids(url) == [f"e.{i}" for i in range(40) if i not in (7, 31)]
    after = info(url)
    assert (after["identities"], after["withdrawn"], after["generation"]) == (38, 2, 1)
    for i in (7, 31):
        assert identify(x[i], url)["id"] is None
    for i in (0, 8, 39):
        assert identify(x[i], url)["id"] == f"e.{i}"
    files = _file_bytes(tmp_path)
    assert b'"e.7"' not in files and b'"e.31"' not in files and b'"e.8"' in files
    assert not (tmp_path / "g.db-wal").exists() or (tmp_path / "g.db-wal").stat().st_size == 0


def _records(tmp_path):
    import sqlite3

    with sqlite3.connect(tmp_path / "g.db") as db:
        return db.execute("SELECT protocol, subject_id, record FROM records WHERE protocol = 'gallery'").fetchall()


def test_withdraw_finds_ids_and_counts_what_another_process_changed(tmp_path):
    """``withdraw`` parses only the commit records whose bytes changed since it last read them or may name a
    wanted id (``lifecycle._find``): ids that prefix others, hold a quote or non-ASCII are still found, and a
    change another process made in between is counted (τ's N is the gallery's true size)."""
    from privface.scale.sources import ArraySource

    ids = [f"p{i}" for i in range(2100)]  # three blocks of the toy ring's 1 024 slots
    ids[5], ids[1500] = 'q"uote', "José"  # τ by default: τ(N) names N
    x = np.random.default_rng(4).standard_normal((len(ids), 128)).astype(np.float32)
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, ArraySource(ids, x / np.linalg.norm(x, axis=1, keepdims=True)), "hers",
          insecure_test_params=True)
    assert withdraw(url, ["p10"])["tau_n"] == 2099
    subprocess.run([sys.executable, "-c", "from privface.scale.lifecycle import withdraw; "
                    f"withdraw({url!r}, ['p2000'])"], env=ENV, check=True, timeout=120)
    report = withdraw(url, ['q"uote', "José", "p1"])
    left = [i for i in ids if i not in ("p10", "p2000", 'q"uote', "José", "p1")]
    assert report["tau_n"] == 2095 and list_ids(url) == left
    with pytest.raises(GalleryError, match="not in gallery 'default': p10"):
        withdraw(url, ["p10"])


def test_unknown_ids_are_refused_without_a_change(tmp_path):
    url, _ = _gallery(tmp_path, "hers", n=5)
    records = _records(tmp_path)
    with pytest.raises(GalleryError, match="not in gallery 'default': nobody"):
        withdraw(url, ["e.1", "nobody"])
    assert _records(tmp_path) == records and list_ids(url)[1] == "e.1"
    withdraw(url, ["e.1"])
    with pytest.raises(GalleryError, match="not in gallery"):  # twice: it is gone
        withdraw(url, ["e.1"])


def test_cli_info_list_remove(tmp_path):
    url, _ = _gallery(tmp_path, "hers", n=6)

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", *args], env=ENV, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r

    assert json.loads(cli("list", "--gallery", url, "--json").stdout) == [f"e.{i}" for i in range(6)]
    r = cli("remove", "--gallery", url, "e.2", "e.4", "--withdraw-only", "--json")
    assert json.loads(r.stdout)["withdrawn"] == ["e.2", "e.4"] and "NOT erased" in r.stderr
    assert cli("list", "--gallery", url).stdout.split() == ["e.0", "e.1", "e.3", "e.5"]
    got = json.loads(cli("info", "--gallery", url, "--json").stdout)
    assert (got["identities"], got["withdrawn"], got["tau_source"]) == (4, 2, "--tau")


def test_kill_9_during_remove_leaves_each_block_withdrawn_or_not(tmp_path, monkeypatch):
    """hers toy blocks hold 1024: 2100 templates are 3 blocks; the removal touches all three. A `privface gallery
    remove` killed at a random moment (on a fresh copy of the gallery each time) leaves every block with all of its
    withdrawn ids or none, the gallery loads and answers, and a re-run (once the dead process's lease expired)
    finishes the removal."""
    _, x = _gallery(tmp_path, "hers", n=2100, dim=8)
    gone = [f"e.{i}" for i in range(0, 2100, 7)]  # 300 ids in every block

    def check(url, killed):
        left = set(list_ids(url))
        state = []
        for b in range(3):
            block = [i for i in gone if b * 1024 <= int(i[2:]) < (b + 1) * 1024]
            assert all(i in left for i in block) or not any(i in left for i in block), b
            state.append(block[0] not in left)
        rest = [i for i in gone if i in left]
        if rest:
            after_lease_expiry(monkeypatch, lambda: withdraw(url, rest))
        assert not set(gone) & set(list_ids(url)) and len(list_ids(url)) == 1800
        # d = 8: e.7's probe may find another enrolled template above τ, never e.7
        assert identify(x[7], url)["id"] not in gone and identify(x[8], url)["id"] == "e.8"
        return state

    kill_runs(tmp_path, ("g.db", "g.keys.db"), lambda url: ["-m", "privface.cli", "gallery", "remove", "--gallery",
                                                              url, *gone], check, runs=4, delay=(0.5, 2.5))


def test_remove_over_http_while_a_client_identifies(tmp_path):
    """`privface serve --protocol ident` roles in threads (uvicorn on loopback): a client identifies a kept and a
    to-be-removed person in a loop while an admin removes over HTTP; 0 errors, each answer before or after."""
    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.service.bindings.hers import IdentService
    from privface.service.clients.hers import IdentClient
    from privface.service.launch import serve_in_thread
    from privface.store.sqlite import SQLiteStore

    url, x = _gallery(tmp_path, "hers", n=50, dim=64)
    key_store, local_store = SQLiteStore(tmp_path / "g.keys.db"), SQLiteStore(tmp_path / "local.db")
    key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
    internal = key_keys.create("internal", name="local server")[1]
    key = IdentService(key_store, role="key", insecure_test_params=True)
    answers, errors, stop = [], [], threading.Event()
    with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
        local = IdentService(local_store, role="local", gallery_url=url, key_url=key_url, key_api_key=internal)
        with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
            verify, admin = local_keys.create("verify")[1], local_keys.create("admin")[1]

            def loop():
                with IdentClient(local_url, api_key=verify) as c:
                    while not stop.is_set():
                        try:
                            answers.append((c.identify(x[5]), c.identify(x[6])))
                        except Exception as e:  # noqa: BLE001 (every error counts)
                            errors.append(repr(e))

            t = threading.Thread(target=loop)
            t.start()
            while len(answers) < 3:
                time.sleep(0.05)
            post = lambda step, body, k=admin: httpx.post(  # noqa: E731
                f"{local_url}/v1/ident/{step}", content=json.dumps(body).encode(), timeout=60,
                headers={"content-type": "application/octet-stream", "authorization": f"Bearer {k}"})
            assert post("gallery/remove", {"ids": ["e.5"]}, verify).status_code == 403  # admin only
            assert post("gallery/remove", {"ids": ["nobody"]}).status_code == 400
            assert post("gallery/remove", {"ids": "e.5"}).status_code == 400
            r = post("gallery/remove", {"ids": ["e.5"]})
            assert r.status_code == 200 and r.json()["withdrawn"] == ["e.5"] and r.json()["erased"] is True, r.text
            n = len(answers)
            while len(answers) < n + 3:
                time.sleep(0.05)
            stop.set()
            t.join()
            assert post("gallery/list", {}).json()["ids"] == [f"e.{i}" for i in range(50) if i != 5]
            assert post("gallery/info", {}).json()["withdrawn"] == 1
    key_store.close()
    local_store.close()
    assert errors == []
    firsts = [a for a, _ in answers]
    cut = firsts.index(None)
    assert firsts[:cut] == ["e.5"] * cut and firsts[cut:] == [None] * (len(firsts) - cut)  # before, then after
    assert [b for _, b in answers] == ["e.6"] * len(answers)


def test_enrolment_says_what_a_small_idface_gallery_costs():
    """Issue 37 item 4: 20 faces in idface-ckks with the 2048-D lift are one 537 MB block; the output says so and
    what is smaller. A full block gets no note."""
    from privface.scale.gallery import EnrolReport, cost_note, deployment_defaults

    def report(scheme, n, lift, block, cap):
        return EnrolReport(scheme, n, 128, None, "shipped", lift, 1, 1, 0, cap, block, round(block / n, 1), 1.0)

    note = cost_note(report("idface-ckks", 20, 2048, 536870912, 8192 * 11))
    assert "536.9 MB" in note and "26.84 MB each" in note and "--lift 0 or --scheme hers" in note
    assert cost_note(report("hers", 20, None, 16777216, 4096)).startswith("one hers block is 16.8 MB")
    assert cost_note(report("hers", 4000, None, 16777216, 4096)) is None
    assert deployment_defaults("idface-ckks", 128, None, None) == ("shipped", 2048)
    assert deployment_defaults("idface-paillier", 128, "none", 0) == ("none", None)
    assert deployment_defaults("hers", 128, None, None) == ("none", None)


def test_several_photos_per_identity_are_fused_and_refusals_reported(tmp_path, data_root):
    """Issue 37 item 1: `gallery enrol --fuse people/` (one folder per identity) fuses each folder's photos into
    one template; a photo without a face and a file that is no image are refused and listed per identity; the
    fused gallery finds each person from a photo not enrolled (default backend sface: τ 0.5 on its cosines).
    Also `--photo ID=PATH` and ``privface.enrol`` with a dict. hers, toy CKKS, ORL photos."""
    import shutil

    from PIL import Image

    import privface

    orl = data_root / "orl" / "images"
    people = tmp_path / "people"
    for who, s in (("ada", "s1"), ("bob", "s2")):
        (people / who).mkdir(parents=True)
        for k in (1, 2, 3):
            shutil.copy(orl / s / f"{k}.pgm", people / who / f"{k}.pgm")
    Image.new("L", (200, 200), 128).save(people / "ada" / "grey.png")  # no face
    (people / "bob" / "notes.jpg").write_bytes(b"not an image")
    url = f"sqlite:///{tmp_path}/g.db"
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "enrol", "--scheme", "hers", "--gallery", url,
                        "--tau", "0.5", "--insecure-test-params", "--fuse", str(people), "--json"],
                       env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["n"] == 2 and {i: p["used"] for i, p in out["photos"].items()} == {"ada": 3, "bob": 3}
    assert [(Path(f["photo"]).name, f["reason"]) for f in out["photos"]["ada"]["refused"]] == [("grey.png", "no face")]
    assert [Path(f["photo"]).name for f in out["photos"]["bob"]["refused"]] == ["notes.jpg"]
    assert out["photos"]["bob"]["refused"][0]["reason"].startswith("not a readable image")
    for who, s in (("ada", "s1"), ("bob", "s2")):
        assert identify(privface.embed(orl / s / "7.pgm"), url)["id"] == who
    report = privface.enrol(f"sqlite:///{tmp_path}/h.db", {"ada": [orl / "s1" / "1.pgm", orl / "s1" / "2.pgm"],
                                                           "cy": [orl / "s3" / "1.pgm"]}, "hers", tau=0.5,
                            insecure_test_params=True)
    assert report.n == 2 and report.photos == {"ada": {"used": 2, "refused": []}, "cy": {"used": 1, "refused": []}}
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "enrol", "--scheme", "hers", "--gallery",
                        f"sqlite:///{tmp_path}/i.db", "--tau", "0.5", "--insecure-test-params",
                        "--photo", f"eve={people / 'ada' / 'grey.png'}"], env=ENV, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0 and "eve: none of its 1 photos has a usable face" in r.stderr


def _more(tmp_path, n, dim, seed, stem):
    y = np.random.default_rng(seed).standard_normal((n, dim))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    np.save(tmp_path / f"{stem}.npy", y.astype(np.float32))
    return NpySource([tmp_path / f"{stem}.npy"]), y


def _block_records(tmp_path):
    import sqlite3

    with sqlite3.connect(tmp_path / "g.db") as db:
        return sorted(r[0] for r in db.execute("SELECT subject_id FROM records WHERE protocol = 'gallery' AND "
                                               "subject_id LIKE 'default.block.%'"))


@pytest.mark.parametrize("scheme", sorted(TAU))
def test_add_fills_the_last_block_without_the_secret_key_and_update_replaces(tmp_path, scheme):
    from privface.scale.lifecycle import add, update

    url, x = _gallery(tmp_path, scheme)
    src, y = _more(tmp_path, 5, 128, 11, "f")
    report = add(url, src)
    assert (report["added"], report["n"], report["blocks_filled"], report["blocks_written"]) == (5, 45, 1, 1)
    assert list_ids(url) == [f"e.{i}" for i in range(40)] + [f"f.{i}" for i in range(5)]
    for k in (0, 4):
        assert identify(y[k], url)["id"] == f"f.{k}"
    for i in (0, 39):
        assert identify(x[i], url)["id"] == f"e.{i}"
    assert _block_records(tmp_path) == sorted(["default.block.000000.g000001",
                                               *[f"default.block.000000.g000001.part.{p:04d}" for p in range(
                                                   len(_block_records(tmp_path)) - 1)]])  # generation 0 is gone
    with pytest.raises(GalleryError, match="already in gallery"):
        add(url, src)
    src2, z = _more(tmp_path, 3, 128, 12, "e")  # ids e.0, e.1, e.2: new templates for them
    z[2] = x[2] + 0.1 * np.random.default_rng(99).standard_normal(128)  # e.2: a new photo of the same person
    z[2] /= np.linalg.norm(z[2])
    np.save(tmp_path / "e.npy", z.astype(np.float32))
    rep = update(url, NpySource([tmp_path / "e.npy"]))
    assert rep["replaced"] == 3 and rep["n"] == 48
    assert identify(z[0], url)["id"] == "e.0" and identify(z[1], url)["id"] == "e.1"
    assert identify(x[0], url)["id"] is None  # the old template answers nobody (withdrawn, not erased)
    # the old slot of e.2 scores as high as its new one, but S_key leaves withdrawn slots out of its argmax
    assert identify(x[2], url)["id"] == "e.2"
    assert list_ids(url).count("e.0") == 1 and info(url)["identities"] == 45


def test_add_seals_a_block_at_its_noise_bound_and_starts_a_new_one(tmp_path, monkeypatch):
    from privface.scale import schemes
    from privface.scale.lifecycle import add

    url, x = _gallery(tmp_path, "hers", n=30)
    monkeypatch.setattr(schemes.HersGallery, "max_sums", lambda self, settings: 1)
    src, y = _more(tmp_path, 3, 128, 13, "f")
    report = add(url, src)
    assert (report["blocks_sealed"], report["blocks_filled"], report["n"]) == (1, 0, 1024 + 3)
    assert identify(y[2], url)["id"] == "f.2" and identify(x[29], url)["id"] == "e.29"
    assert info(url)["identities"] == 33 and list_ids(url)[-1] == "f.2"


def test_kill_9_during_add_leaves_it_done_or_not_done(tmp_path, monkeypatch):
    """`privface gallery add` of 6000 templates (a fill and six new blocks, 14 records) killed once a random
    number of its records is on disk (or after its meta write, or not at all): the gallery holds all of them or
    none, answers as before or after, and the next change deletes the orphans."""
    import shutil

    from privface.scale.lifecycle import withdraw

    _, x = _gallery(tmp_path, "hers", n=600, dim=64)
    y = np.random.default_rng(5).standard_normal((6000, 64))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    np.save(tmp_path / "f.npy", y.astype(np.float32))
    seed = int(os.environ.get("PRIVFACE_CRASH_SEED", random.randrange(1 << 30)))
    print("PRIVFACE_CRASH_SEED", seed)
    rng = random.Random(seed)
    outcomes = []
    for run in range(4):
        d = tmp_path / f"run{run}"
        d.mkdir()
        for f in ("g.db", "g.keys.db"):
            shutil.copy(tmp_path / f, d / f)
        url = f"sqlite:///{d}/g.db"
        proc = subprocess.Popen([sys.executable, "-m", "privface.cli", "gallery", "add", "--gallery", url,
                                 str(tmp_path / "f.npy")], env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        import sqlite3

        target = rng.randint(1, 16)  # kill once this many records of the new generation are on disk (14: all)
        while proc.poll() is None:
            with sqlite3.connect(d / "g.db", timeout=5) as db:
                if db.execute("SELECT count(*) FROM records WHERE subject_id LIKE 'default.block.%.g%'"
                              ).fetchone()[0] >= target:
                    break
            time.sleep(0.002)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        ids = list_ids(url)
        done = len(ids) == 6600
        assert ids == [f"e.{i}" for i in range(600)] + ([f"f.{i}" for i in range(6000)] if done else [])
        assert identify(x[7], url)["id"] == "e.7"
        assert identify(y[5000], url)["id"] == ("f.5000" if done else None)
        with sqlite3.connect(d / "g.db") as db:
            written = db.execute("SELECT count(*) FROM records WHERE subject_id LIKE 'default.block.%.g%'").fetchone()
        outcomes.append((killed, done, written[0]))  # records of the new generation on disk when it died
        monkeypatch.setattr(lay, "lease_clock", lambda: time.time() + 2 * lay.LEASE_TTL)  # the lease expired
        try:
            withdraw(url, ["e.1"])  # any change collects the orphans
        finally:
            monkeypatch.setattr(lay, "lease_clock", time.time)
        with sqlite3.connect(d / "g.db") as db:
            keys = [r[0] for r in db.execute("SELECT subject_id FROM records WHERE subject_id LIKE 'default.block.%'")]
        assert len([k for k in keys if ".part." not in k]) == (7 if done else 1)  # one record per live block
    print({"kill_outcomes": outcomes})


def test_add_and_update_over_http_while_a_client_identifies(tmp_path):
    """`gallery/add` (scope enrol) and `gallery/update` (scope admin) on the local server while a client identifies
    a new person and an enrolled one in a loop: 0 errors; the new person is "no match" until the add, then found;
    the enrolled one is found throughout, also after an update with a new photo of the same person (its old slot
    scores as high, and S_key leaves it out). Bad bodies get 400 and change nothing."""
    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.service.bindings.hers import IdentService
    from privface.service.clients.hers import IdentClient
    from privface.service.launch import serve_in_thread
    from privface.store.sqlite import SQLiteStore

    url, x = _gallery(tmp_path, "hers", n=30, dim=64)
    new = np.random.default_rng(21).standard_normal(64)
    new /= np.linalg.norm(new)
    again = x[5] + 0.1 * np.random.default_rng(22).standard_normal(64)
    key_store, local_store = SQLiteStore(tmp_path / "g.keys.db"), SQLiteStore(tmp_path / "local.db")
    key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
    internal = key_keys.create("internal", name="local server")[1]
    key = IdentService(key_store, role="key", insecure_test_params=True)
    answers, errors, stop = [], [], threading.Event()
    with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
        local = IdentService(local_store, role="local", gallery_url=url, key_url=key_url, key_api_key=internal)
        with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
            verify, enrol_key, admin = (local_keys.create(s)[1] for s in ("verify", "enrol", "admin"))

            def loop():
                with IdentClient(local_url, api_key=verify) as c:
                    while not stop.is_set():
                        try:
                            answers.append((c.identify(new), c.identify(x[5])))
                        except Exception as e:  # noqa: BLE001 (every error counts)
                            errors.append(repr(e))

            def post(step, body, k):
                return httpx.post(f"{local_url}/v1/ident/{step}", content=json.dumps(body).encode(), timeout=120,
                                  headers={"content-type": "application/octet-stream", "authorization": f"Bearer {k}"})

            def wait(more):
                n = len(answers)
                while len(answers) < n + more and not errors:
                    time.sleep(0.05)

            t = threading.Thread(target=loop)
            t.start()
            wait(3)
            body = {"ids": ["g.0"], "templates": [new.tolist()]}
            assert post("gallery/add", body, verify).status_code == 403
            for bad in ({"ids": ["g.0"]}, {"ids": ["g.0"], "templates": [[1.0] * 63]},
                        {"ids": ["g.0"], "templates": [[1e300] * 64]}, {"ids": ["e.1"], "templates": [new.tolist()]},
                        {"ids": ["bad id"], "templates": [new.tolist()]}):
                assert post("gallery/add", bad, enrol_key).status_code == 400, bad
            r = post("gallery/add", body, enrol_key)
            assert r.status_code == 200 and r.json()["added"] == 1, r.text
            wait(3)
            upd = {"ids": ["e.5"], "templates": [again.tolist()]}
            assert post("gallery/update", upd, enrol_key).status_code == 403  # replacing needs admin
            r = post("gallery/update", upd, admin)
            assert r.status_code == 200 and r.json()["replaced"] == 1, r.text
            wait(3)
            stop.set()
            t.join()
    key_store.close()
    local_store.close()
    assert errors == []
    firsts = [a for a, _ in answers]
    cut = firsts.index("g.0")
    assert firsts[:cut] == [None] * cut and firsts[cut:] == ["g.0"] * (len(firsts) - cut)
    assert [b for _, b in answers] == ["e.5"] * len(answers)
    assert list_ids(url)[-2:] == ["g.0", "e.5"]


PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
@pytest.mark.parametrize("scheme", ["hers", "idface-paillier"])
def test_postgres_gallery_changes(tmp_path, scheme):
    """The same changes on a PostgreSQL gallery store: add (a fill and a new block), update, remove; answers
    follow; only the live generation's rows remain (the operator's VACUUM (FULL) then drops the dead row
    versions: docs/operations.md); ``store_purged`` is False there."""
    import secrets

    import psycopg

    from privface.scale.lifecycle import add, update

    x = np.random.default_rng(4).standard_normal((30, 128))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"
    enrol(PG_URL, NpySource([tmp_path / "e.npy"]), scheme, key_store_url=keys, tau=TAU[scheme],
          insecure_test_params=True, name=name)
    src, y = _more(tmp_path, 3, 128, 31, "f")
    assert add(PG_URL, src, name)["added"] == 3
    src2, z = _more(tmp_path, 1, 128, 32, "e")
    assert update(PG_URL, src2, name)["store_purged"] is False
    assert withdraw(PG_URL, ["e.3"], name)["withdrawn"] == ["e.3"]
    ask = lambda v: identify(v, PG_URL, key_store_url=keys, name=name)["id"]  # noqa: E731
    assert (ask(y[1]), ask(z[0]), ask(x[0]), ask(x[3]), ask(x[4])) == ("f.1", "e.0", None, None, "e.4")
    assert list_ids(PG_URL, name) == [f"e.{i}" for i in range(1, 30) if i != 3] + ["f.0", "f.1", "f.2", "e.0"]
    with psycopg.connect(PG_URL) as db:
        keys_left = [r[0] for r in db.execute("SELECT subject_id FROM privface_records WHERE protocol = 'gallery' "
                                              "AND subject_id LIKE %s", (f"{name}.block.%",))]
    assert keys_left and all(".g000002" in k for k in keys_left)  # generation 0 and 1 are gone


def test_cryptomask_add_is_a_new_batch_and_remove_needs_the_key(tmp_path):
    """cryptomask: `gallery add` appends a batch (seed 001 Alg. 1) with the gallery's own settings; the new
    person matches; info and list count them; remove and update without the key generator's sk refuse (a
    withdrawn template would still count in the 1-bit answer; erasure: tests/scale/test_erasure_cryptomask.py)."""
    from privface.scale.lifecycle import add, update

    x = np.random.default_rng(6).standard_normal((20, 128))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([tmp_path / "e.npy"]), "cryptomask", tau=0.5, insecure_test_params=True)
    src, y = _more(tmp_path, 3, 128, 41, "f")
    assert stranger_matches(y[1], url) is False
    assert add(url, src)["added_now"] == 3
    assert list_ids(url)[-3:] == ["f.0", "f.1", "f.2"] and info(url)["identities"] == 23
    assert stranger_matches(y[1], url) is True
    for change in (lambda: withdraw(url, ["f.1"]), lambda: update(url, src)):
        with pytest.raises(GalleryError, match="key generator's sk"):
            change()


def stranger_matches(v, url) -> bool:
    return bool(identify(v, url)["match"])


def test_collect_deletes_strays_and_reads_only_blocks_holding_them(tmp_path, monkeypatch):
    """``collect`` deletes keys of generations the meta does not name (beside a live block, and of a block past the
    gallery's end) and keeps every live record; it reads the commit records of those blocks only, and still refuses
    a gallery whose live commit record is missing."""
    from privface.scale import lifecycle
    from privface.store import open_store

    url, _ = _gallery(tmp_path, "hers", n=40, dim=64)
    withdraw(url, ["e.3"])  # a change: its superseded records are already collected
    with open_store(url) as local:
        live = sorted(local.ids(lay.LOCAL))
        meta = json.loads(local.get(lay.LOCAL, "default.meta"))
        strays = ["default.block.000000.g000009", "default.block.000000.g000009.part.0000",
                  "default.block.000007.part.0000"]
        for k in strays:
            local.put(lay.LOCAL, k, b"old")
        reads = []
        monkeypatch.setattr(lifecycle, "read_json", lambda r, what: reads.append(what) or json.loads(r))
        nblocks = len(meta.get("block_gens", [0]))
        assert nblocks == 1
        assert lifecycle.collect(local, "default", meta, 1) == len(strays)
        assert sorted(local.ids(lay.LOCAL)) == live and reads == ["block 0 commit record"]
        reads.clear()
        assert lifecycle.collect(local, "default", meta, 1) == 0 and reads == []  # settled: nothing read
        monkeypatch.undo()
        local.delete(lay.LOCAL, next(k for k in live if k.startswith("default.block.") and ".part." not in k))
        with pytest.raises(GalleryError, match="missing"):
            lifecycle.collect(local, "default", meta, 1)
