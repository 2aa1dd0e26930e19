"""Where enrolment reads templates from: ``.npy`` rows or face images, in a fixed order, a block at a time."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import TemplateError
from ..faces.registry import make_backend
from .layout import GalleryError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".pgm", ".bmp", ".ppm", ".tif", ".tiff", ".webp"}


class Source:
    """Templates in a fixed order: ``ids`` up front, ``templates(lo, hi)`` read lazily (unit rows, float64)."""

    ids: list[str]
    dim: int

    def templates(self, lo: int, hi: int) -> np.ndarray:
        raise NotImplementedError


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise TemplateError(f"templates must be a finite (count, d) array, got shape {x.shape}")
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norm == 0):
        raise TemplateError("a template is the zero vector")
    return x / norm


class NpySource(Source):
    """Rows of ``.npy`` files (memory-mapped, read per block); ids ``<file stem>.<row>``."""

    def __init__(self, paths: list[str | os.PathLike]) -> None:
        self.arrays, self.ids, self._starts = [], [], []
        for p in paths:
            try:
                a = np.load(p, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as e:
                raise GalleryError(f"cannot read embeddings {p}: {e}") from None
            if a.ndim != 2 or a.shape[0] == 0 or not np.issubdtype(a.dtype, np.floating):
                raise TemplateError(f"{p}: expected a non-empty (count, d) float array, got {a.dtype} {a.shape}")
            if self.arrays and a.shape[1] != self.arrays[0].shape[1]:
                raise TemplateError(f"{p}: d = {a.shape[1]}, the other files have d = {self.arrays[0].shape[1]}")
            self._starts.append(len(self.ids))
            self.arrays.append(a)
            self.ids.extend(f"{Path(p).stem}.{i}" for i in range(a.shape[0]))
        if not self.arrays:
            raise GalleryError("no embeddings given")
        self.dim = int(self.arrays[0].shape[1])

    def templates(self, lo: int, hi: int) -> np.ndarray:
        rows = []
        for start, a in zip(self._starts, self.arrays):
            a_lo, a_hi = max(lo - start, 0), min(hi - start, a.shape[0])
            if a_lo < a_hi:
                rows.append(np.asarray(a[a_lo:a_hi], dtype=np.float64))
        return unit(np.concatenate(rows))


class ImageSource(Source):
    """Face images (files, or every image under a directory, sorted); id = the file stem; embedded per block."""

    def __init__(self, paths: list[str | os.PathLike], backend) -> None:
        files = []
        for p in map(Path, paths):
            if p.is_dir():
                files.extend(sorted(f for f in p.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES))
            elif p.is_file():
                files.append(p)
            else:
                raise GalleryError(f"no such image or directory: {p}")
        if not files:
            raise GalleryError("no images found")
        self.files, self.backend, self.dim = files, backend, int(backend.dim)
        self.ids = [f.stem for f in files]

    def templates(self, lo: int, hi: int) -> np.ndarray:
        return unit(np.stack([self.backend.embed(str(f)) for f in self.files[lo:hi]]))


def open_source(paths: list[str], backend_factory=None) -> Source:
    """``.npy`` files → NpySource; otherwise images / directories → ImageSource (``backend_factory()``)."""
    if paths and all(str(p).endswith(".npy") for p in paths):
        return NpySource(paths)
    if any(str(p).endswith(".npy") for p in paths):
        raise GalleryError("give either .npy embedding files or images, not both")
    if backend_factory is None:
        backend_factory = make_backend
    return ImageSource(paths, backend_factory())
