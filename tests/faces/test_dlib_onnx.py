"""dlib's ResNet converted to ONNX must reproduce dlib's own face descriptors on real face chips."""
import os
from pathlib import Path

import dlib
import numpy as np
import pytest
from PIL import Image

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from privface.errors import ModelError  # noqa: E402
from privface.faces import dlib_onnx  # noqa: E402
from privface.faces.models import model_path  # noqa: E402

TOLERANCE = 1e-4  # max abs difference per descriptor component vs dlib


def _chips_from(rgb: np.ndarray, detector, predictor) -> list[np.ndarray]:
    return [dlib.get_face_chip(rgb, predictor(rgb, d), size=150, padding=0.25) for d in detector(rgb, 1)]


@pytest.fixture(scope="module")
def chips() -> np.ndarray:
    from matplotlib import cbook

    detector = dlib.get_frontal_face_detector()
    predictor = dlib.shape_predictor(str(model_path("landmarks5")))
    hopper = np.asarray(Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)).convert("RGB"))
    base = _chips_from(hopper, detector, predictor)
    assert len(base) == 1, "expected one face in grace_hopper.jpg"
    chip = base[0]
    out = [
        chip,
        np.ascontiguousarray(chip[:, ::-1]),                                    # mirrored
        np.clip(chip.astype(np.float32) * 1.3 + 25, 0, 255).astype(np.uint8),   # brightened (saturates)
        (chip.astype(np.float32) * 0.5).astype(np.uint8),                       # darkened
    ]
    data = os.environ.get("PRIVFACE_DATA")
    if data and Path(data, "orl", "images").is_dir():
        for subject in (1, 2, 3, 5, 8):
            grey = Image.open(Path(data, "orl", "images", f"s{subject}", "1.pgm")).convert("RGB")
            big = grey.resize((round(grey.width * 2.5), round(grey.height * 2.5)), Image.BICUBIC)
            out += _chips_from(np.asarray(big), detector, predictor)[:1]
    return np.stack(out)


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory) -> Path:
    return dlib_onnx.convert(model_path("resnet128"), tmp_path_factory.mktemp("onnx") / "resnet.onnx")


@pytest.fixture(scope="module")
def net(onnx_path):
    return dlib_onnx.OnnxResNet(onnx_path, threads=1)


@pytest.fixture(scope="module")
def dlib_descriptors(chips) -> np.ndarray:
    ref = dlib.face_recognition_model_v1(str(model_path("resnet128")))
    return np.stack([np.array(ref.compute_face_descriptor(c), dtype=np.float32) for c in chips])


def test_parsed_network_has_dlibs_layers():
    layers = dlib_onnx.read_dat(model_path("resnet128"))
    kinds = [layer.kind for layer in layers]
    assert kinds.count("con") == 29 and kinds.count("affine") == 29 and kinds.count("add_prev") == 14
    assert layers[0].kind == "input" and layers[-1].kind == "fc"
    assert np.allclose(layers[0].params["avg_rgb"], [122.782, 117.001, 104.298])
    assert layers[-1].params["w"].shape == (256, 128) and layers[-1].params["b"] is None


def test_onnx_matches_dlib_descriptor(chips, net, dlib_descriptors):
    single = np.stack([net.embed_chip(c) for c in chips])
    assert single.shape == (len(chips), 128) and single.dtype == np.float32
    err = float(np.abs(single - dlib_descriptors).max())
    print(f"\n{len(chips)} chips: max |onnx - dlib| = {err:.3g}")
    assert err < TOLERANCE, f"max abs diff vs dlib {err:.3g} over {len(chips)} chips"


def test_batch_equals_single(chips, net):
    batch = net.embed_chips(chips)
    single = np.stack([net.embed_chips(c[None])[0] for c in chips])
    err = float(np.abs(batch - single).max())
    print(f"\nbatch of {len(chips)} vs single: max abs diff = {err:.3g}")
    assert err < 1e-6
    assert net.embed_chips(chips[:0]).shape == (0, 128)


def test_rejects_wrong_input(net, chips):
    with pytest.raises(ValueError, match="batch"):
        net.embed_chips(chips[0])
    with pytest.raises(ValueError, match="uint8"):
        net.embed_chips(chips.astype(np.float32))
    with pytest.raises(ValueError, match="150"):
        net.embed_chips(chips[:, :100])


def test_cached_model_path_converts_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVFACE_CACHE", str(tmp_path / "cache"))
    calls = []
    real = dlib_onnx.convert

    def counting(dat, out):
        calls.append(out)
        return real(dat, out)

    monkeypatch.setattr(dlib_onnx, "convert", counting)
    first = dlib_onnx.cached_model_path()
    mtime = first.stat().st_mtime_ns
    second = dlib_onnx.cached_model_path()
    assert len(calls) == 1 and first == second and second.stat().st_mtime_ns == mtime
    assert first.parent == tmp_path / "cache"
    assert dlib_onnx._sha256(model_path("resnet128")) in first.name
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temp files left behind


def test_truncated_dat_is_a_model_error(tmp_path):
    bad = tmp_path / "truncated.dat"
    bad.write_bytes(model_path("resnet128").read_bytes()[:100_000])
    with pytest.raises(ModelError, match="end of file|unexpected"):
        dlib_onnx.read_dat(bad)
