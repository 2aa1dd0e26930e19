"""Where enrolment reads templates from: ``.npy`` rows or face images, in a fixed order, a block at a time."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import AmbiguousFaceError, FaceError, ImageError, TemplateError
from ..faces.registry import make_backend
from .layout import GalleryError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".pgm", ".bmp", ".ppm", ".tif", ".tiff", ".webp"}


def photo_histogram(source) -> dict[int, int]:
    """{k: identities}: how many of ``source``'s identities are fused from k photos (``Source.photo_counts``)."""
    counts = source.photo_counts() if hasattr(source, "photo_counts") else [1] * len(source.ids)
    out: dict[int, int] = {}
    for k in counts:
        out[int(k)] = out.get(int(k), 0) + 1
    return out


class Source:
    """Templates in a fixed order: ``ids`` up front, ``templates(lo, hi)`` read lazily (unit rows, float64)."""

    ids: list[str]
    dim: int

    def templates(self, lo: int, hi: int) -> np.ndarray:
        raise NotImplementedError

    def photo_counts(self) -> list[int]:
        """Per id, how many photos its template is fused from (the key store's τ counts them,
        ``layout.retune``): one, unless the source says otherwise."""
        return [1] * len(self.ids)


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
            stem = Path(p).stem  # once per file, not per row (2^20 Path objects took ≈ 24 s)
            self.ids.extend(f"{stem}.{i}" for i in range(a.shape[0]))
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


class ArraySource(Source):
    """Templates given as an array with their ids (a request to the local server: ``service.bindings.hers``);
    ``photos``: per id, how many photos its template was fused from (default one each)."""

    def __init__(self, ids: list[str], x, photos: list[int] | None = None) -> None:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] != len(ids) or not ids:
            raise TemplateError(f"need one template row per id, got {x.shape} for {len(ids)} ids")
        if photos is not None and (len(photos) != len(ids) or any(int(k) < 1 for k in photos)):
            raise TemplateError("photos: one count ≥ 1 per id")
        self.ids, self._x, self.dim = list(ids), unit(x), int(x.shape[1])
        self._photos = [1] * len(ids) if photos is None else [int(k) for k in photos]

    def photo_counts(self) -> list[int]:
        return list(self._photos)

    def templates(self, lo: int, hi: int) -> np.ndarray:
        return self._x[lo:hi]


class FusedImageSource(Source):
    """Several photos per identity, fused into one template each: the normalised mean of the photos' unit
    embeddings (docs/operations.md, "Several photos per identity": it beats the medoid on ORL). ``identities``
    maps each id to its photos. A photo that yields no usable face (none, two of about the same size, not an
    image: ``FaceError`` / ``ImageError``) is refused and the rest are fused; an identity left with none is a
    GalleryError before its block is encrypted. ``report``: per identity read so far, the photos used and the
    ones refused with the reason."""

    def __init__(self, identities: dict[str, list[Path]], backend) -> None:
        if not identities:
            raise GalleryError("no identities given")
        empty = [i for i, photos in identities.items() if not photos]
        if empty:
            raise GalleryError(f"no photos for {', '.join(empty[:10])}")
        self.identities, self.backend, self.dim = identities, backend, int(backend.dim)
        self.ids = list(identities)
        self.report: dict[str, dict] = {}

    def fuse(self, ident: str) -> np.ndarray:
        rows, refused = [], []
        for f in self.identities[ident]:
            try:
                rows.append(self.backend.embed(str(f)))
            except (FaceError, ImageError) as e:
                reason = ("two or more faces of about the same size" if isinstance(e, AmbiguousFaceError)
                          else "no face" if isinstance(e, FaceError) else f"not a readable image ({e})")
                refused.append({"photo": str(f), "reason": reason})
        self.report[ident] = {"used": len(rows), "refused": refused}
        if not rows:
            raise GalleryError(f"{ident}: none of its {len(refused)} photos has a usable face")
        return unit(unit(np.stack(rows)).mean(axis=0, keepdims=True))[0]

    def templates(self, lo: int, hi: int) -> np.ndarray:
        return np.stack([self.fuse(i) for i in self.ids[lo:hi]])

    def photo_counts(self) -> list[int]:
        """The photos given per identity: known before any is embedded, and never fewer than the photos used (a
        refused photo only lowers k, and fewer photos score lower: τ stays on the safe side)."""
        return [len(self.identities[i]) for i in self.ids]


def identity_folders(paths: list[str | os.PathLike]) -> dict[str, list[Path]]:
    """One identity per folder (id = the folder's name, photos = the images in it, sorted); a folder holding no
    image but subfolders stands for one identity per subfolder (``people/alice/*.jpg``, ``people/bob/*.jpg``)."""
    out: dict[str, list[Path]] = {}
    for p in map(Path, paths):
        if not p.is_dir():
            raise GalleryError(f"not a folder: {p} (one folder of photos per identity)")
        photos = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
        folders = [p] if photos else sorted(d for d in p.iterdir() if d.is_dir())
        for d in folders:
            if d.name in out:
                raise GalleryError(f"two folders for identity {d.name!r}")
            out[d.name] = sorted(f for f in d.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
    return out


def photo_pairs(pairs: list[str]) -> dict[str, list[Path]]:
    """``ID=PATH`` pairs (``--photo``, repeated) → photos per identity, in the order given."""
    out: dict[str, list[Path]] = {}
    for pair in pairs:
        ident, sep, path = pair.partition("=")
        if not sep or not ident or not path:
            raise GalleryError(f"--photo takes ID=PATH, got {pair!r}")
        if not Path(path).is_file():
            raise GalleryError(f"no such photo: {path}")
        out.setdefault(ident, []).append(Path(path))
    return out


def open_source(paths: list[str], backend_factory=None) -> Source:
    """``.npy`` files → NpySource; otherwise images / directories → ImageSource (``backend_factory()``)."""
    if paths and all(str(p).endswith(".npy") for p in paths):
        return NpySource(paths)
    if any(str(p).endswith(".npy") for p in paths):
        raise GalleryError("give either .npy embedding files or images, not both")
    if backend_factory is None:
        backend_factory = make_backend
    return ImageSource(paths, backend_factory())
