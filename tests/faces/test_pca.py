"""Eigenfaces backend (seed paper 000 §VI-E): training, embedding, safe persistence."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privface.errors import ModelError
from privface.faces.detect import Detector
from privface.faces.pca import FORMAT, MEDIAN_RATIO, PCABackend, eer_threshold

FAST = Detector(cnn_fallback=False, whole_fallback=True)  # synthetic faces end in the whole-image fallback


def _face(ident: int, shot: int) -> np.ndarray:
    """A 112×92 grey face-like drawing: identity sets the geometry, shot adds jitter and noise."""
    g = np.random.default_rng(ident)
    eye_dx, eye_y, mouth_w, face_w, tone = g.uniform(12, 20), g.uniform(42, 52), g.uniform(8, 16), \
        g.uniform(30, 40), g.uniform(120, 200)
    r = np.random.default_rng(1000 + 97 * ident + shot)
    dx, dy = r.uniform(-2, 2, 2)
    yy, xx = np.mgrid[0:112, 0:92].astype(float)
    cx, cy = 46 + dx, 58 + dy
    img = np.full((112, 92), 40.0)
    img[((xx - cx) / face_w) ** 2 + ((yy - cy) / 46) ** 2 <= 1] = tone
    for sx in (-1, 1):
        img -= 90 * np.exp(-((xx - cx - sx * eye_dx) ** 2 + (yy - eye_y - dy) ** 2) / 12)
    img -= 70 * np.exp(-((xx - cx) / mouth_w) ** 2 - ((yy - cy - 22) / 2.5) ** 2)
    img += r.normal(0, 4, img.shape) + r.uniform(-10, 10)
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def data():
    images = [_face(i, s) for i in range(4) for s in range(6)]
    labels = [i for i in range(4) for _ in range(6)]
    return images, labels


@pytest.fixture(scope="module")
def model(data) -> PCABackend:
    images, labels = data
    return PCABackend.train(images, labels, k=8, detector=FAST)


def test_train_and_embed(model, data):
    images, labels = data
    assert (model.name, model.dim, model.k, model.metric) == ("pca", 8, 8, "cosine")
    assert model.threshold > 0
    f = model.faces_rgb(np.repeat(_face(0, 99)[..., None], 3, axis=2))[0]
    assert f.embedding.shape == (8,) and f.embedding.dtype == np.float32
    assert f.chip.shape == (48, 48, 3) and f.landmarks.shape == (5, 2)
    assert abs(np.linalg.norm(f.embedding) - 1) < 1e-5
    emb = np.stack([model.embed(im) for im in images])
    lab = np.array(labels)
    d = np.linalg.norm(emb[:, None] - emb[None], axis=-1)
    same = (lab[:, None] == lab[None]) & ~np.eye(len(lab), dtype=bool)
    assert d[same].mean() < d[lab[:, None] != lab[None]].mean()
    opts = model.options()
    assert opts["backend"] == "pca" and opts["k"] == 8 and len(opts["model"]) == 16


@pytest.mark.parametrize("whiten", [False, True])
def test_projection_variance(data, whiten):
    """Training projections have the PCA's explained variance per component (1 when whitened)."""
    images, _ = data
    m = PCABackend.train(images, k=5, whiten=whiten, unit=False, detector=FAST)
    assert m.metric == "euclidean"
    var = np.stack([m.embed(im) for im in images]).astype(np.float64).var(axis=0, ddof=1)
    np.testing.assert_allclose(var, 1.0 if whiten else m.explained_variance, rtol=1e-3)


def test_threshold_rules(data):
    images, labels = data
    m = PCABackend.train(images, k=4, detector=FAST)
    emb = np.stack([m.embed(im) for im in images]).astype(np.float64)
    iu = np.triu_indices(len(emb), 1)
    med = np.median(np.linalg.norm(emb[iu[0]] - emb[iu[1]], axis=1))
    assert m.threshold == pytest.approx(MEDIAN_RATIO * med, rel=1e-4)
    assert PCABackend.train(images, k=4, threshold=3.5, detector=FAST).threshold == 3.5
    assert eer_threshold(np.array([0.1, 0.2, 0.3]), np.array([0.5, 0.6, 0.7])) in (0.3, 0.5)


