"""What /app/models/ serves for the page's sface pipeline (issue 36): the install-time SFace file only when its sha256
is the pinned one, as the Python loader requires, derived (weights as graph constants) into the same function; the
page aligns on the 5-point model, so the 68-point one is not served."""
from __future__ import annotations

import numpy as np
import pytest

from privface.errors import ModelError
from privface.faces import browser, sface


@pytest.fixture
def installed():
    try:
        return sface.verify(sface.installed_path())
    except ModelError:
        pytest.skip("the SFace weights are not installed (make install)")


def test_served_sface_file_computes_what_the_installed_one_does(installed, tmp_path, monkeypatch):
    import onnxruntime as ort

    monkeypatch.setenv("PRIVFACE_CACHE", str(tmp_path))
    served = browser.sface_model_path()
    assert served.parent == tmp_path and served.stat().st_size > 30_000_000
    x = np.random.default_rng(0).uniform(0, 255, (1, 3, 112, 112)).astype(np.float32)
    outs = []
    for path in (installed, served):
        s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        outs.append(s.run(None, {s.get_inputs()[0].name: x})[0])
    assert np.allclose(outs[0], outs[1], atol=1e-5)


def test_the_page_aligns_sface_on_the_5_point_model_only(installed):
    """Issue 36: the page's sface aligns on dlib's CC0 5-point model (the dlib pipeline's file), so dlib's 68-point
    model (iBUG 300-W, not for commercial use; 99.7 MB) is never served."""
    files = browser.browser_model_files()
    assert {"sface.onnx", "landmarks5.dat"} <= set(files)
    assert "landmarks68.dat" not in files and "landmarks68.dat" not in browser.MEDIA_TYPES


def test_a_wrong_sface_file_is_not_served(installed, tmp_path, monkeypatch, caplog):
    bad = tmp_path / sface.FILE
    bad.write_bytes(installed.read_bytes()[:1000])  # truncated
    monkeypatch.setattr(sface, "installed_path", lambda: bad)
    files = browser.browser_model_files()
    assert "sface.onnx" not in files
    assert {"resnet.onnx", "landmarks5.dat"} <= set(files)  # the dlib pipeline is still served
    assert sface.SHA256 in caplog.text
