"""cryptomask's erasure over HTTP (issue 37): the CS (``privface serve --protocol cryptomask --role cs --key-url``)
serves ``gallery/info | list | remove | update`` (scope admin) and erases through the key generator served on its own
(``--role kg``, steps ``erase/attach | refresh``, scope internal), both on real loopback sockets. After a remove the
key generator decrypting every stored block finds the removed row at 0 and the others as enrolled, no window of the
old stack is left in the store's files, a verifier identifying in a loop throughout gets only before/after answers
and the removed template no longer matches. The KG refuses what does not fit before decrypting and answers only
fresh encryptions. Toy BFV (insecure_test_params), real SEAL; SQLite, and PostgreSQL when CI provides one.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading

import numpy as np
import pytest

from privface.errors import ProtocolError
from privface.protocols.cryptomask import encoding
from privface.scale.lifecycle import list_ids
from tests.helpers.erasure import postgres_bytes, store_files, windows
from tests.scale.test_erasure_cryptomask import _gallery, _templates, block_bytes, decrypt_gallery

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")


@contextlib.contextmanager
def _servers(tmp_path, url, name="default", keys=None):
    """The KG (its key store) and the CS on loopback; yields (CS URL, admin key, verify key, KG URL, its verify key,
    the key store's URL)."""
    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.service.launch import serve_in_thread
    from privface.service.registry import load_service
    from privface.store import open_store
    from privface.store.sqlite import SQLiteStore

    keys = keys or f"sqlite:///{tmp_path}/g.keys.db"
    kg_store, cs_store = open_store(keys), SQLiteStore(tmp_path / "cs.db")
    kg_keys, cs_keys = ApiKeys(kg_store), ApiKeys(cs_store)
    internal, kg_verify = kg_keys.create("internal")[1], kg_keys.create("verify")[1]
    kg = load_service("cryptomask", kg_store, role="kg", gallery_name=name, insecure_test_params=True)
    try:
        with serve_in_thread(create_app(kg_store, [kg], keys=kg_keys)) as kg_url:
            cs = load_service("cryptomask", cs_store, role="cs", gallery_url=url, gallery_name=name, kg_url=kg_url,
                              kg_api_key=internal)
            with serve_in_thread(create_app(cs_store, [cs], keys=cs_keys)) as cs_url:
                yield cs_url, cs_keys.create("admin")[1], cs_keys.create("verify")[1], kg_url, kg_verify, keys
    finally:
        kg_store.close()
        cs_store.close()


def _post(url, step, body, api_key):
    import httpx

    return httpx.post(f"{url}/v1/cryptomask/{step}", content=body, timeout=600,
                      headers={"content-type": "application/octet-stream", "authorization": f"Bearer {api_key}"})


def test_remove_over_http_erases_while_a_verifier_identifies(tmp_path):
    from privface.service.clients.cryptomask import VerifierClient

    url, x = _gallery(tmp_path, n=30)
    q = encoding.quantize(x)
    old = block_bytes(url)[0][0].tobytes()  # the stack holding row 7
    assert all(w in store_files(tmp_path) for w in windows(old, k=8))
    with _servers(tmp_path, url) as (cs_url, admin, verify, kg_url, kg_verify, keys):
        assert _post(kg_url, "erase/refresh", b"x", kg_verify).status_code == 403  # internal keys only
        assert _post(cs_url, "gallery/remove", json.dumps({"ids": ["e.7"]}).encode(), verify).status_code == 403
        r = _post(cs_url, "gallery/info", b"{}", admin)
        assert r.status_code == 200 and r.json()["identities"] == 30 and r.json()["scheme"] == "cryptomask"
        answers, errors, stop = [], [], threading.Event()

        def loop():  # x[7] matches before the removal and not after; x[8] matches throughout
            with VerifierClient(cs_url, keys, api_key=verify) as v:
                while not stop.is_set():
                    try:
                        a, b = v.identify(x[7])["match"], v.identify(x[8])["match"]
                    except Exception as e:  # noqa: BLE001 — every failure is a test failure, asserted below
                        errors.append(repr(e))
                        continue
                    answers.append((a, b))

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        r = _post(cs_url, "gallery/remove", json.dumps({"ids": ["e.7"]}).encode(), admin)
        after_change = len(answers)
        while len(answers) < after_change + 1 and not errors and t.is_alive():
            stop.wait(0.5)
        stop.set()
        t.join(300)
        assert r.status_code == 200, r.text
        report = r.json()
        assert report["erased"] is True and report["withdrawn"] == ["e.7"]
        assert errors == [] and answers and all(b for _, b in answers)
        assert answers[-1] == (False, True)  # after the change the removed template no longer matches
        assert _post(cs_url, "gallery/list", b"{}", admin).json()["ids"] == [f"e.{i}" for i in range(30) if i != 7]
        y = _templates(1, 9)  # gallery/update: e.8's row replaced in place, in one write of its block
        r = _post(cs_url, "gallery/update", json.dumps({"ids": ["e.8"], "templates": y.tolist()}).encode(), admin)
        assert r.status_code == 200 and r.json()["replaced"] == 1 and r.json()["n"] == 29, r.text
        with VerifierClient(cs_url, keys, api_key=verify) as v:
            assert v.identify(y[0])["match"] is True and v.identify(x[8])["match"] is False
        assert _post(cs_url, "gallery/update", json.dumps({"ids": ["e.9"], "templates": [[0.0] * 128]}).encode(),
                     admin).status_code == 400
    got = decrypt_gallery(url)[0][:30]
    assert not got[7].any() and np.array_equal(got[8], encoding.quantize(y)[0])
    assert np.array_equal(np.delete(got, [7, 8], 0), np.delete(q, [7, 8], 0))
    assert not any(w in store_files(tmp_path) for w in windows(old))
    assert "e.7" not in list_ids(url)


def test_the_key_generator_refuses_what_does_not_fit_and_never_a_noise_bit(tmp_path):
    """The KG over the wire (``KeyGeneratorRole``): another pk, no attach, ciphertexts of the wrong shape or with a
    residue ≥ its prime, a keep mask of the wrong size — refused before decryption; a ciphertext far beyond its
    noise bound is *not* refused (that refusal would be a bit about sk): it gets a fresh encryption like any other."""
    from privface.protocols.cryptomask.erase import EraseHolder
    from privface.protocols.cryptomask.erase_messages import EraseAttach, EraseRefresh
    from privface.scale.cryptomask_gallery import CMGallery
    from privface.scale.cryptomask_kg import KeyGeneratorRole, KGLink
    from privface.store.sqlite import SQLiteStore

    url, _ = _gallery(tmp_path, n=30)
    g = CMGallery(url)
    store = SQLiteStore(tmp_path / "g.keys.db")
    kg = KeyGeneratorRole(store, insecure_test_params=True)
    link = KGLink(kg, g.pk_bytes)
    cts = block_bytes(url)[0][0].astype(np.uint64)  # one stack: (S, 2, L, N)
    k, n = cts.shape[0], cts.shape[-1]
    keep = np.ones((k, n), dtype=bool)
    with pytest.raises(ProtocolError):  # not attached
        kg.refresh(EraseRefresh(link.digest, cts.astype("<u8").tobytes(), np.packbits(keep).tobytes()))
    with pytest.raises(ProtocolError):
        kg.attach(EraseAttach(g.pk_bytes[:-1] + bytes([g.pk_bytes[-1] ^ 1])))
    link.refresh(EraseHolder(g.public).mask(cts)[0][:1], keep[:1])  # attaches
    raw, bits = cts.astype("<u8").tobytes(), np.packbits(keep, bitorder="little").tobytes()
    big = cts.copy()
    big[0, 0, 0, 0] = np.uint64(g.basis.qv.max()) + np.uint64(1)
    for msg in [EraseRefresh(link.digest, raw[:-8], bits), EraseRefresh(link.digest, raw, bits[:-1]),
                EraseRefresh(bytes(32), raw, bits), EraseRefresh(link.digest, b"", b""),
                EraseRefresh(link.digest, big.astype("<u8").tobytes(), bits)]:
        with pytest.raises(ProtocolError):
            kg.refresh(msg)
    noisy = cts.copy()  # c0 replaced by uniform residues: far beyond any noise bound
    rng = np.random.default_rng(1)
    for j, qj in enumerate(g.basis.qv.ravel()):
        noisy[:, 0, j] = rng.integers(0, int(qj), size=noisy[:, 0, j].shape, dtype=np.uint64)
    fresh = link.refresh(noisy, keep)
    assert fresh.shape == cts.shape and not np.array_equal(fresh, noisy)
    store.close()


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_remove_over_http_erases(tmp_path):
    import secrets

    name = "c" + secrets.token_hex(4)
    url, x = _gallery(tmp_path, n=20, url=PG_URL, name=name, keys=PG_URL)
    old = block_bytes(url, name)[0][0].tobytes()
    with _servers(tmp_path, url, name, keys=PG_URL) as (cs_url, admin, *_):
        r = _post(cs_url, "gallery/remove", json.dumps({"ids": ["e.5"]}).encode(), admin)
        assert r.status_code == 200 and r.json()["erased"] is True, r.text
    got = decrypt_gallery(url, name, PG_URL)[0][:20]
    assert not got[5].any() and np.array_equal(np.delete(got, 5, 0), np.delete(encoding.quantize(x), 5, 0))
    live, _ = postgres_bytes(PG_URL, name)
    assert not any(w in live for w in windows(old))


def test_privface_serve_kg_and_cs_erase_over_http(tmp_path):
    """`privface serve --protocol cryptomask --role kg --db KEYS` and `--role cs --key-url KG --key-api-key K` as
    child processes with API keys: `gallery/remove` on the CS (admin) erases through the KG (internal)."""
    from privface.service.auth import ApiKeys
    from privface.service.launch import serve_subprocess
    from privface.store.sqlite import SQLiteStore

    url, x = _gallery(tmp_path, n=12)
    keys = f"sqlite:///{tmp_path}/g.keys.db"
    with SQLiteStore(tmp_path / "g.keys.db") as s:
        internal = ApiKeys(s).create("internal")[1]
    with SQLiteStore(tmp_path / "cs.db") as s:
        admin = ApiKeys(s).create("admin")[1]
    with serve_subprocess("cryptomask", keys, ["--role", "kg", "--insecure-test-params"], auth=True) as kg_url:
        with serve_subprocess("cryptomask", f"sqlite:///{tmp_path}/cs.db",
                              ["--role", "cs", "--gallery", url, "--key-url", kg_url, "--key-api-key", internal],
                              auth=True) as cs_url:
            r = _post(cs_url, "gallery/remove", json.dumps({"ids": ["e.4"]}).encode(), admin)
            assert r.status_code == 200 and r.json()["erased"] is True, r.text
    got = decrypt_gallery(url)[0][:12]
    assert not got[4].any() and np.array_equal(np.delete(got, 4, 0), np.delete(encoding.quantize(x), 4, 0))
