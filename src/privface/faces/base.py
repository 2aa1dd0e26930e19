"""What every face backend returns and promises: detected, aligned, embedded faces."""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import AmbiguousFaceError, NoFaceError, box_text
from .image import ImageInput, load_rgb

Which = Literal["single", "largest", "center", "all"] | int
"""Which face (detect.select): "single" (refuses two of about the same size), "largest", "center", "all" or N."""


@dataclass(frozen=True)
class Face:
    """One face found in an image.

    box: (left, top, right, bottom) in input-image pixels; landmarks: 5×2 (x, y) in input-image pixels
    (dlib 5-point order: right-eye outer/inner, left-eye outer/inner, nose base); chip: the aligned
    face the embedding was computed from (H×W×3 uint8); embedding: 1-D float32; detector: which
    detector found it ("hog", "cnn", or "whole" for a pre-cropped face).
    """

    box: tuple[int, int, int, int]
    landmarks: np.ndarray
    chip: np.ndarray
    embedding: np.ndarray
    detector: str = "hog"
    score: float = field(default=0.0, compare=False)
    found: int = field(default=1, compare=False)  # faces detected in the image
    index: int = field(default=0, compare=False)  # this face's number among them, largest first

    @property
    def area(self) -> int:
        left, top, right, bottom = self.box
        return max(0, right - left) * max(0, bottom - top)

    def describe(self) -> str:
        """Which face was used, for people: "the face at 120,80 200×210 (largest of 2)"."""
        where = f"the face at {box_text(self.box)}"
        if self.found == 1:
            return f"{where} (the only one)"
        return f"{where} ({'largest' if self.index == 0 else f'face {self.index}'} of {self.found})"


class Backend(ABC):
    """A face backend: image → faces with embeddings, and the distance that compares embeddings.

    Subclasses set `name`, `dim`, `metric` ("euclidean" or "cosine": cosine backends return unit
    vectors, so Euclidean distance orders pairs exactly as cosine similarity does) and
    `threshold`, the default decision threshold on `distance` (same person if distance ≤ threshold).
    """

    name: str = ""
    dim: int = 0
    metric: str = "euclidean"
    threshold: float = 0.6

    @abstractmethod
    def faces_rgb(self, rgb: np.ndarray, which: Which = "largest") -> list[Face]:
        """Faces in an H×W×3 uint8 RGB array; [] when there is none. which: "single" (one face; AmbiguousFaceError
        when two are about the same size), "largest" (one face), "center" (one face, nearest the image centre),
        N (face N, largest first) or "all" (largest first)."""

    def options(self) -> dict:
        """Everything that changes the embedding; part of the embedding-cache key."""
        return {"backend": self.name}

    def faces(self, image: ImageInput, which: Which = "largest") -> list[Face]:
        """Faces in an image given as a path, bytes, PIL image or array (see `load_rgb`)."""
        try:
            return self.faces_rgb(load_rgb(image), which)
        except AmbiguousFaceError as e:
            raise AmbiguousFaceError(e.boxes, _describe(image)) from None

    def face(self, image: ImageInput, which: Which = "single") -> Face:
        """The one face to use (see `faces_rgb`; by default the largest, refused when another is about as large:
        AmbiguousFaceError); NoFaceError when there is none. Its `describe()` says which it was."""
        if which == "all":
            raise ValueError("face() returns one face: which='all' is for faces()")
        found = self.faces(image, which)
        if not found:
            raise NoFaceError(f"no face found in {_describe(image)}")
        return found[0]

    def embed(self, image: ImageInput, which: Which = "single") -> np.ndarray:
        """The embedding of one face (`face`): by default the largest, refused (AmbiguousFaceError) when another is
        about as large; which="largest" takes the largest anyway, N face N. NoFaceError when there is none."""
        return self.face(image, which).embedding

    @staticmethod
    def distance(a: np.ndarray, b: np.ndarray) -> float:
        """Euclidean distance between two embeddings (or row-wise for 2-D arrays)."""
        return np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64), axis=-1)


def _describe(image: ImageInput) -> str:
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image)
    return f"the given {type(image).__name__}"