def test_train_arguments(data):
    images, labels = data
    with pytest.raises(ValueError, match="k must"):
        PCABackend.train(images[:3], k=4, detector=FAST)
    with pytest.raises(ValueError, match="labels"):
        PCABackend.train(images, labels[:-1], k=4, detector=FAST)
    with pytest.raises(ValueError, match="same-person"):
        PCABackend.train(images[:4], [0, 1, 2, 3], k=2, detector=FAST)


def test_save_load_roundtrip(model, data, tmp_path):
    path = tmp_path / "eigen.model"  # no .npz suffix: saved exactly where asked
    model.save(path)
    assert path.is_file() and not (tmp_path / "eigen.model.npz").exists()
    back = PCABackend.load(path)
    assert back.threshold == model.threshold and back.options() == model.options()
    for im in data[0][:3]:
        np.testing.assert_array_equal(back.embed(im), model.embed(im))


def _saved(model: PCABackend, tmp_path: Path) -> dict:
    model.save(tmp_path / "good.npz")
    with np.load(tmp_path / "good.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _bad_files(model: PCABackend, tmp_path: Path):
    a = _saved(model, tmp_path)
    good = (tmp_path / "good.npz").read_bytes()
    yield "missing", None, "no such"
    yield "random bytes", np.random.default_rng(0).bytes(2000), "not a readable"
    yield "truncated", good[: len(good) // 2], "not a readable"
    yield "empty", b"", "not a readable"
    yield "npy", lambda p: np.save(p, np.zeros(3)), "bare .npy"
    yield "other npz", lambda p: np.savez(p, weights=np.zeros(3)), "missing"
    yield "wrong format", lambda p: np.savez(p, **{**a, "format": np.array("privface-lda")}), "format"
    yield "future version", lambda p: np.savez(p, **{**a, "version": np.array(9)}), "version 9"
    yield "bad shape", lambda p: np.savez(p, **{**a, "components": a["components"][:, :-1]}), "components"
    yield "bad mean", lambda p: np.savez(p, **{**a, "mean": a["mean"][:10]}), "mean"
    yield "int arrays", lambda p: np.savez(p, **{**a, "mean": a["mean"].astype(int)}), "float"
    yield "nan", lambda p: np.savez(p, **{**a, "explained_variance": a["explained_variance"] * np.nan}), "non-finite"
    cfg = json.loads(str(a["config"]))
    yield "bad config", lambda p: np.savez(p, **{**a, "config": np.array("{oops")}), "configuration"
    yield "chip size", lambda p: np.savez(p, **{**a, "config": np.array(json.dumps({**cfg, "chip_size": 32}))}), "mean"
    yield "pickled", lambda p: np.savez(p, **{**a, "mean": np.array([{}], dtype=object)}), "not a readable"


def test_load_errors(model, tmp_path):
    for name, content, msg in _bad_files(model, tmp_path):
        path = tmp_path / f"{name}.npz"
        if callable(content):
            with open(path, "wb") as f:
                content(f)
        elif content is not None:
            path.write_bytes(content)
        with pytest.raises(ModelError, match=msg):
            PCABackend.load(path)
    assert str(FORMAT) == "privface-pca"


@pytest.mark.dataset
def test_orl_subset(data_root):
    """§VI-E protocol on a small ORL subset: 7 images per person train the PCA, 3 are tested."""
    orl = data_root / "orl/images"
    people = range(21, 31)
    train = [orl / f"s{p}/{i}.pgm" for p in people for i in range(1, 8)]
    test = [orl / f"s{p}/{i}.pgm" for p in people for i in range(8, 11)]
    m = PCABackend.train(train, [p for p in people for _ in range(7)], k=16)
    gallery = np.stack([m.embed(x) for x in train])
    probes = np.stack([m.embed(x) for x in test])
    nearest = np.argmin(np.linalg.norm(probes[:, None] - gallery[None], axis=-1), axis=1) // 7
    truth = np.repeat(np.arange(len(people)), 3)
    assert (nearest == truth).mean() >= 0.8
