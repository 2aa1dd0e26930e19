"""Persistent encrypted galleries (issue 7 §4–5): resumable block-atomic enrolment, identification from the
stores, the sk kept in the key store only, and Ray-sharded IP_DB identical to single-process.

Toy CKKS (N = 2048, insecure_test_params): idface-ckks d = 128, β = 15 holds 2048·11 templates per block and
hers 1024, so small galleries still span several blocks (PART_BYTES is lowered to exercise multi-piece blocks).
"""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from privface.errors import TemplateError
from privface.protocols.idface import plaintext_scores, t_alpha
from privface.scale import Gallery, GalleryError, NpySource, enrol, gallery_ids, identify, key_server
from privface.scale import gallery as gal


def _unit(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(gal, "PART_BYTES", 1 << 20)


def _npy(tmp_path, x, name="emb"):
    path = tmp_path / f"{name}.npy"
    np.save(path, x.astype(np.float32))
    return str(path)


def _expected_idface(x, y, settings_tau=3):
    s = plaintext_scores(t_alpha(x, 85), t_alpha(y, 15))
    best = int(np.argmax(s))
    return best if s[best] >= settings_tau else None


class _Stop(Exception):
    pass


def test_hers_resume_after_interruption_gives_the_same_gallery(tmp_path, small_parts):
    x = _unit(2500, 128, 1)  # 3 blocks of ≤ 1024
    src = NpySource([_npy(tmp_path, x)])
    url = f"sqlite:///{tmp_path}/g.db"

    def stop_after_first(b):
        if b == 0:
            raise _Stop

    with pytest.raises(_Stop):
        enrol(url, src, "hers", tau=0.5, insecure_test_params=True, after_block=stop_after_first)
    with pytest.raises(GalleryError, match="incomplete"):
        Gallery(url)
    first = sqlite3.connect(f"{tmp_path}/g.db").execute(
        "SELECT record FROM records WHERE subject_id='default.block.000000'").fetchone()[0]
    report = enrol(url, src, "hers", tau=0.5, insecure_test_params=True)
    assert (report.blocks, report.blocks_encrypted, report.blocks_skipped) == (3, 2, 1)
    again = enrol(url, src, "hers", tau=0.5, insecure_test_params=True)
    assert (again.blocks_encrypted, again.blocks_skipped) == (0, 3)
    g = Gallery(url)
    assert sqlite3.connect(f"{tmp_path}/g.db").execute(
        "SELECT record FROM records WHERE subject_id='default.block.000000'").fetchone()[0] == first
    assert gallery_ids(g) == src.ids == [f"emb.{i}" for i in range(2500)]
    blocks, _ = g.load_blocks()
    assert [b.count for b in blocks] == [1024, 1024, 452]
    for k in (0, 1500, 2499):  # each probe is its own template: the best cosine is 1 ≥ τ = 0.5
        assert identify(x[k], url)["id"] == f"emb.{k}"
    assert identify(_unit(1, 128, 99)[0], url)["id"] is None  # a stranger: best cosine ≈ 0.3 < 0.5


def test_blocks_encrypted_in_worker_processes_make_the_same_gallery(tmp_path, small_parts):
    """``workers=2`` (scale.encrypt_pool): the blocks are encrypted in two spawned processes and written here in
    order — an interrupted enrolment resumes (in process) and every template is identified as itself."""
    x = _unit(4600, 128, 5)  # 5 blocks of ≤ 1024
    src = NpySource([_npy(tmp_path, x)])
    url = f"sqlite:///{tmp_path}/g.db"
    seen = []

    def stop_after_third(b):
        seen.append(b)
        if b == 2:
            raise _Stop

    with pytest.raises(_Stop):
        enrol(url, src, "hers", tau=0.5, insecure_test_params=True, after_block=stop_after_third, workers=2)
    assert seen == [0, 1, 2]
    report = enrol(url, src, "hers", tau=0.5, insecure_test_params=True, workers=1)
    assert (report.blocks, report.blocks_encrypted, report.blocks_skipped) == (5, 2, 3)
    g = Gallery(url)
    assert [b.count for b in g.load_blocks()[0]] == [1024] * 4 + [504]
    for k in (0, 1023, 1024, 2500, 4599):
        assert identify(x[k], url)["id"] == f"emb.{k}"
    url2 = f"sqlite:///{tmp_path}/i.db"
    enrol(url2, src, "idface-ckks", tau=3.0, insecure_test_params=True, workers=2)
    for k in (7, 4599):
        assert identify(x[k], url2)["id"] == f"emb.{k}"


def test_idface_gallery_answers_equal_plaintext_and_keys_stay_apart(tmp_path):
    x = _unit(300, 128, 2)
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/k.db"
    src = NpySource([_npy(tmp_path, x[:200], "a"), _npy(tmp_path, x[200:], "b")])
    rep = enrol(url, src, "idface-ckks", key_store_url=keys, tau=3.0, insecure_test_params=True)
    assert rep.beta == 15 and rep.blocks == 1 and rep.storage_bytes_per_identity > 0
    rng = np.random.default_rng(3)
    for k in (0, 150, 299):
        y = x[k] + 0.3 * rng.standard_normal(128) / np.sqrt(128)
        want = _expected_idface(x, y[None])
        out = identify(y, url, key_store_url=keys)
        assert out["id"] == (None if want is None else src.ids[want])
    assert out["id"] is not None
    # the gallery store holds no secret key; the key store holds no ciphertext
    g_keys = {r[0] for r in sqlite3.connect(f"{tmp_path}/g.db").execute("SELECT subject_id FROM records")}
    k_keys = {r[0] for r in sqlite3.connect(f"{tmp_path}/k.db").execute("SELECT subject_id FROM records")}
    assert not any(k.endswith(".sk") for k in g_keys) and k_keys == {"default.sk", "default.meta"}
    with pytest.raises(GalleryError, match="key store"):  # default key store does not exist / is empty
        identify(x[0], url)


def test_changed_inputs_or_settings_are_refused(tmp_path):
    x = _unit(40, 128, 4)
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([_npy(tmp_path, x)]), "idface-ckks", tau=3.0, insecure_test_params=True)
    with pytest.raises(GalleryError, match="ids_sha256|n"):
        enrol(url, NpySource([_npy(tmp_path, x[:30], "other")]), "idface-ckks", tau=3.0, insecure_test_params=True)
    with pytest.raises(GalleryError, match="beta"):
        enrol(url, NpySource([_npy(tmp_path, x)]), "idface-ckks", beta=31, tau=3.0, insecure_test_params=True)
    with pytest.raises(GalleryError, match="scheme"):
        enrol(url, NpySource([_npy(tmp_path, x)]), "hers", tau=0.5, insecure_test_params=True)
    with pytest.raises(TemplateError):
        enrol(f"sqlite:///{tmp_path}/h.db", NpySource([_npy(tmp_path, _unit(5, 100, 0), "d100")]), "idface-ckks",
              tau=3.0, insecure_test_params=True)
    with pytest.raises(GalleryError, match="--key-store"):
        enrol("postgresql://nobody@localhost/x", NpySource([_npy(tmp_path, x)]), "hers", tau=0.5,
              insecure_test_params=True)


