"""The model files the browser's face pipeline (web/src/face) loads, derived on this machine.

The page embeds faces exactly as `DlibResNetBackend` does, so it needs the same three models,
served by `privface serve` and never fetched from elsewhere:

* ``resnet.onnx``: dlib's ResNet-128 converted to ONNX from face_recognition_models
  (`dlib_onnx.cached_model_path`);
* ``landmarks5.dat``: face_recognition_models' 5-point shape predictor, as shipped;
* ``hog.svm``: dlib's frontal HOG face detector (it is compiled into dlib, not shipped as a file),
  written once with its own ``save`` into the cache directory;
* ``mmod.onnx`` and ``mmod.json``: dlib's CNN face detector (the HOG fallback) converted to ONNX
  from face_recognition_models, and what the browser needs around the network (`mmod_onnx`).
"""
from __future__ import annotations

from pathlib import Path

from .dlib_onnx import cache_dir, cached_model_path, write_atomically
from .mmod_onnx import cached_model_paths as mmod_model_paths
from .models import model_path

#: URL name -> media type, for the route that serves them.
MEDIA_TYPES = {"resnet.onnx": "application/octet-stream", "landmarks5.dat": "application/octet-stream",
               "hog.svm": "application/octet-stream", "mmod.onnx": "application/octet-stream",
               "mmod.json": "application/json"}


def frontal_detector_path() -> Path:
    """dlib.get_frontal_face_detector() serialized by dlib, cached per dlib version."""
    import dlib

    target = cache_dir() / f"dlib_frontal_hog_{dlib.__version__}.svm"
    if target.is_file():
        return target
    write_atomically(target, lambda tmp: dlib.get_frontal_face_detector().save(tmp))
    return target


def browser_model_files() -> dict[str, Path]:
    """The files the page loads, by the name it requests them under."""
    mmod, mmod_meta = mmod_model_paths()
    return {"resnet.onnx": cached_model_path(), "landmarks5.dat": model_path("landmarks5"),
            "hog.svm": frontal_detector_path(), "mmod.onnx": mmod, "mmod.json": mmod_meta}
