"""Loading images from a path, bytes or an array into one form: H×W×3 uint8 RGB."""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from ..errors import ImageError

ImageInput = str | os.PathLike | bytes | bytearray | memoryview | np.ndarray | Image.Image

MAX_PIXELS = 64_000_000  # refuse decompression bombs: a 8000×8000 photo is the most we take


def load_rgb(image: ImageInput) -> np.ndarray:
    """Return the image as a C-contiguous H×W×3 uint8 RGB array.

    Accepts a file path, encoded bytes (JPEG, PNG, PGM, …), a PIL image, or an array that is H×W
    (grey), H×W×1, H×W×3 (RGB) or H×W×4 (RGBA); float arrays must lie in [0, 1]. An encoded image is
    turned upright by its EXIF orientation, as browsers do; a PIL image or array is taken as it is.
    """
    if isinstance(image, np.ndarray):
        return _array_to_rgb(image)
    if isinstance(image, Image.Image):
        return _pil_to_rgb(image, "PIL image")
    if isinstance(image, (bytes, bytearray, memoryview)):
        return _open(io.BytesIO(bytes(image)), "image bytes")
    if isinstance(image, (str, os.PathLike)):
        path = Path(image)
        if not path.is_file():
            raise ImageError(f"no such image file: {path}")
        return _open(path, str(path))
    raise ImageError(f"cannot read an image from a {type(image).__name__}")


def _open(src, name: str) -> np.ndarray:
    try:
        with Image.open(src) as im:
            if im.width * im.height > MAX_PIXELS:
                raise ImageError(f"{name}: {im.width}×{im.height} is larger than {MAX_PIXELS} pixels")
            im.load()
            # a phone JPEG stores its rotation in EXIF; browsers apply it when they decode, so must we
            return _pil_to_rgb(ImageOps.exif_transpose(im), name)
    except UnidentifiedImageError:
        raise ImageError(f"{name}: not an image (unknown or unsupported format)") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageError(f"{name}: corrupt or truncated image ({e})") from None


def _pil_to_rgb(im: Image.Image, name: str) -> np.ndarray:
    if im.width < 8 or im.height < 8:
        raise ImageError(f"{name}: {im.width}×{im.height} is too small to hold a face")
    if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.asarray(im, dtype=np.float64)
        hi = a.max() or 1.0
        im = Image.fromarray(np.clip(a * (255.0 / hi), 0, 255).astype(np.uint8))
    return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8))


def _array_to_rgb(a: np.ndarray) -> np.ndarray:
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)):
        raise ImageError(f"image array must be H×W, H×W×1, H×W×3 or H×W×4, got shape {a.shape}")
    if min(a.shape[:2]) < 8:
        raise ImageError(f"image array {a.shape[1]}×{a.shape[0]} is too small to hold a face")
    if a.dtype.kind == "f":
        if not np.isfinite(a).all() or a.min() < 0 or a.max() > 1:
            raise ImageError("float image arrays must be finite and lie in [0, 1]")
        a = np.round(a * 255)
    elif a.dtype.kind not in "ui":
        raise ImageError(f"image array dtype {a.dtype} is not numeric")
    elif a.min() < 0 or a.max() > 255:
        raise ImageError("integer image arrays must lie in [0, 255]")
    a = a.astype(np.uint8, copy=False)
    if a.ndim == 2:
        a = np.stack([a, a, a], axis=-1)
    elif a.shape[2] == 4:
        a = a[:, :, :3]
    return np.ascontiguousarray(a)


def is_grey(rgb: np.ndarray) -> bool:
    """True when all three channels are equal (a grey image stored as RGB)."""
    return bool(np.array_equal(rgb[:, :, 0], rgb[:, :, 1]) and np.array_equal(rgb[:, :, 1], rgb[:, :, 2]))
