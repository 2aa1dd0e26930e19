"""The model files served to the browser's face pipeline."""
from __future__ import annotations

import dlib

from privface.faces import browser


def test_browser_model_files_exist_and_the_detector_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVFACE_CACHE", str(tmp_path))
    files = browser.browser_model_files()
    assert set(files) == set(browser.MEDIA_TYPES)
    for path in files.values():
        assert path.is_file() and path.stat().st_size > 1000
    # the serialized detector is dlib's own: it loads back and is cached under the cache directory
    det = files["hog.svm"]
    assert det.parent == tmp_path
    assert dlib.fhog_object_detector(str(det)).num_detectors == 5
    assert browser.frontal_detector_path() == det
