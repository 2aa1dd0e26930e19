"""The tight-frame lift before T_α / T_β (protocols/idface/lift.py; our addition for 128-D embeddings).

The frame must have orthonormal rows (so inner products survive exactly), be fixed by its seed, be validated
in ``IDFaceParams``, and travel with persisted galleries so that a probe is centred and lifted as the enrolled
templates were. Encrypted answers must equal the plaintext transformed answers with the lift on. Toy key
sizes only behind insecure_test_params.
"""
import json

import numpy as np
import pytest

from privface.crypto.lattice import CKKS, LatticeParams, generate_lattice_keypair
from privface.crypto.paillier import generate_paillier_keypair
from privface.errors import TemplateError
from privface.protocols.hers import KeyServer, LocalServer, identify
from privface.protocols.idface import (
    IDFaceCKKS,
    IDFaceCKKSKey,
    IDFacePaillier,
    IDFacePaillierKey,
    IDFaceParams,
    plaintext_scores,
    t_alpha,
)
from privface.protocols.idface.centring import centre, shipped_mean
from privface.protocols.idface.lift import LIFT_SEED, MAX_LIFT, _frame, frame, lift
from privface.scale import Gallery, GalleryError, NpySource, enrol, key_server
from privface.scale import identify as gallery_identify
from privface.store import open_store

TOY_CKKS = LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36)
rng = np.random.default_rng(11)


