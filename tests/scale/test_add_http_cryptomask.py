"""cryptomask's ``gallery/add`` over HTTP (issue 37 §3, "scopes: enrol adds"): the CS appends a new batch crash-safe
and serves the grown gallery to the identifications that start afterwards; a verifier whose layout predates the add
takes the new one from ``Started`` (and refills its Ferret pool when the CS refuses it as too small), never deciding
on the old layout. Lying callers are refused with nothing written. Real loopback sockets, toy BFV
(insecure_test_params), real SEAL; SQLite, and PostgreSQL when CI provides one.
"""
from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

from privface.scale.lifecycle import list_ids
from tests.scale.test_erasure_cryptomask import _gallery, _templates
from tests.scale.test_erasure_http_cryptomask import _post, _servers

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")


def _add(cs_url, key, ids, rows):
    return _post(cs_url, "gallery/add", json.dumps({"ids": ids, "templates": rows}).encode(), key)


@pytest.mark.parametrize("ot", ["ferret", "softspoken"])
def test_add_over_http_while_a_verifier_identifies(tmp_path, ot):
    from privface.service.clients.cryptomask import VerifierClient

    url, x = _gallery(tmp_path, n=30)
    y = _templates(3, 11)  # three new people
    with _servers(tmp_path, url) as (cs_url, admin, verify, _kg, _kgv, keys):
        with VerifierClient(cs_url, keys, api_key=verify, ot=ot) as stale:  # fetches the 30-entry layout now
            assert stale.identify(x[3])["match"] is True and stale.info.n == 30
            answers, errors, stop = [], [], threading.Event()

            def loop():  # y[0] matches only after the add; x[8] matches throughout
                with VerifierClient(cs_url, keys, api_key=verify, ot=ot) as v:
                    while not stop.is_set():
                        try:
                            a, b = v.identify(y[0])["match"], v.identify(x[8])["match"]
                        except Exception as e:  # noqa: BLE001 — every failure is a test failure, asserted below
                            errors.append(repr(e))
                            continue
                        answers.append((a, b))

            t = threading.Thread(target=loop, daemon=True)
            t.start()
            while not answers and not errors and t.is_alive():
                stop.wait(0.2)
            r = _add(cs_url, verify, ["n.0"], y[:1].tolist())
            assert r.status_code == 403  # scope enrol, not verify
            enrol_key = _enrol_key(tmp_path)
            r = _add(cs_url, enrol_key, ["n.0", "n.1", "n.2"], y.tolist())
            after_change = len(answers)
            while len(answers) < after_change + 2 and not errors and t.is_alive():
                stop.wait(0.5)
            stop.set()
            t.join(300)
            assert r.status_code == 200, r.text
            assert r.json()["n"] == 33
            assert errors == [] and answers and all(b for _, b in answers)
            assert answers[0] == (False, True) and answers[-1] == (True, True)  # before, then after
            assert answers == sorted(answers)  # never a "before" after an "after"
            got = stale.identify(y[2])  # its layout names 30 entries: it takes the 33-entry one
            assert got["match"] is True and got["n"] == 33 and stale.layouts == 1
            assert stale.identify(x[29])["match"] is True and stale.identify(_templates(1, 99)[0])["match"] is False
            again = stale.identify(y[1])  # the layout in hand again: the usual exchanges
            assert again["match"] is True and again["exchanges"]["identify/start"] == 1
    assert list_ids(url)[-3:] == ["n.0", "n.1", "n.2"]


def test_a_ferret_pool_filled_for_the_smaller_gallery_is_refilled(tmp_path):
    """200 new people: an identification now takes more COTs than the stale client's pool holds — the CS refuses
    the pool at ``identify/start`` (409, nothing taken), the client fetches the layout, refills, starts again."""
    from privface.service.clients.cryptomask import VerifierClient

    url, x = _gallery(tmp_path, n=30)
    y = _templates(200, 14)
    with _servers(tmp_path, url) as (cs_url, _a, verify, _k, _kv, keys):
        with VerifierClient(cs_url, keys, api_key=verify) as stale:
            assert stale.identify(x[1])["match"] is True
            stale.prepare()  # a pool of one 30-entry identification's COTs, set before the add
            held = stale._pool[1].available
            r = _add(cs_url, _enrol_key(tmp_path), [f"n.{i}" for i in range(200)], y.tolist())
            assert r.status_code == 200 and r.json()["n"] == 230, r.text
            assert held < _need(230)
            got = stale.identify(y[150])
            assert got["match"] is True and got["n"] == 230 and stale.layouts == 0  # re-fetched, not from Started
            assert [s.step for s in stale.stats].count("gallery") == 2
            assert stale.identify(x[2])["match"] is True and stale.identify(_templates(1, 98)[0])["match"] is False


def test_an_add_stored_but_not_served_answers_200_and_the_next_identification_serves_it(tmp_path, monkeypatch):
    """The staging of a stored add fails once (as on shards while one restarts): the add answers 200 with
    ``served`` false — it is in the store, the caller must not retry it as lost — and the next identification serves
    the grown gallery first (or would answer 503), so the new person is found."""
    from privface.service.base import SessionLimitError
    from privface.service.bindings.cryptomask import CryptoMaskService
    from privface.service.clients.cryptomask import VerifierClient

    real, calls = CryptoMaskService.grown, []

    def grown_failing_once(self):
        calls.append(1)
        if len(calls) == 1:
            raise SessionLimitError("a shard is restarting")
        return real(self)

    url, x = _gallery(tmp_path, n=30)
    y = _templates(2, 15)
    with _servers(tmp_path, url) as (cs_url, _a, verify, _k, _kv, keys):
        monkeypatch.setattr(CryptoMaskService, "grown", grown_failing_once)
        r = _add(cs_url, _enrol_key(tmp_path), ["n.0"], y[:1].tolist())
        assert r.status_code == 200 and r.json()["served"] is False, r.text
        with VerifierClient(cs_url, keys, api_key=verify) as v:
            assert v.identify(y[0])["match"] is True and len(calls) == 2
            assert v.identify(y[1])["match"] is False and len(calls) == 2  # served: no staging again
    assert list_ids(url)[-1] == "n.0"


