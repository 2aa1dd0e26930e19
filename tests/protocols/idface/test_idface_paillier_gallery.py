"""Persisted idface-paillier galleries (issue 7, deliverable 4; seed 003 §4.3): enrol, identify, resume, damaged
records, sk kept in the key store only, Ray identical to one process, the CLI.

Toy Paillier (512-bit N, insecure_test_params): d = 128, β = 15 → p = 16, m = 127 templates per block, so a
300-template gallery spans 3 blocks; each block is 2·128 ciphertexts of 128 bytes.
"""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from privface.protocols.idface import plaintext_scores, t_alpha
from privface.scale import Gallery, GalleryError, NpySource, enrol, gallery_ids, identify, key_server
from privface.scale import gallery as gal

SCHEME = "idface-paillier"


def _unit(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _npy(tmp_path, x, name="emb"):
    path = tmp_path / f"{name}.npy"
    np.save(path, x.astype(np.float32))
    return str(path)


def _records(path):
    return dict(sqlite3.connect(path).execute("SELECT subject_id, record FROM records").fetchall())


def _put(path, subject, record):
    db = sqlite3.connect(path)
    db.execute("UPDATE records SET record=? WHERE subject_id=?", (record, subject))
    db.commit()


class _Stop(Exception):
    pass


@pytest.fixture
def gallery300(tmp_path):
    x = _unit(300, 128, 11)
    src = NpySource([_npy(tmp_path, x)])
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/k.db"
    rep = enrol(url, src, SCHEME, key_store_url=keys, insecure_test_params=True, tau=15)
    return x, src, url, keys, rep


def test_identify_equals_plaintext_matches_and_rejects(gallery300):
    x, src, url, keys, rep = gallery300
    assert (rep.blocks, rep.templates_per_block, rep.beta) == (3, 127, 15)
    assert rep.storage_bytes == 3 * 2 * 128 * 128  # 2d ciphertexts of |N²| = 1024 bits per block
    assert rep.storage_bytes_per_identity == round(rep.storage_bytes / 300, 1)
    g = Gallery(url)
    assert g.settings.scheme == SCHEME and g.meta["paillier_n"] == format(int(g.public_context.n), "x")
    local, key = g.local_server(), key_server(g, keys)
    rng = np.random.default_rng(12)
    for k in (0, 126, 127, 299):  # an exact copy scores β = 15 = τ; a noisy copy gives what plaintext gives
        y = x[k] + 0.2 * rng.standard_normal(128) / np.sqrt(128)
        msg = local.identify_request(y[None])
        assert len(msg.values) == 3 and msg.counts == [127, 127, 46]  # (ct⁺, ct⁻) per block: 2 decryptions each
        want = plaintext_scores(t_alpha(x, 85), t_alpha(y[None], 15))
        assert np.array_equal(key.secret.decrypt_scores(msg), want)
        best = int(np.argmax(want))
        assert identify(y, url, key_store_url=keys)["id"] == (src.ids[best] if want[best] >= 15 else None)
        assert identify(x[k], url, key_store_url=keys)["id"] == f"emb.{k}"
    assert identify(_unit(1, 128, 99)[0], url, key_store_url=keys)["id"] is None  # a stranger: best < 15


def test_centring_and_lift_are_recorded_and_applied(tmp_path):
    x = _unit(60, 128, 13)
    url = f"sqlite:///{tmp_path}/g.db"
    rep = enrol(url, NpySource([_npy(tmp_path, x)]), SCHEME, tau=3.0, insecure_test_params=True, centring="shipped",
                lift=1024)
    g = Gallery(url)
    p = g.settings.idface_params()
    assert (rep.centring, rep.lift, g.meta["lift"]["dim"]) == ("shipped", 1024, 1024) and p.mean is not None
    y = x[33] + 0.1 * _unit(1, 128, 14)[0]
    msg = g.local_server().identify_request(y[None])
    want = plaintext_scores(p.enrol_transform(x), p.query_transform(y[None]))
    assert np.array_equal(key_server(g).secret.decrypt_scores(msg), want)
    with pytest.raises(GalleryError, match="lift"):
        enrol(url, NpySource([_npy(tmp_path, x)]), SCHEME, tau=3.0, insecure_test_params=True, centring="shipped")


def test_resume_after_interruption_gives_the_same_gallery(tmp_path):
    x = _unit(300, 128, 15)
    src = NpySource([_npy(tmp_path, x)])
    url = f"sqlite:///{tmp_path}/g.db"

    def stop_after_first(b):
        if b == 0:
            raise _Stop

    with pytest.raises(_Stop):
        enrol(url, src, SCHEME, tau=3.0, insecure_test_params=True, after_block=stop_after_first)
    with pytest.raises(GalleryError, match="incomplete"):
        Gallery(url)
    first = _records(f"{tmp_path}/g.db")["default.block.000000.part.0000"]
    report = enrol(url, src, SCHEME, tau=3.0, insecure_test_params=True)
    assert (report.blocks, report.blocks_encrypted, report.blocks_skipped) == (3, 2, 1)
    assert enrol(url, src, SCHEME, tau=3.0, insecure_test_params=True).blocks_encrypted == 0
    assert _records(f"{tmp_path}/g.db")["default.block.000000.part.0000"] == first
    g = Gallery(url)
    assert gallery_ids(g) == src.ids
    for k in (5, 200, 299):
        assert identify(x[k], url)["id"] == f"emb.{k}"
    with pytest.raises(GalleryError, match="scheme"):
        enrol(url, src, "idface-ckks", tau=3.0, insecure_test_params=True)


def test_secret_key_only_in_the_key_store(gallery300, tmp_path):
    _, _, url, keys, _ = gallery300
    g = Gallery(url)
    sk = key_server(g, keys).secret.secret
    p, q = (int(v).to_bytes(32, "big") for v in (sk.p, sk.q))
    for subject, record in _records(f"{tmp_path}/g.db").items():
        assert p not in record and q not in record and not subject.endswith(".sk")
    k_records = _records(f"{tmp_path}/k.db")
    assert set(k_records) == {"default.sk", "default.meta"} and k_records["default.sk"] == p + q


def _damage_ciphertext(path, value: bytes):
    """Overwrite block 0's first ciphertext and re-seal the commit's SHA-256: only the unit check can tell."""
    import hashlib

    recs = _records(path)
    part = bytearray(recs["default.block.000000.part.0000"])
    part[:len(value)] = value
    commit = json.loads(recs["default.block.000000"])
    commit["sha256"] = hashlib.sha256(part).hexdigest()
    _put(path, "default.block.000000.part.0000", bytes(part))
    _put(path, "default.block.000000", json.dumps(commit).encode())


@pytest.mark.parametrize("what", ["zero", "above N²", "shares a factor with N"])
def test_a_ciphertext_outside_the_units_is_refused(gallery300, tmp_path, what):
    _, _, url, _, _ = gallery300
    pk = Gallery(url).public_context
    value = {"zero": bytes(128), "above N²": b"\xff" * 128,
             "shares a factor with N": int(pk.n * 3).to_bytes(128, "big")}[what]
    _damage_ciphertext(f"{tmp_path}/g.db", value)
    with pytest.raises(GalleryError, match="block 0: ciphertext 0/0 is not a unit"):
        Gallery(url).load_blocks()
    assert len(Gallery(url).load_blocks([1, 2])[0]) == 2  # the other blocks still load


def test_damaged_records_are_gallery_errors(gallery300, tmp_path):
    _, _, url, keys, _ = gallery300
    path = f"{tmp_path}/g.db"
    good = _records(path)
    meta = json.loads(good["default.meta"])

    def broken(subject, record, match):
        _put(path, subject, record)
        with pytest.raises(GalleryError, match=match):
            Gallery(url).load_blocks()
        _put(path, subject, good[subject])

    broken("default.meta", b"{not json", "meta")
    broken("default.meta", json.dumps(dict(meta, paillier_n="abc1")).encode(), "paillier_n")
    broken("default.meta", json.dumps(dict(meta, capacity=0)).encode(), "capacity")
    broken("default.meta", json.dumps(dict(meta, n="300")).encode(), "damaged")
    broken("default.meta", json.dumps(dict(meta, beta=16)).encode(), "damaged")
    broken("default.pk", b"\x00" + good["default.pk"][1:], "public key")
    broken("default.pk", good["default.pk"][:-1] + b"\x00", "public key")  # even: not a modulus
    part = bytearray(good["default.block.000001.part.0000"])
    part[100] ^= 1
    broken("default.block.000001.part.0000", bytes(part), "damaged")
    broken("default.block.000002", b"[]", "commit record")
    keys_path = f"{tmp_path}/k.db"
    sk = _records(keys_path)["default.sk"]
    _put(keys_path, "default.sk", sk[:-1] + bytes([sk[-1] ^ 2]))
    with pytest.raises(GalleryError, match="secret key is damaged"):
        key_server(Gallery(url), keys)
    _put(keys_path, "default.sk", sk)
    assert key_server(Gallery(url), keys).tau == 15.0


_RAY_CHECK = """
import sys
import numpy as np
import ray
from privface.scale import Gallery, RayLocalServer, identify, key_server
from privface.scale.sharded import init_ray

url, keys = sys.argv[1], sys.argv[2]
x = np.random.default_rng(16).standard_normal((300, 128))
x /= np.linalg.norm(x, axis=1, keepdims=True)
probe = np.random.default_rng(42).standard_normal((1, 128))
g = Gallery(url)
single, key = g.local_server(), key_server(g, keys)
init_ray("auto", num_cpus=2)
try:
    sharded = RayLocalServer(g, workers=2)
    assert len(sharded.shards) == 2 and sharded.ids == single.ids
    for y in (x[7], x[250], probe[0]):
        a, b = single.identify_request(y[None]), sharded.identify_request(y[None])
        assert a.values == b.values and a.counts == b.counts == [127, 127, 46]
        assert single.resolve(key.decide(a)) == sharded.resolve(key.decide(b))
    sharded.close()
    out = identify(x[123], url, key_store_url=keys, ray="auto", workers=2)
    assert out["id"] == "emb.123" and out["shards"] == 2 and out["scheme"] == "idface-paillier", out
    assert identify(probe[0], url, key_store_url=keys, ray="auto", workers=2)["id"] is None
finally:
    ray.shutdown()
print("ray-ok")
"""


def test_ray_sharded_identify_equals_single_process(tmp_path):
    import subprocess
    import sys

    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/k.db"
    enrol(url, NpySource([_npy(tmp_path, _unit(300, 128, 16))]), SCHEME, key_store_url=keys,
          insecure_test_params=True, tau=15)
    r = subprocess.run([sys.executable, "-c", _RAY_CHECK, url, keys], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ray-ok" in r.stdout, r.stderr[-3000:]


def test_cli_enrol_and_identify(tmp_path):
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "privface.cli", *args], capture_output=True, text=True,
                              timeout=600)

    x = _unit(40, 128, 17)
    emb = _npy(tmp_path, x, "people")
    np.save(tmp_path / "probe.npy", x[17:18])
    np.save(tmp_path / "stranger.npy", _unit(1, 128, 18))
    url = f"sqlite:///{tmp_path}/g.db"
    r = cli("gallery", "enrol", "--scheme", SCHEME, "--gallery", url, "--tau", "15", "--insecure-test-params",
            "--centring", "none", "--lift", "0", "--json", emb)
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and rep["scheme"] == SCHEME and rep["blocks"] == 1 and rep["storage_bytes"] == 32768
    r = cli("identify", "--gallery", url, "--scheme", SCHEME, "--json", str(tmp_path / "probe.npy"))
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["id"] == "people.17" and out["scheme"] == SCHEME
    r = cli("identify", "--gallery", url, str(tmp_path / "stranger.npy"))
    assert r.returncode == 1 and r.stdout.splitlines()[0] == "no match"
    r = cli("identify", "--gallery", url, "--scheme", "idface-ckks", str(tmp_path / "probe.npy"))
    assert r.returncode == 2 and "enrolled with idface-paillier" in r.stderr and "Traceback" not in r.stderr
    assert not any(k.endswith(".sk") for k in _records(f"{tmp_path}/g.db"))
    assert gal.default_key_store(url) == f"sqlite:///{tmp_path}/g.keys.db"


