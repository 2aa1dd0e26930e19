"""Erasure on ``gallery remove | update`` (issue 37 item 3): after the change, the key holder decrypting every stored
block finds the removed identities' slots at ≈ 0 and every other slot as before, none of the old ciphertext's bytes
is left in the store's files, and an identification with the removed template finds nobody. hers, SQLite (and
PostgreSQL when CI provides one); toy parameters (insecure_test_params), real SEAL, S_key's refresh in process and
over real loopback HTTP.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tenseal.sealapi as sealapi

from privface.crypto import seal_arrays
from privface.crypto.ckks_refresh import Masked
from privface.scale import NpySource, enrol, identify
from privface.scale.gallery import Gallery, key_server
from privface.scale.lifecycle import list_ids, update, withdraw
from tests.helpers.erasure import ENV, assert_gone_from_postgres, store_files, windows

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")


def _templates(n, dim, seed):
    x = np.random.default_rng(seed).standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _gallery(tmp_path, n=1100, dim=16, url=None, name="default", keys=None):
    """n > 1024 (the toy capacity): two blocks, so that one stays untouched."""
    x = _templates(n, dim, 5)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = url or f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([tmp_path / "e.npy"]), "hers", tau=0.95, insecure_test_params=True, name=name,
          key_store_url=keys)
    return url, x


def decrypt_gallery(url, name="default", keys=None) -> list[np.ndarray]:
    """What the key holder finds in every stored block: (slots, d) per block."""
    g = Gallery(url, name)
    key = key_server(g, keys).secret
    pub = g.public_context
    dec = sealapi.Decryptor(pub.seal_context, key.secret._secret_key)
    out = []
    for block in g.load_blocks()[0]:
        cols = block.planes[0].astype(np.uint64) | (block.planes[1].astype(np.uint64) << np.uint64(30))
        rows = []
        for c in cols:
            ct = seal_arrays.ciphertext_from_array(pub.seal_context, pub.seal_context.first_parms_id(),
                                                   c.reshape(2, 1, pub.n), scale=pub.scale)
            pt = sealapi.Plaintext()
            dec.decrypt(ct, pt)
            rows.append(pub.encoder.decode_double(pt))
        out.append(np.array(rows).T)
    return out


def block_bytes(url, name="default") -> list[bytes]:
    g = Gallery(url, name)
    return [np.ascontiguousarray(b.planes).tobytes() for b in g.load_blocks()[0]]


def test_remove_erases_the_slots_and_the_old_bytes(tmp_path):
    url, x = _gallery(tmp_path)
    before, old = decrypt_gallery(url), block_bytes(url)
    assert np.abs(before[0][:1024] - x[:1024]).max() < 1e-5  # the check below can tell a template from zero
    files = store_files(tmp_path)
    assert all(w in files for w in windows(old[0], k=8) + windows(old[1], k=8))
    report = withdraw(url, ["e.3", "e.700"], key=key_server(Gallery(url)).secret)
    assert report["erased"] is True and report["blocks_written"] == 1 and report["erase_hiding_bits"] >= 40
    after = decrypt_gallery(url)
    removed = [3, 700]
    assert np.abs(after[0][removed]).max() < 1e-5
    kept = np.ones(1024, dtype=bool)
    kept[removed] = False
    assert np.abs(after[0][kept] - before[0][kept]).max() < 1e-5
    assert np.array_equal(after[1], before[1])  # the untouched block: not rewritten
    files = store_files(tmp_path)
    assert not any(w in files for w in windows(old[0], k=32))  # the old block 0: no 64-byte window left
    assert all(w in files for w in windows(old[1], k=8))  # block 1 still there (the scan can find what is stored)
    assert not (tmp_path / "g.db-wal").exists() or (tmp_path / "g.db-wal").stat().st_size == 0
    assert identify(x[3], url)["id"] is None and identify(x[700], url)["id"] is None
    assert identify(x[4], url)["id"] == "e.4" and identify(x[1050], url)["id"] == "e.1050"
    assert "e.3" not in list_ids(url)


def test_update_erases_the_old_template(tmp_path):
    url, x = _gallery(tmp_path, n=30)
    old = block_bytes(url)[0]
    y = _templates(1, 16, 9)
    np.save(tmp_path / "e.npy", y.astype(np.float32))  # id e.0
    report = update(url, NpySource([tmp_path / "e.npy"]), key=key_server(Gallery(url)).secret)
    assert report["erased"] is True and report["replaced"] == 1
    got = decrypt_gallery(url)[0]
    assert np.abs(got[0]).max() < 1e-5 and np.abs(got[30] - y[0]).max() < 1e-5  # old slot erased, new one added
    assert np.abs(got[1:30] - x[1:30]).max() < 1e-5
    assert not any(w in store_files(tmp_path) for w in windows(old, k=32))
    assert identify(y[0], url)["id"] == "e.0" and identify(x[0], url)["id"] is None


def test_cli_remove_erases_and_says_so(tmp_path):
    url, x = _gallery(tmp_path, n=6)
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "remove", "--gallery", url, "e.2", "--json"],
                       env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["erased"] is True and got["withdrawn"] == ["e.2"] and "NOT erased" not in r.stderr
    assert np.abs(decrypt_gallery(url)[0][2]).max() < 1e-5
    assert identify(x[2], url)["id"] is None and identify(x[3], url)["id"] == "e.3"


def test_a_refresh_answer_that_is_not_the_keys_is_refused(tmp_path):
    """S_key's refresh checks what it gets; the holder refuses an answer of the wrong shape (nothing written)."""
    from privface.errors import CryptoError, ProtocolError

    url, _ = _gallery(tmp_path, n=6)
    key = key_server(Gallery(url)).secret
    with pytest.raises(ProtocolError):
        key.refresh(np.zeros((2, 2, 1, 7), dtype=np.uint64))
    with pytest.raises(ProtocolError):
        key.refresh(Masked(np.zeros((2, 2, 7), dtype=np.uint64), np.zeros((2, 7), dtype=np.uint64)))
    with pytest.raises(ProtocolError):
        key.refresh(Masked(np.full((1, 1, 2048), 2 ** 63, dtype=np.uint64), np.zeros((1, 2048), dtype=np.uint64)))

    class Liar:
        def refresh(self, masked):
            return key.refresh(masked)[:-1]

    old = block_bytes(url)
    with pytest.raises(CryptoError):
        withdraw(url, ["e.1"], key=Liar())
    assert block_bytes(url) == old and "e.1" in list_ids(url)


