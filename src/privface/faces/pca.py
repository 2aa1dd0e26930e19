"""Eigenfaces backend ("pca"): dlib-aligned grey chips projected onto k principal components.

Seed paper 000, §VI-E "Performance With PCA": when the user population is known in advance the
ResNet embedding can be replaced by PCA, with feature dimension k from 16 to 48 (step 8), the PCA
fitted on 70% of the face images and evaluated on the remaining 30%, matched by Euclidean distance.
Here `PCABackend.train` fits the PCA (scikit-learn) on the chips of the given images; `save` /
`load` keep the fitted model in a pickle-free .npz file.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import dlib
import numpy as np
from PIL import Image, ImageOps

from ..errors import ModelError, NoFaceError
from .base import Backend, Face, Which
from .detect import Detector, select, shape_to_array
from .image import ImageInput, load_rgb

FORMAT = "privface-pca"
VERSION = 1
# Without labels the threshold is this fraction of the median distance between training chips
# (all pairs); near the EER threshold of ORL 70/30 splits with the defaults, k = 16–48.
MEDIAN_RATIO = 0.9
# Settings saved with a model: name → type (the threshold and the detector are stored as well).
_SETTINGS = {"chip_size": int, "padding": float, "equalize": bool, "normalize": bool, "whiten": bool, "unit": bool}


class PCABackend(Backend):
    """Eigenfaces over dlib 5-point-aligned chips (§VI-E of seed paper 000).

    Pipeline: `Detector` (whole-image fallback on, so pre-cropped faces work) → 5-point landmarks →
    `dlib.get_face_chip(size=chip_size, padding=padding)` → grey → histogram equalisation
    (`equalize`) → zero mean / unit variance per image (`normalize`) → flatten →
    (x − mean) · componentsᵀ, divided by √explained_variance when `whiten` → scaled to unit length
    when `unit` (then metric "cosine": Euclidean distance on unit vectors). Embeddings are float32
    of length k. The defaults (48 px, equalised, whitened, unit) came out best on ORL 70/30 splits;
    the plain eigenfaces of the paper are equalize=False, whiten=False, unit=False.
    Build one with `PCABackend.train(...)` or `PCABackend.load(path)`.
    """

    name = "pca"

    def __init__(self, mean: np.ndarray, components: np.ndarray, explained_variance: np.ndarray, *,
                 chip_size: int = 48, padding: float = 0.25, equalize: bool = True, normalize: bool = True,
                 whiten: bool = True, unit: bool = True, threshold: float = 1.0,
                 detector: Detector | None = None):
        self.mean = np.asarray(mean, np.float64)
        self.components = np.asarray(components, np.float64)
        self.explained_variance = np.asarray(explained_variance, np.float64)
        self.chip_size, self.padding = int(chip_size), float(padding)
        self.equalize, self.normalize = bool(equalize), bool(normalize)
        self.whiten, self.unit = bool(whiten), bool(unit)
        self.threshold = float(threshold)
        self.detector = detector or Detector(whole_fallback=True)
        _check_model(self.mean, self.components, self.explained_variance, self.chip_size, "PCA model")
        self.dim = self.components.shape[0]
        self.metric = "cosine" if self.unit else "euclidean"

    @property
    def k(self) -> int:
        return self.dim

    # -- training -------------------------------------------------------------------------------

    @classmethod
    def train(cls, images: Sequence[ImageInput], labels: Sequence | None = None, k: int = 32, *,
              chip_size: int = 48, padding: float = 0.25, equalize: bool = True, normalize: bool = True,
              whiten: bool = True, unit: bool = True, threshold: float | None = None,
              detector: Detector | None = None) -> PCABackend:
        """Fit the eigenfaces on the largest face of each image (paper 000 §VI-E trains on 70%).

        threshold: when None it is the equal-error-rate threshold over all training pairs if
        `labels` (one per image) are given — optimistic, since the PCA was fitted on those images —
        otherwise MEDIAN_RATIO × the median pairwise distance of the training embeddings.
        Raises ValueError for bad arguments and NoFaceError when an image has no face.
        """
        from sklearn.decomposition import PCA

        images = list(images)
        if labels is not None and len(labels) != len(images):
            raise ValueError(f"{len(labels)} labels for {len(images)} images")
        if not 16 <= chip_size <= 512:
            raise ValueError(f"chip_size must lie in [16, 512], got {chip_size}")
        kmax = min(len(images) - 1, chip_size * chip_size)  # n centred samples span n − 1 dimensions
        if not 1 <= k <= kmax:
            raise ValueError(f"k must lie in [1, min(#images − 1, chip_size²)] = [1, {kmax}], got {k}")
        model = cls(np.zeros(chip_size * chip_size), np.eye(1, chip_size * chip_size), np.ones(1),
                    chip_size=chip_size, padding=padding, equalize=equalize, normalize=normalize,
                    whiten=whiten, unit=unit, detector=detector)
        rows = []
        for i, image in enumerate(images):
            found = model._chips(load_rgb(image), "largest")
            if not found:
                raise NoFaceError(f"no face found in training image #{i}")
            rows.append(model._vector(found[0][2]))
        x = np.stack(rows)
        pca = PCA(n_components=k, whiten=whiten, svd_solver="full").fit(x)
        model.mean, model.components, model.explained_variance = pca.mean_, pca.components_, pca.explained_variance_
        _check_model(model.mean, model.components, model.explained_variance, chip_size, "trained PCA")
        model.dim = k
        if threshold is None:
            emb = model._project(x)
            iu = np.triu_indices(len(x), 1)
            dist = np.linalg.norm(emb[iu[0]] - emb[iu[1]], axis=1)
            if labels is not None:
                lab = np.asarray(labels)
                same = lab[iu[0]] == lab[iu[1]]
                if not same.any() or same.all():
                    raise ValueError("labels must give at least one same-person and one different-person pair")
                threshold = eer_threshold(dist[same], dist[~same])
            else:
                threshold = MEDIAN_RATIO * float(np.median(dist)) if len(dist) else 1.0
        model.threshold = float(threshold)
        return model

    # -- embedding ------------------------------------------------------------------------------

    def faces_rgb(self, rgb: np.ndarray, which: Which = "largest") -> list[Face]:
        found = self._chips(rgb, which)
        if not found:
            return []
        emb = self._project(np.stack([self._vector(chip) for _, _, chip in found])).astype(np.float32)
        return [Face(box=det.box, landmarks=shape_to_array(shape, det.scale), chip=chip, embedding=e,
                     detector=det.detector, score=det.score,
                     found=det.found, index=det.index)
                for (det, shape, chip), e in zip(found, emb)]

    def options(self) -> dict:
        h = hashlib.sha256()
        for a in (self.mean, self.components, self.explained_variance):
            h.update(np.ascontiguousarray(a, np.float64).tobytes())
        return {"backend": self.name, "k": self.dim, **self._settings(), "detector": self.detector.options(),
                "model": h.hexdigest()[:16]}

    def _settings(self) -> dict:
        return {key: getattr(self, key) for key in _SETTINGS}

    def _chips(self, rgb: np.ndarray, which: Which) -> list[tuple]:
        """(detection, 5-point shape, aligned RGB chip) for the selected faces (see `detect.select`)."""
        work, scale = self.detector.working_image(rgb)
        dets = select(self.detector.detect(work, scale), which, work.shape)
        out = []
        for det in dets:
            shape = self.detector.landmarks5(work, det)
            chip = dlib.get_face_chip(work, shape, size=self.chip_size, padding=self.padding)
            out.append((det, shape, np.ascontiguousarray(chip, np.uint8)))
        return out

    def _vector(self, chip: np.ndarray) -> np.ndarray:
        """The chip as a flat grey vector, optionally equalised and standardised."""
        grey = Image.fromarray(chip).convert("L")
        if self.equalize:
            grey = ImageOps.equalize(grey)
        v = np.asarray(grey, np.float64).ravel()
        if self.normalize:
            v = (v - v.mean()) / (v.std() + 1e-6)
        return v

    def _project(self, x: np.ndarray) -> np.ndarray:
        p = (x - self.mean) @ self.components.T
        if self.whiten:
            p = p / np.sqrt(self.explained_variance)
        if self.unit:
            p = p / np.maximum(np.linalg.norm(p, axis=-1, keepdims=True), 1e-12)
        return p

    # -- persistence ----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the model to `path` (exactly that name) as a pickle-free .npz, replaced atomically."""
        path = Path(path)
        cfg = {**self._settings(), "threshold": self.threshold, "detector": self.detector.options()}
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            np.savez(f, format=np.array(FORMAT), version=np.array(VERSION, np.int64), config=np.array(json.dumps(cfg)),
                     mean=self.mean, components=self.components, explained_variance=self.explained_variance)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> PCABackend:
        """Read a model written by `save`; ModelError when it is missing, corrupt or not a PCA model."""
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"no such PCA model file: {path}")
        try:
            with open(path, "rb") as f:
                z = np.load(f, allow_pickle=False)
                if not isinstance(z, np.lib.npyio.NpzFile):
                    raise ModelError(f"{path}: not a privface PCA model (a bare .npy array, not an .npz archive)")
                with z:
                    missing = {"format", "version", "config", "mean", "components", "explained_variance"} - set(z.files)
                    if missing:
                        raise ModelError(f"{path}: not a privface PCA model (missing {', '.join(sorted(missing))})")
                    arrays = {key: z[key] for key in z.files}
        except ModelError:
            raise
        except Exception as e:  # numpy, zipfile and zlib raise many types on damaged input
            raise ModelError(f"{path}: not a readable PCA model file ({type(e).__name__}: {e})") from None
        return cls._from_arrays(arrays, str(path))

    @classmethod
    def _from_arrays(cls, a: dict, name: str) -> PCABackend:
        fmt, version = a["format"], a["version"]
        if fmt.shape != () or fmt.dtype.kind != "U" or str(fmt) != FORMAT:
            raise ModelError(f"{name}: not a privface PCA model (format field is not {FORMAT!r})")
        if version.shape != () or version.dtype.kind not in "iu":
            raise ModelError(f"{name}: malformed version field")
        if int(version) != VERSION:
            raise ModelError(f"{name}: PCA model format version {int(version)} is not supported (expected {VERSION})")
        try:
            cfg = json.loads(str(a["config"]))
            settings = {key: cfg[key] for key in _SETTINGS}
            threshold = cfg["threshold"]
            detector = Detector(**cfg["detector"])
        except (ValueError, KeyError, TypeError) as e:
            raise ModelError(f"{name}: malformed PCA model configuration ({type(e).__name__}: {e})") from None
        ok = all(isinstance(v, _SETTINGS[key]) or (_SETTINGS[key] is float and type(v) is int)
                 for key, v in settings.items())
        if not (ok and 16 <= settings["chip_size"] <= 512 and 0 <= settings["padding"] <= 4
                and isinstance(threshold, (int, float)) and np.isfinite(threshold) and threshold >= 0):
            raise ModelError(f"{name}: PCA model configuration out of range: {cfg}")
        for key in ("mean", "components", "explained_variance"):
            if a[key].dtype.kind != "f":
                raise ModelError(f"{name}: {key} must be a float array, got {a[key].dtype}")
        _check_model(a["mean"], a["components"], a["explained_variance"], settings["chip_size"], name)
        return cls(a["mean"], a["components"], a["explained_variance"], **settings, threshold=threshold,
                   detector=detector)