def _need(n):
    from privface.protocols.cryptomask.reveal import ots_needed

    return ots_needed(n, max(64, -(-n // 64) * 64))


def _enrol_key(tmp_path):
    from privface.service.auth import ApiKeys
    from privface.store.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "cs.db") as s:
        return ApiKeys(s).create("enrol")[1]


def test_lying_callers_are_refused_with_nothing_written(tmp_path):
    from privface.service.bindings.cryptomask import MAX_ADD

    url, x = _gallery(tmp_path, n=12)
    d = x.shape[1]
    y = _templates(2, 12).tolist()
    with _servers(tmp_path, url) as (cs_url, *_):
        key = _enrol_key(tmp_path)
        bad = [(["a", "a"], y),  # an id twice
               (["e.3"], y[:1]),  # an id the gallery answers already
               (["a", "b"], y[:1]),  # fewer templates than ids
               (["a"], [y[0][:-1]]),  # wrong dim
               (["a"], [[float("nan")] * d]), (["a"], [[0.0] * d]), (["a"], [[1e308] * d]),
               (["a"], [[True] * d]), (["a"], [["1"] * d]),
               ([f"i{i}" for i in range(MAX_ADD + 1)], [y[0]] * (MAX_ADD + 1)),  # too many
               ([], []), (["a/../b"], y[:1]), ([7], y[:1])]
        for ids, rows in bad:
            body = json.dumps({"ids": ids, "templates": rows}, allow_nan=True).encode()
            assert _post(cs_url, "gallery/add", body, key).status_code == 400, ids[:2]
        for body in [b"[]", b"{}", b'{"ids": ["a"]}', json.dumps({"ids": ["a"], "templates": y[:1], "x": 1}).encode(),
                     b"\xff"]:
            assert _post(cs_url, "gallery/add", body, key).status_code == 400
        assert _add(cs_url, key, ["fine"], y[:1]).status_code == 200
        # the same id again with another template: refused (enrolment's resume rule would have kept the first
        # template and answered 200 — a caller retrying after a 503 then believed its new template stored)
        again = _add(cs_url, key, ["fine"], y[1:2])
        assert again.status_code == 400 and "already in the gallery" in again.text
    assert list_ids(url) == [f"e.{i}" for i in range(12)] + ["fine"]


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_add_over_http(tmp_path):
    import secrets

    from privface.service.clients.cryptomask import VerifierClient

    name = "c" + secrets.token_hex(4)
    url, x = _gallery(tmp_path, n=20, url=PG_URL, name=name, keys=PG_URL)
    y = _templates(1, 13)
    with _servers(tmp_path, url, name, keys=PG_URL) as (cs_url, _a, verify, _k, _kv, keys):
        with VerifierClient(cs_url, keys, name=name, api_key=verify) as v:
            assert v.identify(y[0])["match"] is False
            r = _add(cs_url, _enrol_key(tmp_path), ["n.0"], y.tolist())
            assert r.status_code == 200 and r.json()["n"] == 21, r.text
            assert v.identify(y[0])["match"] is True and v.identify(x[4])["match"] is True
    assert list_ids(url, name)[-1] == "n.0"


@pytest.mark.slow
def test_add_on_ray_shards_is_identified_afterwards(tmp_path, monkeypatch):
    """A CS on 2 Ray shards (local Ray, 127.0.0.1): 3500 toy templates in 4 blocks (2 per shard); an add of 700
    rewrites the last block and adds a fifth, which the last shard stages; the added and the old are identified."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    from privface.scale import NpySource, enrol
    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.service.bindings.cryptomask import CryptoMaskService
    from privface.service.clients.cryptomask import VerifierClient
    from privface.service.launch import serve_in_thread
    from privface.store.sqlite import SQLiteStore

    x = _templates(3500, 21)
    np_path = tmp_path / "faces.npy"

    np.save(np_path, x)
    url, keys = f"sqlite:///{tmp_path / 'g.db'}", f"sqlite:///{tmp_path / 'k.db'}"
    enrol(url, NpySource([np_path]), "cryptomask", key_store_url=keys, tau=0.5, insecure_test_params=True)
    y = _templates(700, 22)
    store = SQLiteStore(tmp_path / "cs.db")
    enrol_key, verify = ApiKeys(store).create("enrol")[1], ApiKeys(store).create("verify")[1]
    try:
        svc = CryptoMaskService(store, gallery_url=url, ray="auto", shards=2)
        assert svc.party.cs.ranges == [(0, 2), (2, 4)]
        with serve_in_thread(create_app(store, [svc], keys=ApiKeys(store))) as cs_url, \
                VerifierClient(cs_url, keys, api_key=verify) as v:
            assert v.identify(y[5])["match"] is False and v.identify(x[3000])["match"] is True
            for lo in range(0, 700, 256):
                r = _add(cs_url, enrol_key, [f"n.{i}" for i in range(lo, min(700, lo + 256))],
                         y[lo:lo + 256].tolist())
                assert r.status_code == 200, r.text
            assert svc.party.cs.ranges == [(0, 2), (2, 5)] and svc.party.cs.count == 4200
            for probe in (y[5], y[699], x[0], x[3499]):
                assert v.identify(probe)["match"] is True
            assert v.identify(_templates(1, 97)[0])["match"] is False
        svc.party.cs.close()
    finally:
        store.close()
        ray.shutdown()
