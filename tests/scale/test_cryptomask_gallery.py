"""Persisted cryptomask galleries (issue 7 §4–5, seed 001 Alg. 1–3): enrolment into the store with the merge
indicator across calls, crash-safe resume, damaged records refused, secrets only in the key store, the 1-bit
answer equal to the in-process ``CryptoMask`` and to the quantised plaintext decision, Ray shards identical.

Toy BFV (N = 2048, insecure_test_params): δ = 255 templates per stack of 16 slices at d = 128; CTS_PER_BLOCK is 4
(1020 templates per block) and PART_BYTES is lowered to 64 KiB so a few thousand templates span several
multi-piece blocks.
"""
from __future__ import annotations

import json
import re
import sqlite3

import numpy as np
import pytest

from privface.protocols.cryptomask import CryptoMask, encoding
from privface.protocols.cryptomask.params import T_BITS
from privface.scale import NpySource, Source, enrol, identify
from privface.scale import cryptomask_gallery as cg
from privface.scale import gallery as gal
from privface.scale.cryptomask_identify import CSShard
from privface.scale.gallery import GalleryError
from privface.store.sqlite import SQLiteStore

D = 128


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(cg, "CTS_PER_BLOCK", 4)
    monkeypatch.setattr(cg, "PART_BYTES", 1 << 16)


def _unit(n, seed, d=D):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _npy(tmp_path, x, name):
    path = tmp_path / f"{name}.npy"
    np.save(path, x)
    return str(path)


def _near(x, seed, noise=0.3):
    y = x + noise * np.random.default_rng(seed).standard_normal(x.shape) / np.sqrt(x.size)
    return y / np.linalg.norm(y)


def _expected(x, y, tau=0.5):
    return bool((encoding.quantize(x) @ encoding.quantize(y)).max() >= round(tau * (1 << 2 * encoding.SCALE_BITS)))


