"""Evaluation datasets: folder-per-identity, ORL, and LFW with its standard pairs protocol.

Datasets live outside the repository; the root comes from `--data-root` or `PRIVFACE_DATA`.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DatasetError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".pgm", ".ppm", ".bmp", ".tif", ".tiff", ".webp"}


@dataclass
class Dataset:
    """Images with identities, and optionally a fixed pair protocol.

    paths[i] has identity ids[i]. When `pairs` is None the protocol is all pairs (i < j);
    otherwise pairs is a P×2 index array into paths, `genuine` a P-bool array and `folds` a P-int
    array (LFW: 10 folds).
    """

    name: str
    paths: list[Path]
    ids: np.ndarray
    pairs: np.ndarray | None = None
    genuine: np.ndarray | None = None
    folds: np.ndarray | None = None
    meta: dict = field(default_factory=dict)  # "face": which face an image stands for (default largest)

    @property
    def subjects(self) -> int:
        return int(len(np.unique(self.ids)))


def data_root(arg: str | os.PathLike | None = None) -> Path:
    """The datasets root: the given argument, else $PRIVFACE_DATA; a clear error if neither is usable."""
    value = arg or os.environ.get("PRIVFACE_DATA")
    if not value:
        raise DatasetError("no dataset root: pass --data-root DIR or set PRIVFACE_DATA")
    root = Path(value).expanduser()
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} is not a directory")
    return root


def load_folder(root: str | os.PathLike, name: str | None = None) -> Dataset:
    """A folder with one sub-folder per identity, each holding that identity's images."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root} is not a directory")
    paths, ids = [], []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        imgs = sorted(p for p in sub.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        paths += imgs
        ids += [sub.name] * len(imgs)
    if not paths:
        raise DatasetError(f"{root}: no images found (expected one sub-folder of images per identity)")
    if len(set(ids)) < 2:
        raise DatasetError(f"{root}: need at least two identities, found {len(set(ids))}")
    return Dataset(name or root.name, paths, np.array(ids))


def _natural(p: Path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]


def load_orl(root: str | os.PathLike | None = None) -> Dataset:
    """ORL / AT&T faces (Olivetti Research Laboratory): orl/images/sN/K.pgm, 40 × 10 images."""
    base = data_root(root) / "orl" / "images"
    if not base.is_dir():
        raise DatasetError(f"ORL not found: expected {base}/sN/K.pgm")
    paths, ids = [], []
    for sub in sorted((p for p in base.iterdir() if p.is_dir()), key=_natural):
        imgs = sorted(sub.glob("*.pgm"), key=_natural)
        paths += imgs
        ids += [sub.name] * len(imgs)
    if not paths:
        raise DatasetError(f"ORL folder {base} holds no .pgm images")
    return Dataset("orl", paths, np.array(ids))


def load_lfw(root: str | os.PathLike | None = None) -> Dataset:
    """LFW with the standard 10-fold pairs protocol (lfw/pairs.txt: `10 300`, then per fold 300
    same-person lines `Name i j` and 300 different-person lines `Name1 i Name2 j`). LFW images are
    centred on the named person, so the face nearest the centre stands for the image."""
    base = data_root(root) / "lfw"
    pairs_file = base / "pairs.txt"
    if not pairs_file.is_file():
        raise DatasetError(f"LFW pairs file not found: {pairs_file}")
    lines = [ln.split() for ln in pairs_file.read_text().splitlines() if ln.strip()]
    try:
        n_folds, n_per = int(lines[0][0]), int(lines[0][1])
    except (IndexError, ValueError):
        raise DatasetError(f"{pairs_file}: first line must be '<folds> <pairs per class>'") from None
    body = lines[1:]
    if len(body) != n_folds * 2 * n_per:
        raise DatasetError(f"{pairs_file}: expected {n_folds * 2 * n_per} pair lines, found {len(body)}")
    index: dict[Path, int] = {}

    def image(name: str, num: str) -> int:
        try:
            p = base / "images" / name / f"{name}_{int(num):04d}.jpg"
        except ValueError:
            raise DatasetError(f"{pairs_file}: bad image number {num!r} for {name}") from None
        return index.setdefault(p, len(index))

    pairs, genuine, folds = [], [], []
    for k, f in enumerate(body):
        fold, same = divmod(k, 2 * n_per)[0], (k % (2 * n_per)) < n_per
        if same and len(f) == 3:
            pairs.append((image(f[0], f[1]), image(f[0], f[2])))
        elif not same and len(f) == 4:
            pairs.append((image(f[0], f[1]), image(f[2], f[3])))
        else:
            raise DatasetError(f"{pairs_file}: line {k + 2} malformed: {' '.join(f)!r}")
        genuine.append(same)
        folds.append(fold)
    paths = list(index)
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise DatasetError(f"LFW: {len(missing)} images named in pairs.txt are missing, e.g. {missing[0]}")
    ids = np.array([p.parent.name for p in paths])
    return Dataset("lfw", paths, ids, np.array(pairs), np.array(genuine), np.array(folds),
                   {"folds": n_folds, "pairs_per_class": n_per, "face": "center"})


#: Share of LFW identities held out of every LFW evaluation: the data the default 1:N thresholds are
#: calibrated on (``eval.default_tau``). An identity is held out iff the first byte of SHA-256(name) < 51.
CALIBRATION_BYTE = 51
PARTS = ("evaluation", "calibration", "all")


def lfw_calibration(names) -> np.ndarray:
    """True for the LFW identities held out for calibration (about 20 %, fixed by name)."""
    return np.array([hashlib.sha256(str(n).encode()).digest()[0] < CALIBRATION_BYTE for n in names], dtype=bool)


def load_identification(name: str, root: str | os.PathLike | None = None, part: str = "evaluation") -> Dataset:
    """The images of a dataset for 1:N identification (no pair protocol), the face nearest the centre standing
    for an LFW image. `lfw`: lfw/images (13 233 images, 5 749 people) split by identity (``lfw_calibration``)
    into the ``evaluation`` part and the held-out ``calibration`` part (``all``: both); other names as ``load``
    (one part)."""
    if part not in PARTS:
        raise DatasetError(f"part must be one of {PARTS}, got {part!r}")
    if name != "lfw":
        ds = load(name, root)
        return Dataset(ds.name, ds.paths, ds.ids, meta=ds.meta)
    base = data_root(root) / "lfw" / "images"
    if not base.is_dir():
        raise DatasetError(f"LFW images not found: expected {base}/Name/Name_NNNN.jpg")
    ds = load_folder(base, "lfw")
    if part != "all":
        keep = lfw_calibration(ds.ids) == (part == "calibration")
        ds = Dataset(ds.name, [p for p, k in zip(ds.paths, keep) if k], ds.ids[keep])
    ds.meta["face"] = "center"
    ds.meta["part"] = part
    return ds


def load(name: str, root: str | os.PathLike | None = None) -> Dataset:
    """`orl`, `lfw`, or a path to a folder-per-identity dataset."""
    if name == "orl":
        return load_orl(root)
    if name == "lfw":
        return load_lfw(root)
    if Path(name).is_dir():
        return load_folder(name)
    raise DatasetError(f"unknown dataset {name!r}: use orl, lfw, or a folder with one sub-folder per identity")
