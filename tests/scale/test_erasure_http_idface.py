"""Erasure over HTTP for idface-ckks and idface-paillier (issue 37): ``privface serve --protocol ident`` roles on real
loopback sockets (uvicorn), ``gallery/remove | update`` on the local server erasing through the key server's
``erase/open | transfer | close`` (scope ``internal``). After the change the key holder decrypting every block finds
the removed digits at 0 and every other digit as before, no 64-byte window of the old block is left in the store's
files, an identification with the removed template finds nobody, and a client identifying in a loop throughout gets
only answers consistent with the gallery before or after. The key server's steps refuse a caller that lies in any
field before decrypting anything (``scale.erase_link.KeyEraser``). Toy parameters (insecure_test_params), real SEAL,
Paillier, garbled circuits and OT; SQLite, and PostgreSQL when CI provides one (``.ci/with-postgres``).
"""
from __future__ import annotations

import contextlib
import json
import os
import threading

import numpy as np
import pytest

from privface.errors import ProtocolError
from privface.scale.gallery import Gallery
from privface.scale.lifecycle import list_ids
from tests.helpers.erasure import postgres_bytes, store_files, windows
from tests.scale.test_erasure_idface import (
    _gallery,
    _paillier_gallery,
    _templates,
    block_bytes,
    digits,
    paillier_bytes,
    paillier_digits,
)

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")


@contextlib.contextmanager
def _servers(tmp_path, url, name="default", keys=None):
    """The key server (its key store: ``keys`` or the gallery's default) and the local server on loopback;
    yields (local URL, admin key, verify key, the key server's URL, its internal and verify keys)."""
    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.service.bindings.hers import IdentService
    from privface.service.launch import serve_in_thread
    from privface.store import open_store
    from privface.store.sqlite import SQLiteStore

    key_store = open_store(keys) if keys else SQLiteStore(tmp_path / "g.keys.db")
    local_store = SQLiteStore(tmp_path / "local.db")
    key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
    internal, key_verify = key_keys.create("internal")[1], key_keys.create("verify")[1]
    key = IdentService(key_store, role="key", gallery_name=name, insecure_test_params=True)
    try:
        with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
            local = IdentService(local_store, role="local", gallery_url=url, gallery_name=name, key_url=key_url,
                                 key_api_key=internal)
            with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
                admin, verify = local_keys.create("admin")[1], local_keys.create("verify")[1]
                yield local_url, admin, verify, key_url, internal, key_verify
    finally:
        key_store.close()
        local_store.close()


def _post(url, step, body, api_key, timeout=600):
    import httpx

    return httpx.post(f"{url}/v1/ident/{step}", content=body, timeout=timeout,
                      headers={"content-type": "application/octet-stream", "authorization": f"Bearer {api_key}"})


class _Identifier:
    """A client identifying in a loop while a change runs: every answer must be one the gallery before or after
    the change gives (``allowed[probe]``), and no request may fail."""

    def __init__(self, url, api_key, probes, allowed):
        self.url, self.api_key, self.probes, self.allowed = url, api_key, probes, allowed
        self.answers, self.errors, self.stop = 0, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        from privface.service.clients.hers import IdentClient

        with IdentClient(self.url, api_key=self.api_key) as c:
            while not self.stop.is_set():
                for j, y in enumerate(self.probes):
                    try:
                        got = c.identify(y)
                    except Exception as e:  # noqa: BLE001 — every failure is a test failure, reported below
                        self.errors.append(repr(e))
                        continue
                    if got not in self.allowed[j]:
                        self.errors.append(f"probe {j}: {got!r} is neither the before nor the after answer")
                    self.answers += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(120)


def test_ckks_remove_over_http_erases_while_a_client_identifies(tmp_path):
    url, x = _gallery(tmp_path, n=40)
    before, old = digits(url)[0], block_bytes(url)
    assert all(w in store_files(tmp_path) for w in windows(old, k=8))
    with _servers(tmp_path, url) as (local_url, admin, verify, key_url, internal, key_verify):
        r = _post(key_url, "erase/open", b"x", key_verify)
        assert r.status_code == 403  # only the local server's internal key reaches S_key's erasure
        allowed = [{"e.3", None}, {"e.4"}]
        with _Identifier(local_url, verify, [x[3], x[4]], allowed) as loop:
            r = _post(local_url, "gallery/remove", json.dumps({"ids": ["e.3"]}).encode(), admin)
        assert r.status_code == 200, r.text
        report = r.json()
        assert report["erased"] is True and report["withdrawn"] == ["e.3"] and report["erase_hiding_bits"] >= 128
        assert loop.errors == [] and loop.answers > 0
        from privface.service.clients.hers import IdentClient

        with IdentClient(local_url, api_key=verify) as c:
            assert c.identify(x[3]) is None and c.identify(x[4]) == "e.4"
    after = digits(url)[0]
    assert not after[3].any()
    kept = np.ones(len(after), dtype=bool)
    kept[3] = False
    assert np.array_equal(after[kept], before[kept])
    assert not any(w in store_files(tmp_path) for w in windows(old))