def test_ident_http_roles_serve_an_idface_paillier_gallery(gallery300, tmp_path):
    """Key and local server over loopback HTTP (API keys on): answers equal in-process identify; a chunk with
    a ciphertext outside the units of Z_N², of the wrong length or with other counts is a 400, state kept."""
    import httpx

    from privface.protocols.hers.messages import KeyDecision, ScoreChunk
    from privface.scale.paillier_blocks import scores_to_bytes
    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.service.bindings.hers import IdentService
    from privface.service.clients.hers import IdentClient
    from privface.service.launch import serve_in_thread
    from privface.store.sqlite import SQLiteStore

    x, _, url, keys, _ = gallery300
    rng = np.random.default_rng(19)
    probes = [x[i] + 0.05 * rng.standard_normal(128) / np.sqrt(128) for i in (0, 200, 299)] + [_unit(1, 128, 99)[0]]
    with SQLiteStore(tmp_path / "k.db") as key_store, SQLiteStore(tmp_path / "local.db") as local_store:
        key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
        internal = key_keys.create("internal")[1]
        key = IdentService(key_store, role="key", insecure_test_params=True)
        with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
            local = IdentService(local_store, role="local", gallery_url=url, key_url=key_url, key_api_key=internal,
                                 chunk=2)  # 3 blocks: two chunks per request
            with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
                with IdentClient(local_url, api_key=local_keys.create("verify")[1]) as client:
                    got = [client.identify(p) for p in probes]
                g = local.party.gallery
                pk = g.public_context
                msg = local.party.local.identify_request(x[5][None])
                raw = scores_to_bytes(msg, pk)
                nb = pk.ciphertext_bytes

                def post(chunk):
                    return httpx.post(f"{key_url}/v1/ident/decide", content=chunk.to_bytes(), timeout=60,
                                      headers={"content-type": "application/octet-stream",
                                               "authorization": f"Bearer {internal}"})

                rid = bytes(range(16))
                for bad in (bytes(nb) + raw[nb:], b"\xff" * nb + raw[nb:], int(pk.n).to_bytes(nb, "big") + raw[nb:],
                            raw[:-1], raw + bytes(nb)):
                    r = post(ScoreChunk(rid, 0, 3, msg.counts, bad))
                    assert r.status_code == 400 and r.json()["type"] == "MessageError", r.text
                assert post(ScoreChunk(rid, 0, 3, [127, 127, 45], raw)).status_code == 400
                assert key.party._pending == {}
                r = post(ScoreChunk(rid, 0, 3, msg.counts, raw))
                assert r.status_code == 200 and KeyDecision.from_bytes(r.content).index == 5
    want = [identify(p, url, key_store_url=keys)["id"] for p in probes]
    assert got == want and got == ["emb.0", "emb.200", "emb.299", None]


PG_URL = __import__("os").environ.get("PRIVFACE_TEST_PG_URL")


@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_gallery_resumes_and_identifies(tmp_path):
    import secrets

    x = _unit(300, 128, 31)
    src = NpySource([_npy(tmp_path, x)])
    name, keys = f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"

    def stop_after_first(b):
        if b == 0:
            raise _Stop

    with pytest.raises(_Stop):
        enrol(PG_URL, src, SCHEME, key_store_url=keys, tau=3.0, insecure_test_params=True, name=name,
              after_block=stop_after_first)
    rep = enrol(PG_URL, src, SCHEME, key_store_url=keys, tau=3.0, insecure_test_params=True, name=name)
    assert (rep.blocks_encrypted, rep.blocks_skipped) == (2, 1)
    for k in (5, 299):
        assert identify(x[k], PG_URL, key_store_url=keys, name=name)["id"] == f"emb.{k}"
