"""Face detection and landmarks with dlib: HOG detector first, dlib's CNN (MMOD) detector as fallback.

Small images (ORL is 92×112) are upscaled before detection so that faces reach the detectors'
minimum size (~80 px for HOG); large ones (phone photos, 12–50 MP) are downscaled to a longer side of
`MAX_SIDE`, which keeps a portrait's face well above the 150 px chip and detection fast (the browser
page does the same, pixel for pixel). Boxes and landmarks are reported in input-image pixels.

Which face: `select` takes one face per image. "single" (the default of `Backend.embed`) refuses with
`AmbiguousFaceError` when the second-largest face's area is at least `SAME_SIZE` × the largest's: a photo
of two people of about the same size is not silently verified on one of them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import dlib
import numpy as np
from PIL import Image

from ..errors import AmbiguousFaceError, FaceError
from .models import model_path

MAX_SIDE = 1280
"""Images whose longer side exceeds it are downscaled (Pillow bicubic) to it before detection."""
SAME_SIZE = 0.8
""""About the same size": the second-largest face's box area ≥ SAME_SIZE × the largest's (a side ≈ 0.89×)."""


@dataclass(frozen=True)
class Detection:
    """A detected face in *working* (possibly upscaled) pixels, with the scale back to input pixels."""

    rect: dlib.rectangle
    detector: str  # "hog" | "cnn" | "whole"
    score: float
    scale: float  # working pixels per input pixel
    index: int = 0  # among the image's detections, largest first
    found: int = 1  # detections in the image

    @property
    def box(self) -> tuple[int, int, int, int]:
        s = self.scale
        r = self.rect
        return (round(r.left() / s), round(r.top() / s), round(r.right() / s), round(r.bottom() / s))

    @property
    def area(self) -> int:
        return self.rect.width() * self.rect.height()


class Detector:
    """dlib HOG detector with upsampling, falling back to the CNN detector when HOG finds nothing.

    min_side: images whose shorter side is below it are upscaled (bicubic) to reach it before
    detection; landmarks and chips are taken from the upscaled image, which makes them steadier
    on small faces. upsample: the HOG detector's own pyramid upsampling steps.
    whole_fallback: when both detectors fail, treat the whole (pre-cropped) image as the face box.
    max_side: images whose longer side is above it are downscaled (bicubic) to it before detection.
    """

    def __init__(self, min_side: int = 224, upsample: int = 1, cnn_fallback: bool = True,
                 whole_fallback: bool = False, max_side: int = MAX_SIDE):
        if max_side < min_side:
            raise ValueError("max_side must be at least min_side")
        self.min_side = min_side
        self.max_side = max_side
        self.upsample = upsample
        self.cnn_fallback = cnn_fallback
        self.whole_fallback = whole_fallback

    def options(self) -> dict:
        return {"min_side": self.min_side, "upsample": self.upsample, "cnn_fallback": self.cnn_fallback,
                "whole_fallback": self.whole_fallback, "max_side": self.max_side}

    @cached_property
    def _hog(self):
        return dlib.get_frontal_face_detector()

    @cached_property
    def _cnn(self):
        return dlib.cnn_face_detection_model_v1(str(model_path("detector_cnn")))

    @cached_property
    def _sp5(self):
        return dlib.shape_predictor(str(model_path("landmarks5")))

    @cached_property
    def _sp68(self):
        return dlib.shape_predictor(str(model_path("landmarks68")))

    def working_image(self, rgb: np.ndarray) -> tuple[np.ndarray, float]:
        """The image detection runs on (downscaled if large, upscaled if small) and its scale relative to the input."""
        h, w = rgb.shape[:2]
        if max(h, w) > self.max_side:
            scale = self.max_side / max(h, w)
        elif min(h, w) < self.min_side:
            scale = self.min_side / min(h, w)
        else:
            return rgb, 1.0
        big = Image.fromarray(rgb).resize((round(w * scale), round(h * scale)), Image.BICUBIC)
        return np.ascontiguousarray(np.asarray(big)), scale

    def detect(self, work: np.ndarray, scale: float = 1.0) -> list[Detection]:
        """Detections in a working image, largest first."""
        found: list[Detection] = []
        small = min(work.shape[:2]) < 400  # pyramid upsampling only where faces may be < 80 px
        rects, scores, _ = self._hog.run(work, self.upsample if small else 0, 0.0)
        found = [Detection(r, "hog", float(s), scale) for r, s in zip(rects, scores)]
        if not found and self.cnn_fallback:
            found = [Detection(m.rect, "cnn", float(m.confidence), scale) for m in self._cnn(work, int(small))]
        if not found and self.whole_fallback:
            h, w = work.shape[:2]
            found = [Detection(dlib.rectangle(0, 0, w - 1, h - 1), "whole", 0.0, scale)]
        found.sort(key=lambda d: d.area, reverse=True)
        return [replace(d, index=i, found=len(found)) for i, d in enumerate(found)]

    def landmarks5(self, work: np.ndarray, det: Detection) -> dlib.full_object_detection:
        return self._sp5(work, det.rect)

    def landmarks68(self, work: np.ndarray, det: Detection) -> dlib.full_object_detection:
        return self._sp68(work, det.rect)


def ambiguous(dets: list[Detection]) -> bool:
    """Two faces of about the same size: the second-largest's area ≥ SAME_SIZE × the largest's (dets largest first)."""
    return len(dets) >= 2 and dets[1].area >= SAME_SIZE * dets[0].area


def select(dets: list[Detection], which: str | int, shape: tuple[int, ...]) -> list[Detection]:
    """The detections to use (dets largest first): "single" (one: the largest, but AmbiguousFaceError when
    another is about as large), "largest" (one, whatever the others), "center" (one: nearest the image centre,
    the subject of a pre-centred dataset such as LFW), an int N (face N, largest first, from 0) or "all"."""
    if which == "all":
        return dets
    if not dets:
        return []
    if isinstance(which, int) and not isinstance(which, bool):
        if not 0 <= which < len(dets):
            raise FaceError(f"there is no face {which}: {len(dets)} face{'s' * (len(dets) > 1)} found "
                            f"(0–{len(dets) - 1}, largest first)")
        return [dets[which]]
    if which == "single":
        if ambiguous(dets):
            raise AmbiguousFaceError([d.box for d in dets])
        return dets[:1]
    if which == "largest":
        return dets[:1]
    if which == "center":
        cy, cx = shape[0] / 2, shape[1] / 2
        return [min(dets, key=lambda d: (d.rect.center().x - cx) ** 2 + (d.rect.center().y - cy) ** 2)]
    raise ValueError(f"which must be 'single', 'largest', 'center', 'all' or a face number, got {which!r}")


def shape_to_array(shape: dlib.full_object_detection, scale: float = 1.0) -> np.ndarray:
    """Landmarks as an n×2 float array of (x, y), divided by `scale` (working → input pixels)."""
    return np.array([(p.x, p.y) for p in shape.parts()], dtype=np.float64) / scale