def test_update_over_http_erases_with_the_key_servers_reencrypt(tmp_path):
    """`privface serve --protocol ident` roles (uvicorn on loopback): ``gallery/update`` on the local server erases
    the old template through the key server's ``reencrypt`` step (scope internal), which refuses other callers."""
    import httpx

    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.service.bindings.hers import IdentService
    from privface.service.clients.hers import IdentClient
    from privface.service.launch import serve_in_thread
    from privface.store.sqlite import SQLiteStore

    url, x = _gallery(tmp_path, n=12)
    old = block_bytes(url)[0]
    y = _templates(1, 16, 11)
    key_store, local_store = SQLiteStore(tmp_path / "g.keys.db"), SQLiteStore(tmp_path / "local.db")
    key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
    internal, verify_k = key_keys.create("internal")[1], key_keys.create("verify")[1]
    key = IdentService(key_store, role="key", insecure_test_params=True)
    with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
        r = httpx.post(f"{key_url}/v1/ident/reencrypt", content=b"x", timeout=60,
                       headers={"content-type": "application/octet-stream", "authorization": f"Bearer {verify_k}"})
        assert r.status_code == 403
        local = IdentService(local_store, role="local", gallery_url=url, key_url=key_url, key_api_key=internal)
        with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
            admin, verify = local_keys.create("admin")[1], local_keys.create("verify")[1]
            r = httpx.post(f"{local_url}/v1/ident/gallery/update", timeout=120,
                           content=json.dumps({"ids": ["e.4"], "templates": y.tolist()}).encode(),
                           headers={"content-type": "application/octet-stream", "authorization": f"Bearer {admin}"})
            assert r.status_code == 200 and r.json()["erased"] is True, r.text
            with IdentClient(local_url, api_key=verify) as c:
                assert c.identify(y[0]) == "e.4" and c.identify(x[4]) is None and c.identify(x[5]) == "e.5"
    key_store.close()
    local_store.close()
    got = decrypt_gallery(url)[0]
    assert np.abs(got[4]).max() < 1e-5 and np.abs(got[12] - y[0]).max() < 1e-5
    assert not any(w in store_files(tmp_path) for w in windows(old, k=32))


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_remove_erases(tmp_path):
    """PostgreSQL: the erased block is new rows, the old rows are deleted; the dead row versions go with the
    operator's VACUUM (FULL) (docs/operations.md), after which no old window is in the table's files."""
    import secrets


    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"
    url, x = _gallery(tmp_path, n=20, url=PG_URL, name=name, keys=keys)
    old = block_bytes(url, name)[0]
    report = withdraw(url, ["e.5"], name, key=key_server(Gallery(url, name), keys).secret)
    assert report["erased"] is True
    assert np.abs(decrypt_gallery(url, name, keys)[0][5]).max() < 1e-5
    assert identify(x[5], url, key_store_url=keys, name=name)["id"] is None
    assert_gone_from_postgres(PG_URL, name, windows(old, k=32))