def unit(n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def faces(n, d=128):
    """Unit templates sharing dlib's common offset (the shipped mean), as centring expects."""
    x = shipped_mean("dlib-resnet128") + 0.35 * unit(n, d)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ------------------------------------------------------------------ the frame
@pytest.mark.parametrize("d,D", [(128, 1024), (128, 2048), (16, 16), (5, 40)])
def test_frame_rows_are_orthonormal_and_inner_products_survive(d, D):
    f = frame(d, D)
    assert f.shape == (d, D) and f.dtype == np.float64
    assert np.allclose(f @ f.T, np.eye(d), atol=1e-12)
    x, y = unit(30, d), rng.standard_normal((7, d))
    assert np.allclose(lift(x, d, D) @ lift(y, d, D).T, x @ y.T, atol=1e-12)
    assert np.allclose(np.linalg.norm(lift(y, d, D), axis=1), np.linalg.norm(y, axis=1))


def test_frame_is_fixed_by_its_seed_and_read_only():
    a = frame(128, 1024, LIFT_SEED).copy()
    _frame.cache_clear()
    assert np.array_equal(frame(128, 1024, LIFT_SEED), a)  # recomputed, not only cached
    assert not np.allclose(frame(128, 1024, LIFT_SEED + 1), a)
    assert not np.allclose(frame(128, 2048, LIFT_SEED)[:, :1024], a)
    with pytest.raises(ValueError):
        frame(128, 1024)[0, 0] = 1.0


@pytest.mark.parametrize("d,D,seed", [(128, 127, 3), (128, MAX_LIFT + 1, 3), (128, 1024, -1), (128, 1024.0, 3)])
def test_frame_refuses_bad_dimensions_or_seeds(d, D, seed):
    with pytest.raises(TemplateError):
        frame(d, D, seed)


# ------------------------------------------------------------------ parameters
def test_params_carry_and_validate_the_lift():
    p = IDFaceParams.for_dim(128, lift=2048)
    assert (p.dim, p.width, p.alpha, p.beta, p.lift, p.lift_seed) == (128, 2048, 1365, 1365, 2048, LIFT_SEED)
    assert IDFaceParams.for_dim(128, 511, lift=1024).beta == 511 and IDFaceParams.for_dim(128, lift=1024).alpha == 682
    assert IDFaceParams.for_dim(128).width == 128 and IDFaceParams.for_dim(128).lift is None
    assert IDFaceParams(128, 170, 170, lift=256).width == 256
    for bad in (lambda: IDFaceParams.for_dim(128, 85, lift=1024),  # β of d = 128, not of D
                lambda: IDFaceParams.for_dim(128, lift=1000),  # no parameter set for D = 1000
                lambda: IDFaceParams(128, 300, 85),  # α > d without a lift
                lambda: IDFaceParams(128, 300, 85, lift=256),  # α > D
                lambda: IDFaceParams(128, 85, 85, lift=64),  # D < d
                lambda: IDFaceParams(128, 85, 85, lift=256, lift_seed=-2)):
        with pytest.raises(TemplateError):
            bad()


def test_transform_is_centre_then_lift_then_t_alpha():
    mu = shipped_mean("dlib-resnet128")
    p = IDFaceParams.for_dim(128, 1023, mu, 2048)
    x = faces(20)
    want = lift(centre(x, mu), 128, 2048)
    assert np.array_equal(p.enrol_transform(x), t_alpha(want, 1365))
    assert np.array_equal(p.query_transform(x[3]), t_alpha(want[3:4], 1023))
    assert p.enrol_transform(x).shape == (20, 2048)
    with pytest.raises(TemplateError):
        p.enrol_transform(unit(2, 2048))  # the lift takes d-dimensional templates


def test_lift_brings_the_transformed_score_closer_to_the_cosine():
    """The reason for the lift: ⟨T_α(x), T_β(y)⟩ tracks cos θ far better from D = 2048 than from d = 128
    (measured: correlation 0.996 vs 0.952 over these pairs)."""
    x = unit(300, 128)
    y = x + rng.uniform(0.3, 1.5, (300, 1)) * unit(300, 128)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    cos = np.sum(x * y, axis=1)

    def miss(p):
        s = np.sum(p.enrol_transform(x).astype(np.int64) * p.query_transform(y), axis=1)
        return 1 - np.corrcoef(s, cos)[0, 1]

    assert miss(IDFaceParams.for_dim(128, lift=2048)) < 0.25 * miss(IDFaceParams.for_dim(128, 85))


# ------------------------------------------------------------------ encrypted answers with the lift
def test_ckks_answer_equals_the_plaintext_transformed_answer_with_the_lift():
    pub, sec = generate_lattice_keypair(TOY_CKKS, insecure_test_params=True)
    p = IDFaceParams.for_dim(128, mean=shipped_mean("dlib-resnet128"), lift=2048)
    scheme = IDFaceCKKS(pub, p)
    assert scheme.m == 4  # p = 1366: 1366^4 < 2^44 < 1366^5
    gallery = faces(60)
    local = LocalServer(scheme)
    local.enrol([f"id{i}" for i in range(60)], gallery)
    key = KeyServer(IDFaceCKKSKey(sec, p), tau=400)
    g = p.enrol_transform(gallery)
    for probe in (gallery[7] + 0.02 * unit(1, 128)[0], faces(1)[0]):
        ref = plaintext_scores(g, p.query_transform(probe))
        assert np.array_equal(key.secret.decrypt_scores(local.identify_request(probe)), ref)
        best = int(np.argmax(ref))
        assert identify(local, key, probe) == (f"id{best}" if ref[best] >= key.tau else None)
    assert identify(local, key, gallery[7]) == "id7"


def test_paillier_answer_equals_the_plaintext_transformed_answer_with_the_lift():
    pk, sk = generate_paillier_keypair(512, insecure_test_params=True)
    p = IDFaceParams(128, 170, 127, shipped_mean("dlib-resnet128"), lift=256)
    scheme = IDFacePaillier(pk, p)
    assert scheme.m == 73  # p = 128: ⌊511/7⌋
    gallery = faces(80)  # two blocks
    local = LocalServer(scheme)
    local.enrol([str(i) for i in range(80)], gallery)
    assert len(local.blocks) == 2
    key = KeyServer(IDFacePaillierKey(sk, p), tau=40)
    probe = gallery[75] + 0.02 * unit(1, 128)[0]
    ref = plaintext_scores(p.enrol_transform(gallery), p.query_transform(probe))
    assert np.array_equal(key.secret.decrypt_scores(local.identify_request(probe)), ref)
    assert identify(local, key, probe) == "75"


# ------------------------------------------------------------------ persisted galleries
def _npy(tmp_path, x, stem="people"):
    path = tmp_path / f"{stem}.npy"
    np.save(path, x)
    return str(path)


def test_gallery_records_centring_and_lift_and_identify_applies_them(tmp_path):
    x = faces(40)
    url = f"sqlite:///{tmp_path}/g.db"
    rep = enrol(url, NpySource([_npy(tmp_path, x)]), "idface-ckks", centring="shipped", lift=2048,
                insecure_test_params=True, backend="dlib-resnet128")  # faces() share dlib's offset
    assert (rep.centring, rep.lift, rep.beta, rep.blocks) == ("shipped", 2048, 1365, 1)
    with open_store(url) as store:
        meta = json.loads(store.get("gallery", "default.meta"))
    assert meta["lift"] == {"dim": 2048, "seed": LIFT_SEED}
    assert np.array_equal(meta["centring"]["mean"], shipped_mean("dlib-resnet128"))
    gallery = Gallery(url)
    p = gallery.settings.idface_params()
    assert p == IDFaceParams.for_dim(128, mean=shipped_mean("dlib-resnet128"), lift=2048)
    # the probe goes through the recorded transform: decrypted scores = ⟨T_α(lift(centre(x))), T_β(…)⟩
    local, key = gallery.local_server(), key_server(gallery)
    probe = x[12] + 0.02 * unit(1, 128)[0]
    want = plaintext_scores(p.enrol_transform(x), p.query_transform(probe))
    assert np.array_equal(key.secret.decrypt_scores(local.identify_request(probe[None])), want)
    assert gallery_identify(probe, url)["id"] == "people.12"
    # resuming with another lift or centring is refused, never mixed in
    for kw in ({"centring": "shipped"}, {"centring": "shipped", "lift": 1024}, {"lift": 2048}):
        with pytest.raises(GalleryError, match="other settings"):
            enrol(url, NpySource([_npy(tmp_path, x)]), "idface-ckks", tau=3.0, insecure_test_params=True,
                  backend="dlib-resnet128", **kw)
    assert enrol(url, NpySource([_npy(tmp_path, x)]), "idface-ckks", centring="shipped", lift=2048,
                 insecure_test_params=True, backend="dlib-resnet128").blocks_skipped == 1


def test_gallery_without_transform_entries_reads_as_none_and_damaged_entries_are_refused(tmp_path):
    x = unit(20, 128)
    url = f"sqlite:///{tmp_path}/g.db"
    enrol(url, NpySource([_npy(tmp_path, x)]), "idface-ckks", tau=3.0, insecure_test_params=True)
    with open_store(url) as store:
        meta = json.loads(store.get("gallery", "default.meta"))
        assert meta["centring"] is None and meta["lift"] is None
        for key in ("centring", "lift"):  # a gallery written before these entries existed
            del meta[key]
        store.put("gallery", "default.meta", json.dumps(meta).encode())
    assert Gallery(url).settings.idface_params() == IDFaceParams.for_dim(128)
    for damage in ({"lift": {"dim": 2048, "seed": "x"}}, {"lift": {"dim": 64, "seed": 3}},
                   {"lift": {"dim": "2048", "seed": 3}}, {"lift": {"dim": 2048, "seed": 3.5}},
                   {"centring": {"mean": [0.0] * 12}}, {"lift": 2048}):
        with open_store(url) as store:
            store.put("gallery", "default.meta", json.dumps({**meta, **damage}).encode())
        with pytest.raises(GalleryError, match="damaged"):
            Gallery(url)


def test_hers_galleries_refuse_centring_and_lift(tmp_path):
    src = NpySource([_npy(tmp_path, unit(5, 128))])
    for kw in ({"centring": "shipped"}, {"lift": 1024}):
        with pytest.raises(GalleryError):
            enrol(f"sqlite:///{tmp_path}/h.db", src, "hers", tau=0.5, insecure_test_params=True, **kw)
    with pytest.raises(GalleryError):  # the shipped dlib mean is 128-D
        enrol(f"sqlite:///{tmp_path}/i.db", NpySource([_npy(tmp_path, unit(5, 512), "w")]), "idface-ckks",
              centring="shipped", tau=3.0, insecure_test_params=True)


def test_cli_gallery_enrol_records_the_transform_and_identify_applies_it(tmp_path):
    import subprocess
    import sys

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "privface.cli", *args], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    x = faces(30)
    emb = _npy(tmp_path, x)
    np.save(tmp_path / "probe.npy", x[21:22] + 0.02 * unit(1, 128))
    url = f"sqlite:///{tmp_path}/g.db"
    rep = cli("gallery", "enrol", "--scheme", "idface-ckks", "--gallery", url, "--centring", "shipped",
              "--lift", "2048", "--insecure-test-params", "--json", emb)
    assert (rep["centring"], rep["lift"], rep["beta"]) == ("shipped", 2048, 1365)
    out = cli("identify", "--gallery", url, "--json", str(tmp_path / "probe.npy"))
    assert out["id"] == "people.21" and out["accepted"] is True