def test_damaged_block_and_foreign_key_store_are_detected(tmp_path, small_parts):
    x = _unit(100, 128, 5)
    url, url2 = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/g2.db"
    src = NpySource([_npy(tmp_path, x)])
    enrol(url, src, "hers", tau=0.5, insecure_test_params=True)
    enrol(url2, src, "hers", tau=0.5, insecure_test_params=True)
    with pytest.raises(GalleryError, match="another gallery"):
        key_server(Gallery(url), f"sqlite:///{tmp_path}/g2.keys.db")
    db = sqlite3.connect(f"{tmp_path}/g.db")
    part = "default.block.000000.part.0001"
    rec = bytearray(db.execute("SELECT record FROM records WHERE subject_id=?", (part,)).fetchone()[0])
    rec[7] ^= 1
    db.execute("UPDATE records SET record=? WHERE subject_id=?", (bytes(rec), part))
    db.commit()
    with pytest.raises(GalleryError, match="damaged"):
        Gallery(url).load_blocks()


_RAY_CHECK = """
import sys
import numpy as np
import ray
from privface.scale import Gallery, RayLocalServer, identify, key_server
from privface.scale.sharded import init_ray

url, seed = sys.argv[1], int(sys.argv[2])
x = np.random.default_rng(seed).standard_normal((2500, 128))
x /= np.linalg.norm(x, axis=1, keepdims=True)
probe = np.random.default_rng(42).standard_normal((1, 128))
probe /= np.linalg.norm(probe)
g = Gallery(url)
single, key = g.local_server(), key_server(g)
init_ray("auto", num_cpus=2)
try:
    sharded = RayLocalServer(g, workers=2)
    assert len(sharded.shards) == 2 and sharded.ids == single.ids
    for y in (x[7], x[2400], probe[0]):
        a, b = single.identify_request(y[None]), sharded.identify_request(y[None])
        assert np.array_equal(a.arrays, b.arrays) and a.counts == b.counts
        assert single.resolve(key.decide(a)) == sharded.resolve(key.decide(b))
    sharded.close()
    out = identify(x[1234], url, ray="auto", workers=2)
    assert out["id"] == "emb.1234" and out["shards"] == 2, out
    import sqlite3
    from privface.scale import GalleryError
    db = sqlite3.connect(url[len("sqlite:///"):])
    part = "default.block.000001.part.0000"
    rec = bytearray(db.execute("SELECT record FROM records WHERE subject_id=?", (part,)).fetchone()[0])
    rec[7] ^= 1
    db.execute("UPDATE records SET record=? WHERE subject_id=?", (bytes(rec), part))
    db.commit()
    try:  # a damaged block in a shard is the GalleryError one process raises, not an actor's death
        RayLocalServer(g, workers=2)
        raise AssertionError("a damaged block was not detected")
    except GalleryError as e:
        assert "block 1 is damaged" in str(e), e
finally:
    ray.shutdown()
print("ray-ok")
"""