@pytest.mark.slow
def test_remove_erases_at_real_parameters(tmp_path):
    """HERS_CKKS (N = 8192, q₀·P = 2^120), d = 128: the real refresh (k = 5 copies, ≥ 40-bit hiding) zeroes the
    removed slot, keeps the others and leaves none of the old block's bytes in the files."""
    x = _templates(10, 128, 7)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([tmp_path / "e.npy"]), "hers", tau=0.9)
    before, old = decrypt_gallery(url)[0], block_bytes(url)[0]
    report = withdraw(url, ["e.6"], key=key_server(Gallery(url)).secret)
    assert report["erased"] is True and report["erase_hiding_bits"] >= 40
    after = decrypt_gallery(url)[0]
    assert np.abs(after[6]).max() < 1e-5 and np.abs(before[6] - x[6]).max() < 1e-5
    assert np.abs(np.delete(after - before, 6, axis=0)).max() < 1e-5
    assert not any(w in store_files(tmp_path) for w in windows(old, k=64))
    assert identify(x[6], url)["id"] is None and identify(x[2], url)["id"] == "e.2"


def test_erase_withdrawn_erases_what_was_only_withdrawn(tmp_path):
    """`gallery remove --withdraw-only` leaves the template in the ciphertexts; `gallery erase-withdrawn` later
    zeroes it (and every other empty slot of its block not yet erased), keeps every other slot, deletes the old
    bytes, and skips blocks already erased; a second run has nothing to do."""
    from privface.scale.lifecycle import erase_withdrawn

    url, x = _gallery(tmp_path)
    before, old = decrypt_gallery(url), block_bytes(url)
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "remove", "--gallery", url, "--withdraw-only",
                        "e.5", "e.1030", "--json"], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "NOT erased" in r.stderr, r.stderr
    assert np.abs(decrypt_gallery(url)[0][5] - x[5]).max() < 1e-5  # withdrawn, still in the ciphertext
    key = key_server(Gallery(url)).secret
    withdraw(url, ["e.9"], key=key)  # block 0 erased now (e.5 with it); block 1 still holds e.1030
    mid = decrypt_gallery(url)
    assert np.abs(mid[0][[5, 9]]).max() < 1e-5 and np.abs(mid[1][1030 - 1024] - x[1030]).max() < 1e-5
    block0 = block_bytes(url)[0]
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "erase-withdrawn", "--gallery", url, "--json"],
                       env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["blocks_erased"] == 1 and got["erased"] is True and got["erase_hiding_bits"] >= 40
    after = decrypt_gallery(url)
    assert np.abs(after[1][1030 - 1024]).max() < 1e-5
    kept = np.ones(len(after[1]), dtype=bool)
    kept[1030 - 1024] = False
    assert np.abs(after[1][kept] - before[1][kept]).max() < 1e-5
    assert block_bytes(url)[0] == block0  # block 0 was erased already: not rewritten
    assert not any(w in store_files(tmp_path) for w in windows(old[1], k=32))
    assert identify(x[1030], url)["id"] is None and identify(x[1031], url)["id"] == "e.1031"
    assert erase_withdrawn(url, key=key)["blocks_erased"] == 0
