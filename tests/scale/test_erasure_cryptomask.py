"""Erasure for cryptomask galleries (issue 37 item 3): after ``gallery remove | update`` the key generator decrypting
every stored ciphertext finds the removed templates' rows at exactly 0 and every other row as enrolled, none of the
old ciphertexts' bytes is left in the store's files, and an identification with the removed template no longer
matches. Toy BFV (N = 2048, insecure_test_params) but real SEAL; SQLite, and PostgreSQL when CI provides one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tenseal.sealapi as sealapi

from privface.crypto import seal_arrays, seal_io
from privface.errors import ProtocolError
from privface.protocols.cryptomask import encoding
from privface.protocols.cryptomask.erase import EraseHolder
from privface.scale import NpySource, enrol, identify
from privface.scale.cryptomask_erase import erase_key
from privface.scale.cryptomask_gallery import CMGallery
from privface.scale.lifecycle import info, list_ids, update, withdraw
from tests.helpers.erasure import ENV, after_lease_expiry, assert_gone_from_postgres, kill_runs, store_files, windows

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")
DIM = 128


def _templates(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, DIM))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _gallery(tmp_path, n=1030, url=None, name="default", keys=None, insecure=True):
    """n > 1020 (the toy block: 4 stacks of δ = 255): two blocks, so that one stays untouched."""
    x = _templates(n, 5)
    np.save(tmp_path / "e.npy", x.astype(np.float32))
    url = url or f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([tmp_path / "e.npy"]), "cryptomask", tau=0.5, insecure_test_params=insecure, name=name,
          key_store_url=keys)
    return url, x


def decrypt_gallery(url, name="default", keys=None) -> list[np.ndarray]:
    """What the key generator finds in every stored block: its rows (k·δ, d), signed, decoded from the plaintext
    coefficients as ``encoding.encode_matrix`` laid them out."""
    g = CMGallery(url, name)
    key = erase_key(url, name, keys)
    dec, t = key._decryptor, key.t
    D, S, delta = encoding.stride(DIM), encoding.slices(DIM), g.delta
    out = []
    for arr in g.load_blocks(range(g.nblocks)):
        stacks = []
        for stack in arr:
            coeffs = np.zeros((S, key.n), dtype=np.int64)
            for s, ct_arr in enumerate(stack):
                pt = sealapi.Plaintext()
                dec.decrypt(seal_arrays.ciphertext_from_array(g.public.seal_context, key.pid, ct_arr,
                                                              ntt_form=False), pt)
                coeffs[s, :pt.coeff_count()] = seal_io.data_array(seal_io.save(pt), pt.coeff_count(), "pt")
            signed = np.where(coeffs >= t // 2, coeffs - t, coeffs)
            rows = signed[:, :delta * D].reshape(S, delta, D)[:, :, ::-1].transpose(1, 0, 2).reshape(delta, S * D)
            stacks.append(rows[:, :DIM])
        out.append(np.concatenate(stacks))
    return out


def block_bytes(url, name="default") -> list[np.ndarray]:
    g = CMGallery(url, name)
    return g.load_blocks(range(g.nblocks))


def test_remove_erases_the_rows_and_the_old_bytes(tmp_path):
    url, x = _gallery(tmp_path)
    q = encoding.quantize(x)
    before, old = decrypt_gallery(url), block_bytes(url)
    assert np.array_equal(before[0], q[:1020]) and np.array_equal(before[1][:10], q[1020:])  # exact decryption
    files = store_files(tmp_path)
    assert all(w in files for w in windows(old[0][0].tobytes(), k=8) + windows(old[1].tobytes(), k=8))
    generation = info(url, tau=False)["generation"]
    report = withdraw(url, ["e.3", "e.300"], key=erase_key(url))
    assert report["erased"] is True and report["blocks_written"] == 1 and report["stacks_refreshed"] == 2
    after = decrypt_gallery(url)
    assert not after[0][[3, 300]].any()  # the removed rows: exactly 0
    kept = np.ones(1020, dtype=bool)
    kept[[3, 300]] = False
    assert np.array_equal(after[0][kept], before[0][kept]) and np.array_equal(after[1], before[1])
    files = store_files(tmp_path)
    for stack in (0, 1):  # the refreshed stacks: no 64-byte window of the old ciphertexts left
        assert not any(w in files for w in windows(old[0][stack].tobytes(), k=32))
    assert all(w in files for w in windows(old[0][2].tobytes(), k=8) + windows(old[1].tobytes(), k=8))  # the rest
    assert not (tmp_path / "g.db-wal").exists() or (tmp_path / "g.db-wal").stat().st_size == 0
    assert identify(x[3], url)["match"] is False and identify(x[300], url)["match"] is False
    assert identify(x[4], url)["match"] is True and identify(x[1025], url)["match"] is True
    assert "e.3" not in list_ids(url) and info(url, tau=False)["withdrawn"] == 2
    assert info(url, tau=False)["generation"] == generation + 1  # one block rewritten


def test_update_erases_the_old_template_and_adds_the_new(tmp_path):
    url, x = _gallery(tmp_path, n=30)
    old = block_bytes(url)[0][0]
    y = _templates(1, 9)
    np.save(tmp_path / "e.npy", y.astype(np.float32))  # id e.0
    report = update(url, NpySource([tmp_path / "e.npy"]), key=erase_key(url))
    assert report["erased"] is True and report["replaced"] == 1 and report["n"] == 30 and report["blocks_written"] == 1
    got = decrypt_gallery(url)[0]
    assert np.array_equal(got[0], encoding.quantize(y)[0])  # the new template in the old one's row, in one write
    assert np.array_equal(got[1:30], encoding.quantize(x[1:30])) and not got[30:].any()
    assert not any(w in store_files(tmp_path) for w in windows(old.tobytes(), k=32))
    assert identify(y[0], url)["match"] is True and identify(x[0], url)["match"] is False
    assert list_ids(url) == [f"e.{i}" for i in range(30)]


def test_kill_9_during_an_update_leaves_it_done_or_not_done(tmp_path, monkeypatch):
    """`privface gallery update` (cryptomask) killed at a random moment on a fresh copy each time: row 0 holds
    either the old template or the new one — never neither (the erasure and the new row are one block write) —,
    every other row is intact, the id stays enrolled; a re-run (once the lease expired) finishes it."""
    _, x = _gallery(tmp_path, n=30)
    q, y = encoding.quantize(x), _templates(1, 9)
    np.save(tmp_path / "e.npy", y.astype(np.float32))  # id e.0
    new = encoding.quantize(y)[0]

    def check(url, killed):
        got = decrypt_gallery(url)[0]
        done = np.array_equal(got[0], new)
        assert done or np.array_equal(got[0], q[0])
        assert np.array_equal(got[1:30], q[1:30]) and list_ids(url) == [f"e.{i}" for i in range(30)]
        if not done:
            after_lease_expiry(monkeypatch, lambda: update(url, NpySource([tmp_path / "e.npy"]), key=erase_key(url)))
        assert np.array_equal(decrypt_gallery(url)[0][0], new) and identify(y[0], url)["match"] is True
        return done

    kill_runs(tmp_path, ("g.db", "g.keys.db"), lambda url: ["-m", "privface.cli", "gallery", "update", "--gallery",
                                                              url, str(tmp_path / "e.npy")], check, delay=(1.0, 8.0))


def test_cli_remove_erases_and_enrolment_goes_on(tmp_path):
    url, x = _gallery(tmp_path, n=6)
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "remove", "--gallery", url, "e.2", "--json"],
                       env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["erased"] is True and got["withdrawn"] == ["e.2"] and "NOT erased" not in r.stderr
    assert not decrypt_gallery(url)[0][2].any()
    assert identify(x[2], url)["match"] is False and identify(x[3], url)["match"] is True
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "remove", "--gallery", url, "--withdraw-only",
                        "e.3"], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "key generator" in r.stderr and "e.3" in list_ids(url)


def test_the_key_generator_sees_pads_and_refuses_what_is_not_a_ciphertext(tmp_path):
    """The KG's input is the stored ciphertext plus a uniform pad mod t: it decrypts to m + r, whose coefficients
    are spread over Z_t whatever m is; malformed input and a lying answer are refused, nothing written."""
    url, x = _gallery(tmp_path, n=6)
    g, key = CMGallery(url), erase_key(url)
    holder = EraseHolder(g.public)
    cts = g.load_blocks([0])[0][0]
    masked, r = holder.mask(cts)
    keep = np.ones((len(cts), key.n), dtype=bool)
    u = np.stack([_plain(key, c) for c in masked])
    assert np.array_equal((u - r.astype(np.int64)) % key.t, np.stack([_plain(key, c) for c in cts]))
    assert u[:, :6 * 8].std() > key.t / 4  # where the templates sit: uniform-looking, not the small template values
    with pytest.raises(ProtocolError):
        key.refresh(masked[:, :, :2], keep)
    with pytest.raises(ProtocolError):
        key.refresh(np.full_like(masked, 2 ** 31), keep)
    with pytest.raises(ProtocolError):
        key.refresh(masked, keep[:, :-1])

    class Liar:
        def refresh(self, masked, keep):
            return key.refresh(masked, keep)[:-1]

    old = block_bytes(url)[0]
    with pytest.raises(ProtocolError):
        withdraw(url, ["e.1"], key=Liar())
    assert np.array_equal(block_bytes(url)[0], old) and "e.1" in list_ids(url)


def _plain(key, ct_arr) -> np.ndarray:
    pt = sealapi.Plaintext()
    key._decryptor.decrypt(seal_arrays.ciphertext_from_array(key.public.seal_context, key.pid, ct_arr,
                                                             ntt_form=False), pt)
    out = np.zeros(key.n, dtype=np.int64)
    out[:pt.coeff_count()] = seal_io.data_array(seal_io.save(pt), pt.coeff_count(), "pt")
    return out


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_remove_erases(tmp_path):
    """PostgreSQL: the refreshed block is new rows, the old rows deleted; after the operator's VACUUM (FULL)
    (docs/operations.md) no old window is in the table's files."""
    import secrets


    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"
    url, x = _gallery(tmp_path, n=20, url=PG_URL, name=name, keys=keys)
    old = block_bytes(url, name)[0][0].tobytes()
    report = withdraw(url, ["e.5"], name, key=erase_key(url, name, keys))
    assert report["erased"] is True
    got = decrypt_gallery(url, name, keys)[0]
    assert not got[5].any() and np.array_equal(np.delete(got[:20], 5, axis=0), np.delete(encoding.quantize(x), 5, 0))
    assert identify(x[5], url, key_store_url=keys, name=name)["match"] is False
    assert identify(x[6], url, key_store_url=keys, name=name)["match"] is True
    assert_gone_from_postgres(PG_URL, name, windows(old, k=32))