def test_ray_sharded_identify_equals_single_process(tmp_path):
    # In a child process: Ray leaves gRPC threads behind in the process that called ray.init, and a later
    # test that forks worker processes (multiprocessing) would inherit their locked mutexes and hang.
    import subprocess
    import sys

    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    x = _unit(2500, 128, 6)
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([_npy(tmp_path, x)]), "hers", tau=0.5, insecure_test_params=True)
    r = subprocess.run([sys.executable, "-c", _RAY_CHECK, url, "6"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ray-ok" in r.stdout, r.stderr[-3000:]


def _cli(*args, check=True):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "privface.cli", *args], capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode in (0, 1), r.stderr
    return r


def test_cli_gallery_enrol_and_identify_images(tmp_path):
    """Face photos → hers gallery; a genuine altered copy is found, an unenrolled face is "no match"."""
    from PIL import Image

    from privface import demo_data

    faces = tmp_path / "faces"
    faces.mkdir()
    Image.open(demo_data.enrolled_photo()).convert("RGB").save(faces / "hopper.png")
    Image.open(demo_data.impostor_photos()["astronaut (Eileen Collins)"]).convert("RGB").save(faces / "collins.png")
    probe = tmp_path / "probe.png"
    Image.fromarray(demo_data.altered_copies(demo_data.enrolled_photo())["mirrored, darker"]).save(probe)
    url = f"sqlite:///{tmp_path}/g.db"
    # τ = 0.95 cosine for dlib-resnet128 (demo photos: genuine ≥ 0.993, impostors ≤ 0.883)
    rep = _cli("gallery", "enrol", "--scheme", "hers", "--gallery", url, "--tau", "0.95", "--insecure-test-params",
               "--json", str(faces))
    assert json.loads(rep.stdout)["n"] == 2
    r = _cli("identify", "--gallery", url, "--scheme", "hers", str(probe))
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "hopper" and "ip_db_s" in r.stdout
    r = _cli("identify", "--gallery", url, str(demo_data.impostor_photos()["cameraman"]))
    assert r.returncode == 1 and r.stdout.splitlines()[0] == "no match"
    r = _cli("identify", "--gallery", url, "--scheme", "idface-ckks", str(probe), check=False)
    assert r.returncode == 2 and "enrolled with hers" in r.stderr and "Traceback" not in r.stderr


def test_cli_gallery_npy_json(tmp_path):
    x = _unit(50, 128, 8)
    emb = _npy(tmp_path, x, "people")
    np.save(tmp_path / "probe.npy", x[17:18])
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/keys.db"
    _cli("gallery", "enrol", "--scheme", "idface-ckks", "--gallery", url, "--key-store", keys,
         "--insecure-test-params", "--json", emb)
    out = json.loads(_cli("identify", "--gallery", url, "--key-store", keys, "--json",
                          str(tmp_path / "probe.npy")).stdout)
    assert out["id"] == "people.17" and out["accepted"] is True and out["scheme"] == "idface-ckks"
    r = _cli("identify", "--server", "http://127.0.0.1:9", "--ray", "auto", str(tmp_path / "probe.npy"), check=False)
    assert r.returncode == 2 and "go with --gallery" in r.stderr


def test_named_galleries_share_a_store(tmp_path):
    x, z = _unit(30, 128, 9), _unit(20, 128, 10)
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([_npy(tmp_path, x, "x")]), "hers", tau=0.5, insecure_test_params=True)
    enrol(url, NpySource([_npy(tmp_path, z, "z")]), "idface-ckks", tau=3.0, insecure_test_params=True, name="second")
    assert identify(x[3], url)["id"] == "x.3"
    assert identify(z[4], url, name="second")["id"] == "z.4"
    with pytest.raises(GalleryError, match="name"):
        Gallery(url, "Bad Name")


