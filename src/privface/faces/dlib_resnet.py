"""The default backend: dlib detection + 5-point alignment + dlib's ResNet-128 face descriptor.

This is the face model seed 000 uses (§VI-B, "pre-trained model [56] provided by Dlib", k = 128);
its weights ship in the `face_recognition_models` package. By default the network runs in
onnxruntime from a graph converted locally from those weights (`dlib_onnx`, equal to dlib's own
forward pass within 1e-6 and ~10× faster than the BLAS-less dlib-bin build); engine="dlib" runs it
in dlib itself.
"""
from __future__ import annotations

from functools import cached_property

import dlib
import numpy as np
from PIL import Image

from .base import Backend, Face, Which
from .detect import Detector, select, shape_to_array
from .models import model_path
from .thresholds import DEFAULT_THRESHOLDS


class DlibResNetBackend(Backend):
    """dlib ResNet-128 embeddings (Euclidean metric; threshold: the shared default ``faces.thresholds``, 0.53 —
    stricter than dlib's published 0.6, which accepts 1 % of impostor pairs on held-out LFW).

    jitter: test-time augmentation as dlib's `jitter_image` does it (small random rotations, zooms,
    shifts and mirror flips of the chip, embeddings averaged) but with a fixed seed, so the same
    image always gives the same embedding; one network pass per jitter. flip: average with the mirrored chip's
    embedding (one extra pass). engine: "onnx" (default) or "dlib"; both compute the same network,
    so the engine is not part of `options()` (the embedding cache is shared).
    """

    name = "dlib-resnet128"
    dim = 128
    metric = "euclidean"
    threshold = DEFAULT_THRESHOLDS["dlib-resnet128"].distance

    def __init__(self, detector: Detector | None = None, landmarks: int = 5, chip_size: int = 150,
                 padding: float = 0.25, jitter: int = 0, flip: bool = False, engine: str = "onnx"):
        if landmarks not in (5, 68):
            raise ValueError("landmarks must be 5 or 68")
        if engine not in ("onnx", "dlib"):
            raise ValueError("engine must be 'onnx' or 'dlib'")
        self.engine = engine
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
        if self.engine == "onnx":
            from .dlib_onnx import OnnxResNet

            return OnnxResNet()
        return dlib.face_recognition_model_v1(str(model_path("resnet128")))

    def _embed_batch(self, chips: list[np.ndarray]) -> np.ndarray:
        if self.engine == "onnx":
            return self._net.embed_chips(np.stack(chips))
        return np.array(self._net.compute_face_descriptor(chips), dtype=np.float32)

    def faces_rgb(self, rgb: np.ndarray, which: Which = "largest") -> list[Face]:
        work, scale = self.detector.working_image(rgb)
        dets = select(self.detector.detect(work, scale), which, work.shape)
        out = []
        for d in dets:
            shape = (self.detector.landmarks5 if self.landmarks == 5 else self.detector.landmarks68)(work, d)
            chip = dlib.get_face_chip(work, shape, size=self.chip_size, padding=self.padding)
            five = shape_to_array(shape, scale)
            if self.landmarks == 68:
                five = _five_from_68(five)
            out.append(Face(box=d.box, landmarks=five, chip=chip, embedding=self.embed_chip(chip),
                            detector=d.detector, score=d.score, found=d.found, index=d.index))
        return out

    def embed_chip(self, chip: np.ndarray) -> np.ndarray:
        """Embedding of an aligned 150×150 chip (as made by dlib.get_face_chip)."""
        chips = jitter_chips(chip, self.jitter) if self.jitter > 0 else [chip]
        if self.flip:
            chips = chips + [np.ascontiguousarray(c[:, ::-1]) for c in chips]
        return self._embed_batch(chips).mean(axis=0).astype(np.float32)


def _five_from_68(p: np.ndarray) -> np.ndarray:
    """dlib's 5-point layout (eye corners, nose base) picked from the 68-point layout."""
    return p[[45, 42, 36, 39, 33]]


def jitter_chips(chip: np.ndarray, n: int, seed: int = 0) -> list[np.ndarray]:
    """n jittered copies of a chip: rotation ±3°, zoom 0.97–1, shift ±2 %, mirrored with p = ½ —
    the distribution of dlib's `jitter_image`, drawn from a seeded generator (reproducible)."""
    rng = np.random.default_rng(seed)
    h, w = chip.shape[:2]
    im = Image.fromarray(chip)
    out = []
    for _ in range(n):
        angle = np.deg2rad(rng.uniform(-3, 3))
        zoom = rng.uniform(0.97, 1.0)
        tx, ty = rng.uniform(-0.02, 0.02, size=2) * (w, h)
        # output pixel p samples the input at c + R(angle)·(p − c)·zoom + t  (c: chip centre)
        c, s = np.cos(angle) * zoom, np.sin(angle) * zoom
        cx, cy = (w - 1) / 2, (h - 1) / 2
        coeffs = (c, -s, cx - c * cx + s * cy + tx, s, c, cy - s * cx - c * cy + ty)
        j = np.asarray(im.transform((w, h), Image.AFFINE, coeffs, resample=Image.BILINEAR))
        out.append(np.ascontiguousarray(j[:, ::-1] if rng.random() < 0.5 else j))
    return out