def test_paillier_update_over_http_erases_the_old_template(tmp_path):
    url, x = _paillier_gallery(tmp_path, n=20)
    before, old = paillier_digits(url)[0], paillier_bytes(url)
    y = _templates(1, 9)
    with _servers(tmp_path, url) as (local_url, admin, verify, *_):
        allowed = [{"e.0", None}, {None, "e.0"}, {"e.1"}]
        with _Identifier(local_url, verify, [x[0], y[0], x[1]], allowed) as loop:
            r = _post(local_url, "gallery/update", json.dumps({"ids": ["e.0"], "templates": y.tolist()}).encode(),
                      admin)
        assert r.status_code == 200 and r.json()["erased"] is True, r.text
        assert loop.errors == [] and loop.answers > 0
        from privface.service.clients.hers import IdentClient

        with IdentClient(local_url, api_key=verify) as c:
            assert c.identify(y[0]) == "e.0" and c.identify(x[0]) is None and c.identify(x[1]) == "e.1"
    after = paillier_digits(url)[0]
    assert not after[0].any() and after[20].any() and np.array_equal(after[1:20], before[1:20])
    assert not any(w in store_files(tmp_path) for w in windows(old))


def test_the_key_servers_erasure_refuses_a_caller_lying_in_any_field(tmp_path):
    """S_key's ``erase/*`` in process (``KeyRole``, what the HTTP steps call): malformed masks, targets out of range
    or repeated, too many targets, steps out of order, another erasure's id, forged output labels — each refused
    before a decryption, and a refused step ends its erasure (no second try)."""
    from privface.protocols.hers.messages import EraseChoices, EraseOpen, EraseOutputs
    from privface.protocols.idface.erase import DigitEraseHolder
    from privface.scale.erase_link import MAX_ERASURES, DigitEraseLink
    from privface.scale.ident import KeyRole
    from privface.store.sqlite import SQLiteStore

    url, _ = _gallery(tmp_path, n=12)
    g = Gallery(url)
    from privface.scale.ident import LocalRole

    store = SQLiteStore(tmp_path / "g.keys.db")
    key = KeyRole(store, insecure_test_params=True)
    LocalRole(url, key)  # attaches
    n = g.public.public.n
    cts = np.ascontiguousarray(g.load_blocks([0])[0][0].data.reshape(-1, 2, 1, n)[:2])
    raw = cts.astype("<u8").tobytes()
    m = DigitEraseHolder(g.public.public, g.public.params).m  # digits per coefficient: m is out of range

    def rows(*r):
        return np.array(r, dtype="<u4").tobytes()

    for masked, targets in [(raw[:-8], rows([0, 0, 0])), (raw, rows([2, 0, 0])), (raw, rows([0, n, 0])),
                            (raw, rows([0, 0, m])), (raw, rows([0, 0, 0], [0, 0, 0])), (raw, b"\x00" * 5),
                            (raw, b""), (b"", rows([0, 0, 0])),
                            ((np.full(cts.shape, np.uint64(1) << np.uint64(63))).astype("<u8").tobytes(),
                             rows([0, 0, 0]))]:
        with pytest.raises(ProtocolError):
            key.erase_open(EraseOpen(masked, targets))
    with pytest.raises(ProtocolError):
        key.erase_open(EraseOpen(raw, np.zeros((8193, 3), dtype="<u4").tobytes()))
    with pytest.raises(ProtocolError):  # no erasure of that id
        key.erase_transfer(EraseChoices(bytes(16), b"", b""))
    opened = key.erase_open(EraseOpen(raw, rows([0, 1, 0])))
    with pytest.raises(ProtocolError):  # out of order: close before transfer
        key.erase_close(EraseOutputs(opened.erase_id, []))
    with pytest.raises(ProtocolError):  # a malformed u ends the erasure
        key.erase_transfer(EraseChoices(opened.erase_id, b"x", b"\x00" * 128))
    with pytest.raises(ProtocolError):
        key.erase_transfer(EraseChoices(opened.erase_id, b"x", b"\x00" * 128))  # ended: no second try
    # forged output labels: refused, the erasure ended, nothing answered
    holder, link = DigitEraseHolder(g.public.public, g.public.params), DigitEraseLink(key)
    req = holder.start(cts, np.array([[0, 1, 0]]))
    reply = holder.evaluate(link.open(req))
    outputs = holder.labels(link.transfer(reply))
    with pytest.raises(ProtocolError):
        link.close([bytes(16) + o[16:] for o in outputs])
    with pytest.raises(ProtocolError):
        link.close(outputs)  # the honest labels after the forgery: the erasure is gone
    ids = [key.erase_open(EraseOpen(raw, rows([0, 1, 0]))).erase_id for _ in range(MAX_ERASURES)]
    with pytest.raises(ProtocolError):  # open erasures are bounded
        key.erase_open(EraseOpen(raw, rows([0, 1, 0])))
    assert len(set(ids)) == MAX_ERASURES
    store.close()


