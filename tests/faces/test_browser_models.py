"""The model files served to the browser's face pipeline."""
from __future__ import annotations

import dlib

from privface.faces import browser


def test_browser_model_files_exist_and_the_detector_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVFACE_CACHE", str(tmp_path))
    files = browser.browser_model_files()
    assert set(files) == set(browser.MEDIA_TYPES)
    for path in files.values():
        assert path.is_file() and path.stat().st_size > 100
    # the serialized detector is dlib's own: it loads back and is cached under the cache directory
    det = files["hog.svm"]
    assert det.parent == tmp_path
    assert dlib.fhog_object_detector(str(det)).num_detectors == 5
    assert browser.frontal_detector_path() == det


def test_mmod_metadata_describes_dlibs_face_detector(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("PRIVFACE_CACHE", str(tmp_path))
    files = browser.browser_model_files()
    meta = json.loads(files["mmod.json"].read_text())
    # three stride-2 5×5 convolutions without padding: score (x, y) sits at input 8·x + 14
    assert meta["map"] == [8, 14] and meta["window"] == [80, 80]
    assert (meta["padding"], meta["outer_padding"]) == (10, 11)
    assert 0 < meta["nms"][0] < 1 and len(meta["avg_rgb"]) == 3


def test_mmod_onnx_runs_and_scores_a_face_above_zero_only_where_there_is_one():
    import numpy as np
    import onnxruntime as ort

    from privface import demo_data
    from privface.faces.image import load_rgb
    from privface.faces.mmod_onnx import cached_model_paths

    onnx_path, meta_path = cached_model_paths()
    import json

    avg = np.array(json.loads(meta_path.read_text())["avg_rgb"], np.float32).reshape(3, 1, 1)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])

    def best(rgb):
        x = ((rgb.transpose(2, 0, 1).astype(np.float32) - avg) / 256)[None]
        return float(sess.run(["scores"], {"x": np.ascontiguousarray(x)})[0].max())

    from PIL import Image

    # single scale (no pyramid): shrink the photo so that the face is about the 80-pixel window
    face = np.asarray(Image.fromarray(load_rgb(demo_data.enrolled_photo())).resize((205, 240), Image.BILINEAR))
    assert best(face) > 0
    assert best(np.full_like(face, 128)) < 0