PG_URL = __import__("os").environ.get("PRIVFACE_TEST_PG_URL")


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_gallery_resumes(tmp_path, small_parts):
    import secrets

    x = _unit(2100, 128, 11)  # 3 hers blocks, 2 pieces each
    src = NpySource([_npy(tmp_path, x)])
    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"

    def stop(b):
        if b == 1:
            raise _Stop

    with pytest.raises(_Stop):
        enrol(PG_URL, src, "hers", key_store_url=keys, tau=0.5, insecure_test_params=True, name=name, after_block=stop)
    rep = enrol(PG_URL, src, "hers", key_store_url=keys, tau=0.5, insecure_test_params=True, name=name)
    assert (rep.blocks_encrypted, rep.blocks_skipped) == (1, 2)
    assert identify(x[2050], PG_URL, key_store_url=keys, name=name)["id"] == "emb.2050"


def test_the_gallery_records_its_backend_and_refuses_another(tmp_path):
    """Issue 36: a gallery records the face backend of its templates; a probe of another backend is refused, and
    resuming with another backend too; a gallery made before the record reads as dlib-resnet128."""
    import subprocess
    import sys

    from privface import demo_data
    from privface.scale.layout import LOCAL, check_backend, record_key
    from privface.store import open_store

    x, url = _unit(20, 128, 5), f"sqlite:///{tmp_path}/g.db"
    src = NpySource([_npy(tmp_path, x)])
    enrol(url, src, "hers", tau=0.5, insecure_test_params=True, backend="sface")
    g = Gallery(url)
    assert g.backend == "sface" and g.meta["backend"] == "sface"
    check_backend(g.meta, "sface")
    with pytest.raises(GalleryError, match="holds sface templates; this face was embedded with dlib-resnet128"):
        check_backend(g.meta, "dlib-resnet128")
    with pytest.raises(GalleryError, match="backend"):
        enrol(url, src, "hers", tau=0.5, insecure_test_params=True, backend="dlib-resnet128")
    r = subprocess.run([sys.executable, "-m", "privface.cli", "identify", "--gallery", url,
                        str(demo_data.enrolled_photo()), "--backend", "dlib-resnet128"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "holds sface templates" in r.stderr

    with open_store(url) as local:  # a gallery from before issue 36: no backend in its meta
        meta = json.loads(local.get(LOCAL, record_key("default", "meta")))
        del meta["backend"]
        local.put(LOCAL, record_key("default", "meta"), json.dumps(meta).encode())
    assert Gallery(url).backend == "dlib-resnet128"
    with pytest.raises(GalleryError, match="backend"):
        enrol(url, src, "hers", tau=0.5, insecure_test_params=True, backend="sface")
    assert enrol(url, src, "hers", tau=0.5, insecure_test_params=True, backend="dlib-resnet128").n == 20
