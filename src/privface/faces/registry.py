"""Backends by name, so the CLI, worker processes and the cache agree on one configuration."""
from __future__ import annotations

from .base import Backend

BACKENDS = ("dlib-resnet128", "sface", "sface-lm68", "pca", "onnx")
DEFAULT_BACKEND = "sface"
"""The default face backend everywhere — the CLI, the Python API, `privface serve`, `privface eval` and the page
(issue 36: SFace, ORL EER 0.054 % against dlib-resnet128's 0.367 %), aligned on dlib's CC0 5-point landmarks.
``dlib-resnet128`` stays selectable; ``sface-lm68`` (SFace aligned on dlib's non-commercial 68-point landmarks) is a
measurement option only."""
LEGACY_BACKEND = "dlib-resnet128"
"""The backend of a record that names none (an enrolment, key file or gallery made before backends were recorded,
issue 36): dlib-resnet128, the only one there was."""


def make_backend(name: str = DEFAULT_BACKEND, model: str | None = None, **options) -> Backend:
    """A backend by name. `model` is the model file for `pca` (trained with `privface train-pca`)
    and `onnx` (an ArcFace-style .onnx file), optional for `sface` and `sface-lm68` (default: the file `make install`
    fetched; any file is checked against the pinned sha256); options go to the backend's constructor."""
    if name in ("dlib-resnet128", "sface", "sface-lm68"):
        from .detect import Detector

        det_keys = ("min_side", "upsample", "cnn_fallback", "whole_fallback")
        det = Detector(**{k: options.pop(k) for k in det_keys if k in options})
        if name in ("sface", "sface-lm68"):
            from .sface import SFaceBackend, SFaceLm68Backend

            cls = SFaceBackend if name == "sface" else SFaceLm68Backend
            return cls(model, detector=det, **options)
        from .dlib_resnet import DlibResNetBackend

        return DlibResNetBackend(detector=det, **options)
    if name in ("pca", "onnx") and not model:
        from ..errors import ModelError

        raise ModelError(f"backend {name!r} needs a model file (--model PATH)")
    if name == "pca":
        from .pca import PCABackend

        return PCABackend.load(model, **options)
    if name == "onnx":
        from .onnx_backend import ONNXBackend

        return ONNXBackend(model, **options)
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
