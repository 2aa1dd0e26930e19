"""Where dlib's 5 landmarks fall on the ArcFace 112×112 template: the calibration behind
``faces.onnx_backend.DLIB5_REF`` (SFace aligned from dlib's CC0 5-point model instead of the 68-point one).

``python -m privface.eval.landmarks5_template`` detects faces on a seeded sample of LFW images of people who
appear nowhere in ``pairs.txt`` (so no evaluated pair is touched), runs both dlib shape predictors on each
detection, maps the five 5-point landmarks through the 68-point ArcFace alignment (Umeyama onto ``ARCFACE_REF``)
and averages them on the first half of the sample. The second half scores each candidate 5-point alignment by
how far it puts the 68-point ArcFace points from the template (RMS, chip pixels). ``--verify`` adds SFace's
verification on the people absent from pairs.txt who have two or more photos (all pairs of them): that, not an
accuracy on evaluation pairs, chose ``eyes_nose_calibrated`` (the RMS alone slightly prefers all five points, whose
verification is worse).
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ..faces.detect import Detector, select, shape_to_array
from ..faces.image import load_rgb
from ..faces.onnx_backend import ARCFACE_REF, arcface_points, dlib5_points, umeyama
from . import metrics
from .datasets import data_root


def held_out_people(root) -> list:
    """The LFW people's folders absent from pairs.txt."""
    lfw = data_root(root) / "lfw"
    used = set()
    for line in (lfw / "pairs.txt").read_text().splitlines()[1:]:
        f = line.split()
        used.update([f[0]] if len(f) == 3 else [f[0], f[2]])
    return sorted(p for p in (lfw / "images").iterdir() if p.is_dir() and p.name not in used)


def held_out_images(root, n: int, seed: int = 0) -> list:
    """n LFW images (one per person) of people absent from pairs.txt, seeded."""
    people = held_out_people(root)
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(people), size=min(n, len(people)), replace=False)
    return [sorted(people[k].iterdir())[0] for k in sorted(pick)]


def landmarks(paths, det: Detector) -> tuple[np.ndarray, np.ndarray]:
    """(N×5×2 dlib 5-point, N×68×2 dlib 68-point) landmarks of each image's centre-most face, images without a
    face skipped."""
    p5, p68 = [], []
    for path in paths:
        rgb = load_rgb(path)
        work, scale = det.working_image(rgb)
        dets = select(det.detect(work, scale), "center", work.shape)
        if dets:
            p5.append(shape_to_array(det.landmarks5(work, dets[0]), scale))
            p68.append(shape_to_array(det.landmarks68(work, dets[0]), scale))
    return np.array(p5), np.array(p68)


def apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return pts @ m[:, :2].T + m[:, 2]


def verify(root, variants: dict) -> dict:
    """SFace's EER and TAR at FAR 1e-3 per alignment (68-point ArcFace and each 5-point variant) over all pairs of
    the held-out people's photos (people with two or more)."""
    from ..faces.onnx_backend import align
    from ..faces.sface import SFaceBackend

    paths, ids = [], []
    for k, person in enumerate(p for p in held_out_people(root) if len(list(p.iterdir())) >= 2):
        for f in sorted(person.iterdir()):
            paths.append(f)
            ids.append(k)
    sface = SFaceBackend()
    p5, p68 = landmarks(paths, sface.detector)
    if len(p5) != len(paths):
        raise RuntimeError("verify: a held-out photo has no face")
    chips = {"arcface68": [align(load_rgb(f), arcface_points(b)) for f, b in zip(paths, p68)]}
    for name, (pts, ref) in variants.items():
        chips[name] = [align(load_rgb(f), pts(a), ref) for f, a in zip(paths, p5)]
    i, j, genuine = metrics.all_pairs(np.asarray(ids))
    out = {}
    for name, c in chips.items():
        x = sface.embed_chips(np.stack(c))
        d = np.linalg.norm(x[i] - x[j], axis=1)
        eer, _ = metrics.eer(d, genuine)
        far_t = np.quantile(d[~genuine], 1e-3)
        out[name] = {"eer": round(float(eer), 5), "tar_at_far_1e-3": round(float((d[genuine] <= far_t).mean()), 4)}
    return {"images": len(paths), "genuine_pairs": int(genuine.sum()), "impostor_pairs": int((~genuine).sum()),
            "by_alignment": out}


def compute(root=None, n: int = 600, seed: int = 0, check: bool = False) -> dict:
    p5, p68 = landmarks(held_out_images(root, n, seed), Detector())
    half = len(p5) // 2
    on_template = np.array([apply(umeyama(arcface_points(b), ARCFACE_REF), a) for a, b in zip(p5, p68)])
    ref5 = on_template[:half].mean(0)
    # Candidate alignments: (points from the 5 landmarks, their template positions).
    ref3 = np.vstack([ref5[2:4].mean(0), ref5[0:2].mean(0), ref5[4]])
    naive3 = np.vstack([ARCFACE_REF[0], ARCFACE_REF[1], ARCFACE_REF[2]])
    variants = {
        "all5_calibrated": (lambda a: a, ref5),
        "eyes_nose_calibrated": (lambda a: dlib5_points(a), ref3),
        "eyes_nose_uncalibrated": (lambda a: dlib5_points(a), naive3),
    }
    scores = {}
    for name, (pts, ref) in variants.items():
        err = [apply(umeyama(pts(a), ref), arcface_points(b)) - ARCFACE_REF for a, b in zip(p5[half:], p68[half:])]
        scores[name] = round(float(np.sqrt(np.mean(np.square(err)))), 4)
    return {"ref5": np.round(ref5, 4).tolist(), "ref3": np.round(ref3, 4).tolist(), "rms_chip_px": scores,
            **({"verification": verify(root, variants)} if check else {}),
            "images": len(p5), "fit": half, "scored": len(p5) - half, "seed": seed,
            "source": "LFW people absent from pairs.txt, first image each",
            "command": f"python -m privface.eval.landmarks5_template --n {n} --seed {seed}"
                       + (" --verify" if check else "")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-root")
    ap.add_argument("--verify", action="store_true", help="also SFace's verification per alignment (held-out people)")
    a = ap.parse_args(argv)
    print(json.dumps(compute(a.data_root, a.n, a.seed, a.verify)))


if __name__ == "__main__":
    main()
