"""Real photographs that ship inside installed packages, for `make demo` and tests (no download).

Grace Hopper (matplotlib's sample data) is the enrolled user; Eileen Collins (scikit-image's
`astronaut.png`) and the cameraman (`camera.png`) are impostors. Altered copies of the enrolled
photo play the genuine attempts.
"""
from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

from .errors import ImageError


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImageError(f"demo image unavailable: package {package} is not installed")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)
    if not path.is_file():
        raise ImageError(f"demo image missing from {package}: {path}")
    return path


def enrolled_photo() -> Path:
    return _package_file("matplotlib", "mpl-data", "sample_data", "grace_hopper.jpg")


def impostor_photos() -> dict[str, Path]:
    return {"astronaut (Eileen Collins)": _package_file("skimage", "data", "astronaut.png"),
            "cameraman": _package_file("skimage", "data", "camera.png")}


def altered_copies(path: Path) -> dict[str, np.ndarray]:
    """Genuine attempts: the enrolled photo mirrored, relit, rotated+cropped, grey JPEG, shrunk."""
    im = Image.open(path).convert("RGB")
    w, h = im.size
    buf = io.BytesIO()
    ImageOps.grayscale(im).save(buf, "JPEG", quality=35)
    rot = im.rotate(8, resample=Image.BICUBIC, expand=False).crop((w // 12, h // 14, w - w // 12, h))
    return {
        "mirrored, darker": np.asarray(ImageEnhance.Brightness(ImageOps.mirror(im)).enhance(0.7)),
        "rotated 8°, cropped": np.asarray(rot),
        "grey, JPEG q=35": np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")),
        "shrunk to 1/3": np.asarray(im.resize((w // 3, h // 3), Image.BILINEAR)),
    }


def _face_square(path: Path, box: tuple[int, int, int, int], side: int) -> Image.Image:
    """The photo cropped to a square twice the face box's size around it, resized to side × side."""
    left, top, right, bottom = box
    cx, cy, half = (left + right) / 2, (top + bottom) / 2, (right - left)
    im = Image.open(path).convert("RGB")
    return im.crop((round(cx - half), round(cy - half), round(cx + half), round(cy + half))).resize(
        (side, side), Image.BICUBIC)


def two_faces(second_scale: float = 1.0, side: int = 320) -> np.ndarray:
    """A photo of two people side by side: Grace Hopper (left, her face about side/2 px) and Eileen Collins (right,
    scaled by second_scale, bottom-aligned). second_scale 1: two faces of about the same size; 0.5: one much smaller."""
    grace = _face_square(enrolled_photo(), (161, 137, 376, 352), side)
    other = _face_square(impostor_photos()["astronaut (Eileen Collins)"], (179, 83, 266, 170),
                         max(8, round(side * second_scale)))
    out = Image.new("RGB", (2 * side, side), (128, 128, 128))
    out.paste(grace, (0, 0))
    out.paste(other, (side, side - other.height))
    return np.asarray(out)