@pytest.mark.slow
def test_remove_erases_at_real_parameters(tmp_path):
    """CM_BFV (N = 4096, 109-bit q, t = 2^20), d = 128: the removed row decrypts to 0, the others as enrolled, the
    old stack's bytes are gone and the removed template no longer matches."""
    url, x = _gallery(tmp_path, n=12, insecure=False)
    old = block_bytes(url)[0][0].tobytes()
    withdraw(url, ["e.6"], key=erase_key(url))
    got = decrypt_gallery(url)[0][:12]
    assert not got[6].any() and np.array_equal(np.delete(got, 6, 0), np.delete(encoding.quantize(x), 6, 0))
    assert not any(w in store_files(tmp_path) for w in windows(old, k=64))
    assert identify(x[6], url)["match"] is False and identify(x[2], url)["match"] is True


def test_kill_9_during_an_erasing_remove_leaves_it_done_or_not_done(tmp_path, monkeypatch):
    """`privface gallery remove` (cryptomask) killed at a random moment, on a fresh copy each time: the gallery loads,
    the row is either still enrolled and intact or gone and 0, and a re-run (once the lease expired) finishes it."""
    _, x = _gallery(tmp_path, n=30)
    before = decrypt_gallery(f"sqlite:///{tmp_path}/g.db")[0]

    def check(url, killed):
        got, done = decrypt_gallery(url)[0], "e.7" not in list_ids(url)
        assert np.array_equal(np.delete(got, 7, 0), np.delete(before, 7, 0))
        assert (not got[7].any()) if done else np.array_equal(got[7], before[7])
        if not done:
            after_lease_expiry(monkeypatch, lambda: withdraw(url, ["e.7"], key=erase_key(url)))
        assert not decrypt_gallery(url)[0][7].any() and identify(x[7], url)["match"] is False
        return done

    kill_runs(tmp_path, ("g.db", "g.keys.db"), lambda url: ["-m", "privface.cli", "gallery", "remove", "--gallery",
                                                              url, "e.7"], check, delay=(1.0, 8.0))