def _check_model(mean: np.ndarray, comps: np.ndarray, var: np.ndarray, chip_size: int, name: str) -> None:
    d = chip_size * chip_size
    if mean.shape != (d,):
        raise ModelError(f"{name}: mean has shape {mean.shape}, expected ({d},) for {chip_size}×{chip_size} chips")
    if comps.ndim != 2 or comps.shape[1] != d or not 1 <= comps.shape[0] <= d:
        raise ModelError(f"{name}: components have shape {comps.shape}, expected (k, {d})")
    if var.shape != (comps.shape[0],):
        raise ModelError(f"{name}: explained_variance has shape {var.shape}, expected ({comps.shape[0]},)")
    if not (np.isfinite(mean).all() and np.isfinite(comps).all() and np.isfinite(var).all()) or (var <= 0).any():
        raise ModelError(f"{name}: model arrays contain non-finite or non-positive-variance values")


def eer_threshold(genuine: np.ndarray, impostor: np.ndarray) -> float:
    """Distance threshold where the false-reject rate (genuine > t) meets the false-accept rate
    (impostor ≤ t), picked among the observed distances."""
    g, i = np.sort(np.asarray(genuine, np.float64)), np.sort(np.asarray(impostor, np.float64))
    cand = np.unique(np.concatenate([g, i]))
    frr = 1.0 - np.searchsorted(g, cand, side="right") / len(g)
    far = np.searchsorted(i, cand, side="right") / len(i)
    return float(cand[np.argmin(np.abs(frr - far))])
