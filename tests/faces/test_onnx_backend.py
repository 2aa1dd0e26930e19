"""ONNX backend: model validation, preprocessing (checked against numpy), ArcFace alignment."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from privface.errors import ModelError  # noqa: E402
from privface.faces.onnx_backend import ARCFACE_REF, ONNXBackend, align, arcface_points, umeyama  # noqa: E402

POOL = 8  # the test graph: AveragePool 8×8 → 3×14×14 → Flatten → MatMul 588×512 + bias


def _save(model, path: Path) -> Path:
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _weights(d: int = 512):
    rng = np.random.default_rng(7)
    n = 3 * (112 // POOL) ** 2
    return rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal(d).astype(np.float32)


def _tiny_model(path: Path, batch="N", in_shape=None, flatten=True) -> Path:
    w, b = _weights()
    shape = in_shape or [batch, 3, 112, 112]
    nodes = [helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[POOL, POOL], strides=[POOL, POOL])]
    if flatten:
        nodes += [helper.make_node("Flatten", ["p"], ["f"], axis=1), helper.make_node("MatMul", ["f", "W"], ["m"]),
                  helper.make_node("Add", ["m", "B"], ["y"])]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], 512])
        inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    else:
        nodes[0].output[0] = "y"
        pooled = [shape[0], shape[1]] + [d // POOL if isinstance(d, int) else d for d in shape[2:]]
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, pooled)
        inits = []
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [out], inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def _reference(x: np.ndarray) -> np.ndarray:
    """The tiny graph in numpy, L2-normalised, on an N×3×112×112 tensor."""
    w, b = _weights()
    n = len(x)
    pooled = x.reshape(n, 3, 14, POOL, 14, POOL).mean(axis=(3, 5)).reshape(n, -1)
    y = pooled.astype(np.float64) @ w + b
    return y / np.linalg.norm(y, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    return _tiny_model(tmp_path_factory.mktemp("onnx") / "tiny.onnx")


@pytest.fixture(scope="module")
def face_image() -> np.ndarray:
    from privface.faces.image import load_rgb

    root = os.environ.get("PRIVFACE_DATA")
    if root and (Path(root) / "orl/images/s3/1.pgm").is_file():
        return load_rgb(Path(root) / "orl/images/s3/1.pgm")
    from matplotlib import cbook

    return load_rgb(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))


def test_loads_and_reports(model_file):
    be = ONNXBackend(model_file)
    assert (be.name, be.metric, be.dim) == ("onnx", "cosine", 512)
    opts = be.options()
    assert opts["backend"] == "onnx" and len(opts["model"]) == 16 and opts["channel_order"] == "RGB"
    assert ONNXBackend(model_file, channel_order="BGR").options() != opts


@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_embedding_matches_numpy_reference(model_file, face_image, order):
    be = ONNXBackend(model_file, channel_order=order)
    faces = be.faces_rgb(face_image)
    assert len(faces) == 1
    f = faces[0]
    assert f.chip.shape == (112, 112, 3) and f.chip.dtype == np.uint8
    assert f.embedding.shape == (512,) and f.embedding.dtype == np.float32
    assert f.landmarks.shape == (5, 2)
    chip = f.chip.astype(np.float64)
    if order == "BGR":
        chip = chip[..., ::-1]
    x = ((chip - 127.5) / 127.5).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(f.embedding, _reference(x)[0], atol=2e-5)
    assert abs(np.linalg.norm(f.embedding) - 1) < 1e-5


def test_custom_normalisation_and_batches(model_file, face_image):
    be = ONNXBackend(model_file, mean=(10.0, 20.0, 30.0), std=(50.0, 60.0, 70.0))
    chips = np.stack([be.faces_rgb(face_image)[0].chip, np.full((112, 112, 3), 200, np.uint8)])
    x = ((chips.astype(np.float64) - [10, 20, 30]) / [50, 60, 70]).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(be.embed_chips(chips), _reference(x), atol=2e-5)
    fixed = ONNXBackend(_tiny_model(Path(be.model_path).with_name("fixed.onnx"), batch=1),
                        mean=(10.0, 20.0, 30.0), std=(50.0, 60.0, 70.0))
    np.testing.assert_allclose(fixed.embed_chips(chips), _reference(x), atol=2e-5)


def test_aligned_chip_puts_eyes_on_template(model_file, face_image):
    """The chip's own landmarks, found again by dlib, lie near the ArcFace template (within the
    jitter of re-detecting landmarks on a tight 112-px chip; a flipped or mis-scaled warp is far off)."""
    from privface.faces.detect import Detector, shape_to_array

    chip = ONNXBackend(model_file).faces_rgb(face_image)[0].chip
    det = Detector(whole_fallback=True)
    work, scale = det.working_image(chip)
    found = det.detect(work, scale)
    pts = arcface_points(shape_to_array(det.landmarks68(work, found[0]), scale))
    err = np.linalg.norm(pts - ARCFACE_REF, axis=1)
    assert err[:2].max() < 5.0 and err.max() < 9.0, err


def _similarity(angle_deg: float, scale: float, t) -> np.ndarray:
    a = np.deg2rad(angle_deg)
    r = scale * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return np.hstack([r, np.asarray(t, float)[:, None]])


def _apply(m: np.ndarray, p: np.ndarray) -> np.ndarray:
    return p @ m[:, :2].T + m[:, 2]


def test_umeyama_recovers_similarity():
    rng = np.random.default_rng(1)
    src = rng.uniform(0, 100, (5, 2))
    m = _similarity(-33.0, 1.7, (12.0, -4.0))
    np.testing.assert_allclose(umeyama(src, _apply(m, src)), m, atol=1e-9)
    mirrored = src * [-1, 1]  # a reflection cannot be fitted: the result is still a proper rotation
    assert np.linalg.det(umeyama(src, mirrored)[:, :2]) > 0
    with pytest.raises(ValueError):
        umeyama(np.ones((5, 2)), src)


@pytest.mark.parametrize("angle, scale", [(17.0, 2.3), (-8.0, 0.8), (25.0, 6.0)])
def test_alignment_maps_points_to_template(angle, scale):
    """Blobs drawn at the 5 points of a synthetic image end up on ARCFACE_REF in the chip."""
    sigma = 1.5 * scale  # 1.5 px in the chip
    c = 80 * scale + 20
    pts = _apply(_similarity(angle, scale, (c, c)), ARCFACE_REF - 56)  # template → image pixels
    h = w = int(2 * c)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.zeros((h, w))
    for x, y in pts:
        img += np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * sigma ** 2))
    rgb = np.repeat(np.clip(img * 255, 0, 255).astype(np.uint8)[..., None], 3, axis=2)
    chip = align(rgb, pts).astype(np.float64)[..., 0]
    cy, cx = np.mgrid[0:112, 0:112]
    for rx, ry in ARCFACE_REF:
        win = (np.abs(cx - rx) <= 5) & (np.abs(cy - ry) <= 5)
        wgt = chip * win
        found = np.array([(wgt * cx).sum(), (wgt * cy).sum()]) / wgt.sum()
        assert np.abs(found - (rx, ry)).max() < 0.3, (found, (rx, ry))


def test_arcface_points_from_68():
    p = np.zeros((68, 2))
    p[36:42] = [10, 20]
    p[42:48] = [30, 20]
    p[30], p[48], p[54] = [20, 30], [12, 40], [28, 40]
    np.testing.assert_array_equal(arcface_points(p), [[10, 20], [30, 20], [20, 30], [12, 40], [28, 40]])


def test_bad_model_files(tmp_path):
    with pytest.raises(ModelError, match="no such"):
        ONNXBackend(tmp_path / "missing.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ModelError, match="not a loadable"):
        ONNXBackend(junk)
    with pytest.raises(ModelError, match="input"):
        ONNXBackend(_tiny_model(tmp_path / "grey64.onnx", in_shape=[1, 1, 64, 64], flatten=False))
    with pytest.raises(ModelError, match="input"):
        ONNXBackend(_tiny_model(tmp_path / "small.onnx", in_shape=["N", 3, 64, 64], flatten=False))
    with pytest.raises(ModelError, match="output"):
        ONNXBackend(_tiny_model(tmp_path / "fourd.onnx", flatten=False))
    with pytest.raises(ModelError):
        ONNXBackend(tmp_path)  # a directory