def test_groups_keep_every_message_under_a_frame(tmp_path):
    """A block's targets cut into erasures whose messages fit ``GROUP_BYTES``; erasing in groups gives the same
    digits as erasing in one go (here: a budget that forces several groups)."""
    from privface.protocols.idface.erase import DigitEraseHolder, target_groups
    from privface.scale import erase_link
    from privface.scale.lifecycle import withdraw

    url, x = _gallery(tmp_path, n=40)
    g = Gallery(url)
    holder = DigitEraseHolder(g.public.public, g.public.params)
    t = np.array([(k, c, 0) for c in (1, 2, 3) for k in range(30)], dtype=np.int64)
    budget = 10 * holder.target_bytes(t[0]) + holder.ct_bytes
    groups = target_groups(holder, t, budget)
    assert len(groups) > 1 and sum(len(r) for _, r in groups) == len(t)
    assert all(len(r) * holder.target_bytes(t[0]) <= budget for _, r in groups)
    before = digits(url)[0]
    assert erase_link.DigitEraseLink(None).group_bytes == erase_link.GROUP_BYTES
    from privface.scale.ident import KeyRole, LocalRole
    from privface.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "g.keys.db")
    local = LocalRole(url, KeyRole(store, insecure_test_params=True))
    small = local.erase_link()
    small.group_bytes = 40 * holder.target_bytes(t[0]) + 8 * holder.ct_bytes
    report = withdraw(url, ["e.5", "e.6"], key=small, retune_tau=False)
    store.close()
    assert report["erased"] is True and report["erase_exchanges"] > 3
    after = digits(url)[0]
    assert not after[[5, 6]].any()
    kept = np.ones(len(after), dtype=bool)
    kept[[5, 6]] = False
    assert np.array_equal(after[kept], before[kept]) and "e.5" not in list_ids(url)


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
@pytest.mark.parametrize("scheme", ["idface-ckks", "idface-paillier"])
def test_postgres_remove_over_http_erases(tmp_path, scheme):
    """PostgreSQL gallery and key store: ``gallery/remove`` over HTTP erases; the live rows hold no old window
    (the dead row versions go with the operator's VACUUM (FULL), docs/operations.md)."""
    import secrets

    name = "h" + secrets.token_hex(4)
    if scheme == "idface-ckks":
        url, x = _gallery(tmp_path, n=20, url=PG_URL, name=name, keys=PG_URL)
        old, read = block_bytes(url, name), (lambda: digits(url, name, PG_URL)[0])
    else:
        url, x = _paillier_gallery(tmp_path, n=20, url=PG_URL, name=name, keys=PG_URL)
        old, read = paillier_bytes(url, name), (lambda: paillier_digits(url, name, PG_URL)[0])
    before = read()
    with _servers(tmp_path, url, name, keys=PG_URL) as (local_url, admin, verify, *_):
        r = _post(local_url, "gallery/remove", json.dumps({"ids": ["e.2"]}).encode(), admin)
        assert r.status_code == 200 and r.json()["erased"] is True, r.text
    after = read()
    assert not after[2].any() and np.array_equal(np.delete(after, 2, 0), np.delete(before, 2, 0))
    live, _ = postgres_bytes(PG_URL, name)
    assert not any(w in live for w in windows(old))
