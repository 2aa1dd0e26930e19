"""The browser's face pipeline (web/src/face, TypeScript) run in Node gives Python's templates.

Needs Node and the web package's dependencies (`npm ci` in web/); skipped otherwise. The same
harness runs in headless Chromium for `privface bench web --parity`.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from privface.faces.browser import browser_model_files
from privface.faces.dlib_resnet import DlibResNetBackend

WEB = Path(__file__).resolve().parents[2] / "web"
ESBUILD = WEB / "node_modules" / ".bin" / "esbuild"


@pytest.fixture(scope="module")
def harness() -> Path:
    if shutil.which("node") is None or not ESBUILD.exists() or not (WEB / "node_modules" / "onnxruntime-web").is_dir():
        pytest.skip("node or the web package's dependencies (npm ci in web/) are missing")
    out = WEB / "dist-test" / "face_node_parity.mjs"
    subprocess.run([str(ESBUILD), "test/face/node_parity.ts", "--bundle", "--platform=node", "--format=esm",
                    f"--outfile={out}", "--external:onnxruntime-web", "--log-level=warning"],
                   cwd=WEB, check=True, timeout=120)
    return out


def _run(harness: Path, images: list[Path], tmp_path: Path) -> list[dict]:
    files = browser_model_files()
    models = {"resnet": str(files["resnet.onnx"]), "landmarks5": str(files["landmarks5.dat"]),
              "hogDetector": str(files["hog.svm"]), "mmod": str(files["mmod.onnx"]),
              "mmodMeta": str(files["mmod.json"])}
    (tmp_path / "models.json").write_text(json.dumps(models))
    (tmp_path / "images.json").write_text(json.dumps([str(p) for p in images]))
    subprocess.run(["node", str(harness), str(tmp_path / "models.json"), str(tmp_path / "images.json"),
                    str(tmp_path / "out.json")], check=True, timeout=600)
    return json.loads((tmp_path / "out.json").read_text())["results"]


def test_browser_pipeline_matches_python_on_orl(harness, data_root, tmp_path):
    images = [data_root / "orl" / "images" / p for p in ("s1/1.pgm", "s7/3.pgm", "s37/6.pgm")]  # s37/6: CNN fallback
    results = _run(harness, images, tmp_path)
    backend = DlibResNetBackend()
    detectors = []
    for path, r in zip(images, results):
        assert r["error"] is None, (path, r["error"])
        face = backend.faces(path)[0]
        detectors.append(face.detector)
        assert tuple(r["box"]) == face.box
        assert np.linalg.norm(np.array(r["descriptor"]) - face.embedding) <= 0.02
    assert detectors == ["hog", "hog", "cnn"]


def test_browser_pipeline_reports_no_face_and_corrupt_images(harness, tmp_path):
    from PIL import Image

    blank = tmp_path / "blank.pgm"
    Image.new("L", (120, 140), 128).save(blank)
    truncated = tmp_path / "truncated.pgm"
    truncated.write_bytes(blank.read_bytes()[:500])
    blank_result, truncated_result = _run(harness, [blank, truncated], tmp_path)
    assert blank_result["error"] == "no face" and blank_result["descriptor"] is None
    assert "truncated" in truncated_result["error"] and truncated_result["descriptor"] is None


def test_browser_pipeline_downscales_a_large_photo_as_python_does(harness, tmp_path):
    """A 1500×2000 photo is brought to 960×1280 before detection on both sides (Pillow's bicubic, strip by strip in
    the browser): same box, same template (issue 35 B2)."""
    from PIL import Image

    from privface.demo_data import enrolled_photo

    big = tmp_path / "big.ppm"
    Image.open(enrolled_photo()).convert("RGB").crop((31, 0, 481, 600)).resize((1500, 2000), Image.BICUBIC).save(big)
    backend = DlibResNetBackend()
    work, scale = backend.detector.working_image(np.asarray(Image.open(big)))
    assert work.shape[:2] == (1280, 960)
    (r,) = _run(harness, [big], tmp_path)
    face = backend.faces(big)[0]
    assert r["error"] is None and tuple(r["box"]) == face.box
    assert np.linalg.norm(np.array(r["descriptor"]) - face.embedding) <= 0.02