def _inner_products(url, y, keys=None):
    """d_0 + d_1 mod t for every stored template (Alg. 2 through the persisted CS and verifier), signed."""
    g = cg.CMGallery(url)
    ver, _ = cg.verifier(g, keys)
    c1, c0, d0 = CSShard(url, "default").distances(ver.query(y))
    from privface.protocols.cryptomask.he import Distances

    t = 1 << T_BITS
    d = (d0 + ver.shares(Distances(c1, c0), g.n)) % t
    return np.where(d >= t // 2, d - t, d)


def _records(path):
    return dict(sqlite3.connect(path).execute("SELECT subject_id, record FROM records").fetchall())


class _Failing(Source):
    """A source that raises once a template at or beyond ``k`` is read (an interrupted enrolment)."""

    def __init__(self, inner: Source, k: int) -> None:
        self.inner, self.k, self.ids, self.dim = inner, k, inner.ids, inner.dim

    def templates(self, lo, hi):
        if hi > self.k:
            raise _Stop
        return self.inner.templates(lo, hi)


class _Stop(Exception):
    pass


def test_enrol_identify_equals_in_process_cryptomask_and_secrets_stay_apart(tmp_path):
    x = _unit(3400, 1)  # 4 blocks: 1020, 1020, 1020, 340 templates
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/k.db"
    rep = enrol(url, NpySource([_npy(tmp_path, x, "emb")]), "cryptomask", key_store_url=keys,
                tau=0.5, insecure_test_params=True)
    assert (rep.n, rep.blocks, rep.delta, rep.ind) == (3400, 4, 255, 3400 % 255)
    assert rep.storage_bytes == 14 * 16 * 2 * 3 * 2048 * 4
    assert rep.storage_bytes_per_identity == round(rep.storage_bytes / 3400, 1)
    cm = CryptoMask(D, tau=0.5, insecure_test_params=True)
    cm.enrol(x)
    probes = [_near(x[7], 2), _near(x[3230], 3), _unit(1, 4)[0], _unit(1, 5)[0]]
    answers = []
    for y in probes:
        out = identify(y, url, key_store_url=keys)
        assert out["id"] is None and out["scheme"] == "cryptomask" and out["n"] == 3400
        assert out["match"] == cm.identify(y).match == _expected(x, y)
        answers.append(out["match"])
    assert answers == [True, True, False, False]
    assert np.array_equal(_inner_products(url, probes[0], keys), encoding.quantize(x) @ encoding.quantize(probes[0]))
    g_rec, k_rec = _records(f"{tmp_path}/g.db"), _records(f"{tmp_path}/k.db")
    assert set(k_rec) == {"default.sk", "default.pk_v", "default.sk_v", "default.meta"}
    assert {k for k in g_rec if not k.startswith("default.block.")} == {"default.meta", "default.pk", "default.ksw",
                                                                          "default.galois"}
    for secret in (k_rec["default.sk"], k_rec["default.sk_v"]):
        assert not any(secret[-48:] in bytes(r) for r in g_rec.values())
    with pytest.raises(GalleryError, match="key store"):  # the default key store is not this gallery's
        identify(x[0], url)


def test_resume_after_interruption_mid_block_and_mid_rewrite(tmp_path, monkeypatch):
    a, b = _unit(1190, 6), _unit(2210, 7)
    url = f"sqlite:///{tmp_path}/g.db"
    src_a, src_b = NpySource([_npy(tmp_path, a, "a")]), NpySource([_npy(tmp_path, b, "b")])
    with pytest.raises(_Stop):  # block 0 (1020) committed, block 1 never written
        enrol(url, _Failing(src_a, 1105), "cryptomask", tau=0.5, insecure_test_params=True)
    with pytest.raises(GalleryError, match="incomplete"):
        cg.CMGallery(url)
    block0 = _records(f"{tmp_path}/g.db")["default.block.000000"]
    with pytest.raises(GalleryError, match="interrupted"):  # other inputs wait until this batch is finished
        enrol(url, src_b, "cryptomask", tau=0.5, insecure_test_params=True)
    rep = enrol(url, src_a, "cryptomask", tau=0.5, insecure_test_params=True)
    assert (rep.n, rep.added_now, rep.skipped, rep.ind) == (1190, 170, 1020, 170)
    assert _records(f"{tmp_path}/g.db")["default.block.000000"] == block0  # a full block is never rewritten

    # batch b: the merge into block 1 (170 → 1020 templates) crashes after its new pieces, before its commit record
    real_put = SQLiteStore.put

    def crash_on_commit(self, protocol, subject_id, record):
        if subject_id == "default.block.000001" and b'"gen": 1' in bytes(record):
            raise _Stop
        return real_put(self, protocol, subject_id, record)

    monkeypatch.setattr(SQLiteStore, "put", crash_on_commit)
    with pytest.raises(_Stop):
        enrol(url, src_b, "cryptomask", tau=0.5, insecure_test_params=True)
    monkeypatch.setattr(SQLiteStore, "put", real_put)
    rec = _records(f"{tmp_path}/g.db")
    assert json.loads(rec["default.block.000001"])["gen"] == 0 and "default.block.000001.g000001.part.0000" in rec
    with pytest.raises(_Stop):  # then it crashes again after the rewrite and one more block
        enrol(url, _Failing(src_b, 1700), "cryptomask", tau=0.5, insecure_test_params=True)
    rec = _records(f"{tmp_path}/g.db")
    assert json.loads(rec["default.block.000001"])["gen"] == 1 and "default.block.000001.g000000.part.0000" not in rec
    rep = enrol(url, src_b, "cryptomask", tau=0.5, insecure_test_params=True)
    assert (rep.n, rep.skipped, rep.added_now, rep.blocks) == (3400, 850, 1360, 4)
    again = enrol(url, src_b, "cryptomask", tau=0.5, insecure_test_params=True)
    assert (again.added_now, again.blocks_written) == (0, 0)
    g = cg.CMGallery(url)
    assert g.ids() == src_a.ids + src_b.ids  # nothing lost, nothing twice
    x = np.vstack([a, b])
    y = _near(a[1105], 8)  # a template of the merged stack that the crashed rewrite must not lose
    assert np.array_equal(_inner_products(url, y), encoding.quantize(x) @ encoding.quantize(y))
    assert identify(y, url)["match"] is True


def test_merge_indicator_across_enrol_calls(tmp_path):
    a, b, c = _unit(1190, 9), _unit(85, 10), _unit(340, 11)
    url = f"sqlite:///{tmp_path}/g.db"
    reps = [enrol(url, NpySource([_npy(tmp_path, v, n)]), "cryptomask", tau=0.5, insecure_test_params=True)
            for v, n in ((a, "a"), (b, "b"), (c, "c"))]
    assert [r.ind for r in reps] == [170, 0, 85] and [r.n for r in reps] == [1190, 1275, 1615]
    rec = _records(f"{tmp_path}/g.db")
    c1 = json.loads(rec["default.block.000001"])
    assert c1["ind"] == 595 % 255 and c1["shape"][:2] == [3, 16] and [len(r) for r in c1["ids"]] == [255, 255, 85]
    assert c1["ids"][0][169:171] == ["a.1189", "b.0"]  # b's first template went into a's last stack (Alg. 1 line 7)
    meta = json.loads(rec["default.meta"])
    assert [(bt["start"], bt["n"]) for bt in meta["batches"]] == [(0, 1190), (1190, 85), (1275, 340)]
    x = np.vstack([a, b, c])
    y = _near(b[0], 12)
    assert np.array_equal(_inner_products(url, y), encoding.quantize(x) @ encoding.quantize(y))
    with pytest.raises(GalleryError, match="already enrolled"):
        enrol(url, NpySource([_npy(tmp_path, a, "a")]), "cryptomask", tau=0.5, insecure_test_params=True)
    with pytest.raises(GalleryError, match="dim"):
        enrol(url, NpySource([_npy(tmp_path, _unit(3, 13, 64), "d64")]), "cryptomask", tau=0.5,
              insecure_test_params=True)
    with pytest.raises(GalleryError, match="scheme"):
        enrol(url, NpySource([_npy(tmp_path, _unit(3, 14), "h")]), "hers", tau=0.5, insecure_test_params=True)
    with pytest.raises(GalleryError, match="apply to idface"):
        enrol(url, NpySource([_npy(tmp_path, c, "c")]), "cryptomask", beta=15, tau=0.5, insecure_test_params=True)


def _damage(path, key, fn):
    db = sqlite3.connect(path)
    rec = db.execute("SELECT record FROM records WHERE subject_id=?", (key,)).fetchone()[0]
    db.execute("UPDATE records SET record=? WHERE subject_id=?", (fn(bytes(rec)), key))
    db.commit()


def _flip(rec):
    out = bytearray(rec)
    out[len(out) // 2] ^= 1
    return bytes(out)


@pytest.mark.parametrize("key, fn, match", [
    ("default.meta", lambda r: r[:-5], "meta.*damaged"),
    ("default.meta", lambda r: r.replace(b'"delta": 255', b'"delta": 256'), "meta.*damaged"),
    ("default.meta", lambda r: r.replace(b'"slices": 16', b'"slices": 8'), "meta.*damaged"),
    ("default.meta", lambda r: r.replace(b'"slices": 16, ', b''), "before cryptomask cut"),  # one row per ciphertext
    ("default.meta", lambda r: r.replace(b'"n": 1530', b'"n": 1531', 1), "meta.*damaged"),
    ("default.pk", lambda r: r[:100], "public key is damaged"),
    ("default.ksw", _flip, "k_sw"),
    ("default.galois", _flip, "Galois keys"),
    ("default.galois", lambda r: r[:-4], "Galois keys"),
    ("default.meta", lambda r: re.sub(rb'"galois_sha256": "[0-9a-f]+", ', b"", r), "re-create it"),  # before packing
    ("default.block.000000.g000000.part.0001", _flip, "SHA-256"),
    ("default.block.000001", lambda r: r.replace(b'"ind": 0', b'"ind": 1'), "commit record does not match"),
    ("default.block.000001", lambda r: r.replace(b'"a.1529"', b'1'), "commit record does not match"),
    ("default.block.000001", lambda r: b"{not json", "commit record is damaged"),
])
def test_damaged_records_give_gallery_errors(tmp_path, key, fn, match):
    url = f"sqlite:///{tmp_path}/g.db"
    x = _unit(1530, 15)
    enrol(url, NpySource([_npy(tmp_path, x, "a")]), "cryptomask", tau=0.5, insecure_test_params=True)
    _damage(f"{tmp_path}/g.db", key, fn)
    with pytest.raises(GalleryError, match=match):
        identify(x[0], url)


def test_foreign_key_store_is_refused(tmp_path):
    x = _unit(20, 16)
    url, url2 = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/g2.db"
    enrol(url, NpySource([_npy(tmp_path, x, "a")]), "cryptomask", tau=0.5, insecure_test_params=True)
    enrol(url2, NpySource([_npy(tmp_path, x, "a")]), "cryptomask", tau=0.5, insecure_test_params=True)
    with pytest.raises(GalleryError, match="another gallery"):
        identify(x[0], url, key_store_url=f"sqlite:///{tmp_path}/g2.keys.db")


_RAY_CHECK = """
import sqlite3
import sys
import numpy as np
import ray
from privface.scale.gallery import GalleryError
from privface.protocols.cryptomask import encoding
from privface.protocols.cryptomask.he import Distances
from privface.protocols.cryptomask.params import T_BITS
from privface.scale import identify
from privface.scale import cryptomask_gallery as cg
from privface.scale.cryptomask_identify import CSShard
from privface.scale.sharded import init_ray

url, path = sys.argv[1], sys.argv[2]
x = np.load(path)
y_match = x[4250] + 0.3 * np.random.default_rng(1).standard_normal(128) / np.sqrt(128)
y_match /= np.linalg.norm(y_match)
y_none = np.random.default_rng(2).standard_normal(128)
y_none /= np.linalg.norm(y_none)
g = cg.CMGallery(url)
ver, _ = cg.verifier(g)
init_ray("auto", num_cpus=2)
try:
    actor = ray.remote(num_cpus=1)(CSShard)
    shards = [actor.remote(url, "default", [0, 1]), actor.remote(url, "default", [2, 3, 4])]
    t = 1 << T_BITS
    for y in (y_match, y_none):
        q = ver.query(y)
        parts = ray.get([s.distances.remote(q) for s in shards])
        d0 = np.concatenate([p[2] for p in parts])
        d1 = np.concatenate([ver.shares(Distances(p[0], p[1]), len(p[2])) for p in parts])
        d = (d0 + d1) % t
        assert np.array_equal(np.where(d >= t // 2, d - t, d), encoding.quantize(x) @ encoding.quantize(y))
    for s in shards:
        ray.kill(s)
    for y, want in ((y_match, True), (y_none, False)):
        single, sharded = identify(y, url), identify(y, url, ray="auto", workers=2)
        assert single["match"] is sharded["match"] is want and sharded["shards"] == 2, (single, sharded)
        assert sharded["id"] is None  # each shard packs its own: at most one more pack (2·N·4 bytes) per shard
        assert 0 <= sharded["comm_bytes"] - single["comm_bytes"] <= 2 * 2048 * 4 * (sharded["shards"] - 1)
        assert single["rounds"] == sharded["rounds"] == 11  # the query, then Alg. 3 in one batch
    db = sqlite3.connect(url[len("sqlite:///"):])  # a damaged block in the second shard: a GalleryError, no actor left
    key = "default.block.000003.g000000.part.0000"
    rec = bytearray(db.execute("SELECT record FROM records WHERE subject_id=?", (key,)).fetchone()[0])
    rec[5] ^= 1
    db.execute("UPDATE records SET record=? WHERE subject_id=?", (bytes(rec), key))
    db.commit()
    try:
        identify(y_match, url, ray="auto", workers=2)
        raise AssertionError("a damaged block was not noticed")
    except GalleryError as e:
        assert "block 3" in str(e), e
finally:
    ray.shutdown()
print("ray-ok")
"""


def test_ray_sharded_bit_equals_single_process(tmp_path):
    # In a child process (as test_gallery.py): Ray's gRPC threads must not leak into later forking tests.
    import subprocess
    import sys

    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    x = _unit(4930, 17)  # 5 blocks: 4 × 1020 + 850
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([_npy(tmp_path, x, "emb")]), "cryptomask", tau=0.5, insecure_test_params=True)
    assert cg.CMGallery(url).nblocks == 5
    r = subprocess.run([sys.executable, "-c", _RAY_CHECK, url, _npy(tmp_path, x, "emb")], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and "ray-ok" in r.stdout, r.stderr[-3000:]


def test_cli_gallery_enrol_and_identify(tmp_path):
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "privface.cli", *args], capture_output=True, text=True,
                              timeout=600)

    x = _unit(40, 18)
    emb = _npy(tmp_path, x, "people")
    np.save(tmp_path / "mate.npy", _near(x[17], 19)[None])
    np.save(tmp_path / "stranger.npy", _unit(1, 20))
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/keys.db"
    r = cli("gallery", "enrol", "--scheme", "cryptomask", "--gallery", url, "--key-store", keys, "--tau", "0.5",
            "--insecure-test-params", "--json", emb)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["n"] == 40 and rep["scheme"] == "cryptomask" and rep["storage_bytes_per_identity"] > 0
    r = cli("identify", "--gallery", url, "--key-store", keys, "--json", str(tmp_path / "mate.npy"))
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["match"] is True and out["id"] is None and out["scheme"] == "cryptomask"
    r = cli("identify", "--gallery", url, "--key-store", keys, "--scheme", "cryptomask", str(tmp_path / "stranger.npy"))
    assert r.returncode == 1 and r.stdout.splitlines()[0] == "no match"
    r = cli("identify", "--gallery", url, "--key-store", keys, "--scheme", "hers", str(tmp_path / "mate.npy"))
    assert r.returncode == 2 and "enrolled with cryptomask" in r.stderr
    _damage(f"{tmp_path}/g.db", "default.ksw", _flip)
    r = cli("identify", "--gallery", url, "--key-store", keys, str(tmp_path / "mate.npy"))
    assert r.returncode == 2 and "k_sw" in r.stderr and "Traceback" not in r.stderr


