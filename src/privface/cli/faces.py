"""Plaintext face commands and the catalogue: embed, compare, protocols, train-pca, demo."""
from __future__ import annotations

import json

from ..errors import PrivfaceError
from .common import (
    backend_args,
    backend_spec,
    face_args,
    one_face,
    per_backend,
    print_result,
)


def cmd_embed(a) -> int:
    from ..faces.registry import make_backend

    backend = make_backend(**backend_spec(a))
    faces = backend.faces(a.image, "all") if a.all else [one_face(a, a.image, backend)[0]]
    if not faces:
        raise PrivfaceError(f"no face found in {a.image}")
    rows = [{"face": f.index, "of": f.found, "box": list(f.box), "detector": f.detector,
             "landmarks": f.landmarks.round(1).tolist(),
             "embedding": [round(float(x), 6) for x in f.embedding]} for f in faces]
    out = {"image": a.image, "backend": backend.name, "dim": len(faces[0].embedding), "faces": rows}
    if a.json:
        print(json.dumps(out))
    else:
        for face, f in zip(faces, rows):
            e = f["embedding"]
            print(f"face {face.index}: {face.describe()} box={f['box']} detector={f['detector']} "
                  f"embedding[{len(e)}]=[{', '.join(f'{x:.4f}' for x in e[:4])}, …]")
    return 0


def cmd_compare(a) -> int:
    import time

    from ..faces.registry import make_backend

    backend = make_backend(**backend_spec(a))
    t0 = time.perf_counter()
    (fa, _), (fb, _) = one_face(a, a.image_a, backend), one_face(a, a.image_b, backend)
    dist = float(backend.distance(fa.embedding, fb.embedding))
    thr = a.threshold if a.threshold is not None else backend.threshold
    out = {"backend": backend.name, "distance": round(dist, 6), "threshold": thr,
           "match": dist <= thr, "face_a": fa.describe(), "face_b": fb.describe(),
           "seconds": round(time.perf_counter() - t0, 3)}
    print_result(out, a.json)
    return 0


def cmd_protocols(a) -> int:
    from ..protocols import catalogue

    rows = catalogue()
    if a.json:
        print(json.dumps(rows))
        return 0
    for d in rows:
        print(f"{d['name']}: {d['paper']}")
        for who, what in d["threat_model"].items():
            print(f"  threat   {who}: {what}")
        for mode, m in d["modes"].items():
            leak = "; ".join(f"{who} learns {', '.join(x)}" for who, x in m["leakage"].items())
            print(f"  mode     {mode} [{m['status']}]: {leak}")
        for lvl in d["security_levels"]:
            print("  level    " + ", ".join(f"{k}={v}" for k, v in lvl.items()))
        for k, v in d["parameters"].items():
            print(f"  param    {k}: {v}")
    return 0


def cmd_train_pca(a) -> int:
    from ..eval.datasets import load
    from ..faces.pca import PCABackend

    ds = load(a.dataset, a.data_root)
    backend = PCABackend.train(ds.paths, labels=ds.ids, k=a.k)
    backend.save(a.out)
    print_result({"model": a.out, "k": a.k, "images": len(ds.paths)}, a.json)
    return 0


def cmd_demo(a) -> int:
    from ..demo import run_demo

    return run_demo(as_json=a.json)


def register(sub) -> None:
    """embed, compare."""
    s = sub.add_parser("embed", help="detect, align and embed the faces in an image")
    s.add_argument("image")
    s.add_argument("--all", action="store_true", help="every face, not only the largest")
    backend_args(s)
    face_args(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_embed)

    s = sub.add_parser("compare", help="plaintext baseline: distance, threshold and decision for two images")
    s.add_argument("image_a")
    s.add_argument("image_b")
    s.add_argument("--threshold", type=float,
                   help="decision threshold on distance (default: the backend's; "
                        f"{per_backend(lambda p: f'{p.distance:g}')}, "
                        "the default every protocol derives its own from — im2020 τ, kolberg, gsm T′ — chosen for "
                        f"a false-accept rate of 1e-3 on held-out LFW; dlib's published 0.6 accepts 1e-2)")
    backend_args(s)
    face_args(s, "each photo")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_compare)


def register_tools(sub) -> None:
    """protocols, train-pca."""
    s = sub.add_parser("protocols", help="the protocol catalogue: threat model, leakage, security levels, parameters")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_protocols)

    s = sub.add_parser("train-pca", help="fit an eigenfaces (PCA) model on a dataset")
    s.add_argument("--dataset", required=True)
    s.add_argument("--data-root")
    s.add_argument("-k", type=int, default=32, help="components (seed 000 uses 16–48)")
    s.add_argument("--out", required=True, help="model file to write")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_train_pca)


def register_demo(sub) -> None:
    """demo."""
    s = sub.add_parser("demo", help="enrol and verify on an embedded photo; no download, no dataset")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_demo)
