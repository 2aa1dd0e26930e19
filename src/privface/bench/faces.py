"""`privface bench faces`: per-image latency of the face pipeline (medians, one process, warm models)."""
from __future__ import annotations

import statistics
import time

import numpy as np

from ..faces.image import load_rgb
from ..faces.registry import make_backend


def _images(dataset: str, n: int, data_root) -> tuple[str, list]:
    if dataset == "demo":
        from .. import demo_data

        imgs = [demo_data.enrolled_photo(), *demo_data.altered_copies(demo_data.enrolled_photo()).values()]
        return "demo", (imgs * (n // len(imgs) + 1))[:n]
    from ..eval.datasets import load

    ds = load(dataset, data_root)
    idx = np.linspace(0, len(ds.paths) - 1, num=min(n, len(ds.paths))).round().astype(int)
    return ds.name, [ds.paths[i] for i in idx]


def bench_faces(spec: dict, *, dataset: str = "orl", images: int = 40, repeat: int = 3, data_root=None) -> dict:
    """Median milliseconds per image for decode + detect + align + embed (the whole face pipeline).

    Each image is processed `repeat` times after one warm-up pass; the median over all timings is
    reported, with the detection share measured separately on the same images; for the ONNX backends
    (`sface`, `onnx`) also landmarks + ArcFace alignment and the embedding network alone.
    """
    backend = make_backend(**spec)
    name, imgs = _images(dataset, images, data_root)
    rgbs = [load_rgb(i) for i in imgs]
    backend.faces_rgb(rgbs[0])  # warm-up: loads the models
    total, detect, align, embed, undetected = [], [], [], [], 0
    for img in imgs:
        for _ in range(repeat):
            t = time.perf_counter()
            found = backend.faces(img, "largest")
            total.append((time.perf_counter() - t) * 1000)
        undetected += not found
        det = getattr(backend, "detector", None)
        if det is not None:
            t = time.perf_counter()
            work, scale = det.working_image(load_rgb(img))
            dets = det.detect(work, scale)
            detect.append((time.perf_counter() - t) * 1000)
            if dets and hasattr(backend, "embed_chips"):
                align_ms, embed_ms = _onnx_stages(backend, load_rgb(img), work, scale, dets[0])
                align.append(align_ms)
                embed.append(embed_ms)
    out = {"backend": backend.name, "dataset": name, "images": len(imgs), "repeat": repeat,
           "median_ms_per_image": round(statistics.median(total), 2),
           "p90_ms_per_image": round(float(np.percentile(total, 90)), 2)}
    if detect:
        out["median_ms_detect"] = round(statistics.median(detect), 2)
    if align:
        out["median_ms_align"] = round(statistics.median(align), 2)
        out["median_ms_embed"] = round(statistics.median(embed), 2)
    out["undetected"] = undetected
    out["options"] = backend.options()
    return out


def _onnx_stages(backend, rgb, work, scale, detection) -> tuple[float, float]:
    """Milliseconds for the backend's landmarks + ArcFace alignment (sface: dlib's 5-point model), and for the
    network on that chip."""
    t = time.perf_counter()
    _, chip = backend.aligned(rgb, work, scale, detection)
    t1 = time.perf_counter()
    backend.embed_chips(chip[None])
    return (t1 - t) * 1000, (time.perf_counter() - t1) * 1000