def test_the_hers_idface_servers_refuse_a_cryptomask_gallery_by_name(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    enrol(url, NpySource([_npy(tmp_path, _unit(20, 7), "a")]), "cryptomask", tau=0.5, insecure_test_params=True,
          progress=False)
    with pytest.raises(GalleryError, match="cryptomask gallery"):
        gal.Gallery(url)


PG_URL = __import__("os").environ.get("PRIVFACE_TEST_PG_URL")


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_gallery_merges_across_enrol_calls_and_answers(tmp_path):
    """Alg. 1's rewrite of the last block (a new generation, then its commit) on PostgreSQL too."""
    import secrets

    x = _unit(1700, 21)
    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"
    enrol(PG_URL, NpySource([_npy(tmp_path, x[:680], "a")]), "cryptomask", key_store_url=keys,
          tau=0.5, insecure_test_params=True, name=name)
    rep = enrol(PG_URL, NpySource([_npy(tmp_path, x[680:], "b")]), "cryptomask", key_store_url=keys,
                tau=0.5, insecure_test_params=True, name=name)
    assert (rep.n, rep.ind) == (1700, 1700 % 255)
    for y in (_near(x[3], 22), _near(x[1615], 23), _unit(1, 24)[0]):
        assert identify(y, PG_URL, key_store_url=keys, name=name)["match"] == _expected(x, y)
