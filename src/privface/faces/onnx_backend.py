"""ONNX backend ("onnx"): any ArcFace-style embedding model (N×3×112×112 float in, N×D out).

Pipeline: dlib `Detector` → 68-point landmarks → the five ArcFace points (eye centres, nose tip,
mouth corners) → similarity transform (Umeyama) onto the standard ArcFace 112×112 template (or, with
``landmarks=5``, dlib's 5-point model → eye centres (midpoints of the corners) and nose base onto their
calibrated template positions ``DLIB5_REF``) →
bilinear warp with PIL → (x − mean) / std per channel, RGB or BGR, NCHW float32 → onnxruntime
(CPU) → L2-normalised embedding. Metric "cosine": embeddings are unit vectors, so the Euclidean
distance d relates to the cosine similarity c by d² = 2 − 2c.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image

from ..errors import ModelError
from .base import Backend, Face, Which
from .detect import Detector, select, shape_to_array

# Standard ArcFace (insightface) 112×112 template: left eye, right eye, nose tip, left/right mouth
# corner, in (x, y) pixels with pixel centres at integer coordinates (the cv2 convention).
ARCFACE_REF = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                        [41.5493, 92.3655], [70.7299, 92.2041]], dtype=np.float64)
CHIP = 112
# Indices of the 68-point model that correspond to dlib's 5-point model (the order Face uses).
DLIB5_FROM_68 = [45, 42, 36, 39, 33]
# Where the eye centres (midpoints of each eye's two corners) and the nose base of dlib's 5-point model fall on
# the ArcFace template on average (image-left eye, image-right eye, nose base), measured through the 68-point
# alignment on 299 LFW faces of people absent from pairs.txt (`python -m privface.eval.landmarks5_template`): the
# nose base lies 8 px below the template's nose tip, the corners' midpoints 1.5 px below its eye centres.
DLIB5_REF = np.array([[38.3323, 53.2151], [73.302, 53.0978], [56.1107, 79.7049]], dtype=np.float64)


# Default decision threshold on the Euclidean distance of unit embeddings: 1.2 ⇔ cosine 0.28, a
# typical ArcFace verification operating point (insightface's LFW tests put the best squared
# distance near 1.4–1.5). Calibrate on your own data for a given model.
DEFAULT_THRESHOLD = 1.2


def arcface_points(landmarks68: np.ndarray) -> np.ndarray:
    """The five ArcFace points (5×2) from dlib's 68 landmarks (x, y): image-left eye centre
    (mean of 36–41), image-right eye centre (42–47), nose tip (30), mouth corners (48, 54)."""
    p = np.asarray(landmarks68, np.float64)
    return np.stack([p[36:42].mean(0), p[42:48].mean(0), p[30], p[48], p[54]])


def dlib5_points(landmarks5: np.ndarray) -> np.ndarray:
    """Three points (3×2) from dlib's 5 landmarks (x, y; its order: image-right eye outer, inner corner,
    image-left eye outer, inner corner, base of the nose): image-left eye centre (midpoint of its corners),
    image-right eye centre, nose base — the points ``DLIB5_REF`` places."""
    p = np.asarray(landmarks5, np.float64)
    return np.stack([p[2:4].mean(0), p[0:2].mean(0), p[4]])


def umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares similarity transform (rotation, uniform scale, translation) taking the points
    `src` onto `dst` (both n×2), as a 2×3 matrix M with dst ≈ M @ [x, y, 1] (Umeyama 1991)."""
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    mu_s, mu_d = src.mean(0), dst.mean(0)
    s, d = src - mu_s, dst - mu_d
    var_s = (s ** 2).sum() / len(src)
    if var_s <= 1e-12:
        raise ValueError("landmarks are degenerate (all points coincide)")
    u, sig, vt = np.linalg.svd(d.T @ s / len(src))
    e = np.ones(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:  # best fit would be a reflection: flip the weakest axis
        e[1] = -1.0
    r = u @ np.diag(e) @ vt
    scale = (sig * e).sum() / var_s
    return np.hstack([scale * r, (mu_d - scale * r @ mu_s)[:, None]])


def warp_affine(rgb: np.ndarray, m: np.ndarray, size: int = CHIP) -> np.ndarray:
    """Warp an H×W×3 uint8 image by the 2×3 similarity `m` (input → output pixels, pixel centres at
    integers) into a size×size chip, bilinear, black outside the image."""
    a = m[:, :2]
    ainv = np.linalg.inv(a)
    tinv = -ainv @ m[:, 2]
    # PIL maps output coordinate u (pixel centres at i + 0.5) to input ainv·u + c; shift by ½ both sides.
    c = tinv + 0.5 - ainv @ np.array([0.5, 0.5])
    data = (ainv[0, 0], ainv[0, 1], c[0], ainv[1, 0], ainv[1, 1], c[1])
    out = Image.fromarray(rgb).transform((size, size), Image.Transform.AFFINE, data,
                                         resample=Image.Resampling.BILINEAR)
    return np.ascontiguousarray(np.asarray(out, np.uint8))


def align(rgb: np.ndarray, points: np.ndarray, ref: np.ndarray = ARCFACE_REF) -> np.ndarray:
    """The 112×112 ArcFace chip for landmarks (x, y) given in `rgb` pixels whose template positions are `ref`
    (default: the five ArcFace points onto the ArcFace template)."""
    points = np.asarray(points, np.float64)
    m = umeyama(points, ref)
    scale = float(np.hypot(m[0, 0], m[1, 0]))
    if scale < 0.5:
        # A face much larger than the chip: shrink (antialiased) first, as bilinear sampling alone aliases.
        h, w = rgb.shape[:2]
        nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
        rgb = np.asarray(Image.fromarray(rgb).resize((nw, nh), Image.Resampling.BOX))
        points = (points + 0.5) * np.array([nw / w, nh / h]) - 0.5
        m = umeyama(points, ref)
    return warp_affine(rgb, m, CHIP)


class ONNXBackend(Backend):
    """ArcFace-style ONNX model run with onnxruntime on dlib-aligned 112×112 chips.

    model_path: the .onnx file; it must have one float input N×3×112×112 (N, H, W may be dynamic)
    and one 2-D float output N×D. mean/std: pixel normalisation, a scalar or one value per channel
    in the model's channel order (insightface ArcFace: 127.5 / 127.5). channel_order: "RGB" or
    "BGR" (insightface's ArcFace ONNX models, e.g. w600k_r50, take RGB). landmarks: 68 aligns on the five
    ArcFace points from dlib's 68-point model (trained on iBUG 300-W, whose licence excludes commercial use);
    5 on the eye centres and nose base from dlib's 5-point model (CC0), onto ``DLIB5_REF``. Raises ModelError
    when the file is missing, unreadable or has the wrong inputs/outputs.
    """

    name = "onnx"
    metric = "cosine"

    def __init__(self, model_path: str | os.PathLike, *, mean: float | tuple = 127.5,
                 std: float | tuple = 127.5, channel_order: Literal["RGB", "BGR"] = "RGB",
                 threshold: float = DEFAULT_THRESHOLD, detector: Detector | None = None,
                 threads: int | None = None, landmarks: int = 68):
        if landmarks not in (5, 68):
            raise ValueError(f"landmarks must be 5 or 68, got {landmarks!r}")
        if channel_order not in ("RGB", "BGR"):
            raise ValueError(f"channel_order must be 'RGB' or 'BGR', got {channel_order!r}")
        self.model_path = Path(model_path)
        self.mean = _per_channel(mean, "mean")
        self.std = _per_channel(std, "std")
        if (self.std == 0).any():
            raise ValueError("std must be non-zero")
        self.channel_order = channel_order
        self.landmarks = landmarks
        self.threshold = float(threshold)
        self.detector = detector or Detector()
        self._session, self._input, self._batch1, self._digest = _open_model(self.model_path, threads)
        # One blank input through the model at load time: proves it runs and gives D.
        self.dim = int(self._run(np.zeros((1, 3, CHIP, CHIP), np.float32)).shape[1])

    def options(self) -> dict:
        return {"backend": self.name, "model": self._digest, "mean": self.mean.tolist(), "std": self.std.tolist(),
                "channel_order": self.channel_order, "detector": self.detector.options(),
                # Only when not 68, so the 68-point embeddings cached before the option existed stay valid.
                **({} if self.landmarks == 68 else {"landmarks": self.landmarks, "ref": DLIB5_REF.tolist()})}

    def faces_rgb(self, rgb: np.ndarray, which: Which = "largest") -> list[Face]:
        work, scale = self.detector.working_image(rgb)
        dets = select(self.detector.detect(work, scale), which, work.shape)
        if not dets:
            return []
        aligned = [self.aligned(rgb, work, scale, d) for d in dets]
        chips = np.stack([c for _, c in aligned])
        emb = self.embed_chips(chips)
        return [Face(box=d.box, landmarks=p, chip=c, embedding=e, detector=d.detector, score=d.score,
                     found=d.found, index=d.index)
                for d, (p, _), c, e in zip(dets, aligned, chips, emb)]

    def aligned(self, rgb: np.ndarray, work: np.ndarray, scale: float, det) -> tuple[np.ndarray, np.ndarray]:
        """(dlib's 5 landmarks in `rgb` pixels, the 112×112 chip) of one detection in the working image `work`
        (`Detector.working_image`): landmarks=5 runs only dlib's 5-point model, 68 only its 68-point one."""
        if self.landmarks == 68:
            marks = shape_to_array(self.detector.landmarks68(work, det), scale)
            return marks[DLIB5_FROM_68], align(rgb, arcface_points(marks))
        five = shape_to_array(self.detector.landmarks5(work, det), scale)
        return five, align(rgb, dlib5_points(five), DLIB5_REF)

    def preprocess(self, chips: np.ndarray) -> np.ndarray:
        """N×112×112×3 uint8 RGB chips → the model input: N×3×112×112 float32, normalised."""
        chips = np.asarray(chips)
        if chips.ndim != 4 or chips.shape[1:] != (CHIP, CHIP, 3):
            raise ValueError(f"chips must be N×{CHIP}×{CHIP}×3, got shape {chips.shape}")
        x = chips.astype(np.float32)
        if self.channel_order == "BGR":
            x = x[..., ::-1]
        x = (x - self.mean) / self.std
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2), dtype=np.float32)

    def embed_chips(self, chips: np.ndarray) -> np.ndarray:
        """Unit-length float32 embeddings (N×D) of aligned N×112×112×3 uint8 RGB chips."""
        out = self._run(self.preprocess(chips))
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norm, 1e-12)).astype(np.float32)

    def _run(self, x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            return np.zeros((0, self.dim), np.float32)
        try:
            if self._batch1:
                outs = [self._session.run(None, {self._input: x[i:i + 1]})[0] for i in range(len(x))]
                out = np.concatenate(outs)
            else:
                out = self._session.run(None, {self._input: x})[0]
        except Exception as e:  # onnxruntime raises its own exception types
            raise ModelError(f"{self.model_path}: inference failed ({type(e).__name__}: {e})") from None
        out = np.asarray(out, np.float32)
        if out.ndim != 2 or out.shape[0] != len(x) or out.shape[1] < 1:
            raise ModelError(f"{self.model_path}: output has shape {out.shape}, expected ({len(x)}, D)")
        if not np.isfinite(out).all():
            raise ModelError(f"{self.model_path}: the model produced non-finite values")
        return out


def _per_channel(v: float | tuple, what: str) -> np.ndarray:
    a = np.asarray(v, np.float32).reshape(-1)
    if a.size == 1:
        a = np.repeat(a, 3)
    if a.size != 3 or not np.isfinite(a).all():
        raise ValueError(f"{what} must be a finite scalar or three values, got {v!r}")
    return a


def _open_model(path: Path, threads: int | None) -> tuple[Any, str, bool, str]:
    """(session, input name, batch fixed to 1?, short sha256) after checking the graph's interface."""
    import onnxruntime as ort

    if not path.is_file():
        raise ModelError(f"no such ONNX model file: {path}")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # see dlib_onnx.py
    if threads:
        opts.intra_op_num_threads = threads
    try:
        sess = ort.InferenceSession(_weights_as_constants(data), opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # InvalidProtobuf, Fail, InvalidGraph, … (onnxruntime's own types)
        raise ModelError(f"{path}: not a loadable ONNX model ({type(e).__name__}: {e})") from None
    ins, outs = sess.get_inputs(), sess.get_outputs()
    if len(ins) != 1:
        raise ModelError(f"{path}: expected exactly one input, the model has {len(ins)}")
    shape = list(ins[0].shape or [])
    fixed = [d if isinstance(d, int) else None for d in shape]  # str / None dims are dynamic
    if (ins[0].type != "tensor(float)" or len(shape) != 4 or fixed[1] != 3
            or fixed[2] not in (CHIP, None) or fixed[3] not in (CHIP, None) or fixed[0] not in (1, None)):
        raise ModelError(f"{path}: input {ins[0].name!r} is {ins[0].type} {shape}; expected a float "
                         f"tensor N×3×{CHIP}×{CHIP} (N, H and W may be dynamic, a fixed N must be 1)")
    if len(outs) != 1:
        raise ModelError(f"{path}: expected exactly one output, the model has {len(outs)}")
    if outs[0].type != "tensor(float)" or len(outs[0].shape or []) != 2:
        raise ModelError(f"{path}: output {outs[0].name!r} is {outs[0].type} {outs[0].shape}; expected a "
                         "2-D float tensor N×D")
    return sess, ins[0].name, fixed[0] == 1, digest[:16]


def _weights_as_constants(data: bytes) -> bytes:
    """The model with its weights removed from the graph inputs. Older exporters (SFace's, for one) list every
    initializer as a graph input too; onnxruntime then keeps them overridable and skips constant folding
    (BatchNorm into Conv), which costs about a quarter of SFace's run time. Same function, same outputs;
    anything `onnx` cannot parse is passed on unchanged for onnxruntime to reject."""
    try:
        import onnx

        model = onnx.load_from_string(data)
    except Exception:  # DecodeError and friends: onnxruntime reports the bad file below
        return data
    weights = {t.name for t in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in weights]
    if len(keep) == len(model.graph.input):
        return data
    del model.graph.input[:]
    model.graph.input.extend(keep)
    return model.SerializeToString()
