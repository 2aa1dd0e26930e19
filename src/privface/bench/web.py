"""`privface bench web`: the im2020 device party in headless Chromium (issue 19) — N authentications through
the page at /app/ of a `privface serve --protocol im2020` child process on loopback (SQLite store), and
`--parity`: the browser face pipeline against the Python one on a dataset.

Per authentication the page reports (seed 000 Table I's columns) face (C1), encrypt (C2), server (Server-Timing
compute), decrypt (C3) and network (HTTP wall − server) times and the bytes both ways; the bench prints their
medians. total_excl_face_ms is the page's wall time of one verification minus C1. Needs the repository's
web/ built (`make install`: the page, the playwright-core runner) and Chromium (scripts/install-chromium).
While the browser face pipeline is not built into the page, the runs use the page's labelled test-fixture
bundle (descriptors from the Python pipeline) and face_ms is null (`face_pipeline: "test-fixture"`).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from ..errors import PrivfaceError

REPO = Path(__file__).resolve().parents[3]
WEB = REPO / "web"
RUNNER = WEB / "dist-test" / "browser.mjs"
FIXTURE = WEB / "dist-test" / "app-fixture.js"
CHROMIUM = os.environ.get("PRIVFACE_CHROMIUM", "/usr/bin/chromium")


def _check() -> None:
    if not Path(CHROMIUM).is_file():
        raise PrivfaceError(f"no Chromium at {CHROMIUM}: run scripts/install-chromium (or set PRIVFACE_CHROMIUM)")
    if shutil.which("node") is None or not RUNNER.is_file():
        raise PrivfaceError("bench web needs Node.js and the built web/ of a source checkout: run make install")


def browser_pipeline() -> bool:
    return (WEB / "src" / "face" / "index.ts").is_file() and (REPO / "src/privface/service/webapp/app.js").is_file()


def run_page(url: str, steps: list[dict], *, fixture: bool, timeout: float = 1800, **job) -> list[dict]:
    """Run the steps in one headless page (web/test/browser.ts); the per-step results."""
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        job = {"url": url, "chromium": CHROMIUM, "fixture": str(FIXTURE) if fixture else None, "steps": steps,
               "out": str(result), **job}
        proc = subprocess.run(["node", str(RUNNER), json.dumps(job)], capture_output=True, text=True,
                              timeout=timeout, cwd=WEB)
        lines = proc.stdout.strip().splitlines()
        out = json.loads(result.read_text()) if result.is_file() else (
            json.loads(lines[-1]) if lines else {"error": proc.stderr[-2000:]})
    if "error" in out:
        raise PrivfaceError(f"browser run failed: {out['error'][:2000]}")
    return out["results"]


def _median(rows: list[dict], key: str) -> float | None:
    vals = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return round(statistics.median(vals), 3) if vals else None


def bench_web(runs: int = 10, enrolments: int = 3, security_bits: int = 112, *, arith: str = "bigint",
              workers: int | None = None, face_threads: int | None = None, backend: str | None = None,
              landmarks: int | None = None) -> dict:
    """Medians over `runs` verifications (genuine probe) and `enrolments` enrolments (key generation and
    registration) in one headless Chromium page. `arith`: the page's big-integer arithmetic (native bigint,
    its default, or gmp-wasm); `workers`: its Web Workers for C3 (default one per core, 0 = none);
    `face_threads`: onnxruntime-web's threads for C1 (the page's default: 1); `backend`: the server's
    ``--backend``, whose model the page runs (default: the server's default); `landmarks`: the server's
    ``--landmarks`` (sface's alignment; default: the backend's)."""
    _check()
    from .. import demo_data
    from ..service.launch import serve_subprocess

    fixture = not browser_pipeline()
    photo = demo_data.enrolled_photo()
    with tempfile.TemporaryDirectory() as tmp, serve_subprocess(
            "im2020", f"sqlite:///{Path(tmp) / 'bench.db'}",
            ["--security-bits", str(security_bits), *_backend(backend, landmarks)]) as url:
        from PIL import Image, ImageOps

        backend, landmarks = served_backend(url), served_landmarks(url)
        probe = Path(tmp) / "probe.png"
        ImageOps.mirror(Image.open(photo).convert("RGB")).save(probe)
        queue = {}
        if fixture:
            from ..faces.registry import make_backend

            model = make_backend(**backend_spec(backend, landmarks))
            queue = {p: [float(x) for x in model.embed(str(p))] for p in (photo, probe)}

        def face(p):
            return [{"do": "fixture", "descriptor": queue[p]}] if fixture else []

        steps: list[dict] = [{"do": "goto"}]
        for i in range(enrolments):
            steps += [{"do": "subject", "id": f"bench{i}"}, {"do": "photo", "path": str(photo)}, *face(photo),
                      {"do": "click", "id": "enrol"}]
        steps += [{"do": "subject", "id": "bench0"}, {"do": "photo", "path": str(probe)}]
        for _ in range(runs):
            steps += [*face(probe), {"do": "click", "id": "verify"}]
        query = "?" + "&".join([*(["arith=gmp-wasm"] if arith == "gmp-wasm" else []),
                                *([f"workers={workers}"] if workers is not None else []),
                                *([f"face_threads={face_threads}"] if face_threads is not None else [])])
        results = run_page(url, steps, fixture=fixture, query=query)
    clicks = [r for r in results if r.get("step") == "click"]
    bad = [r for r in clicks if r.get("state") == "error"]
    if bad:
        raise PrivfaceError(f"the page reported an error: {bad[0].get('status')}")
    enrol = [c["report"] for c in clicks[:enrolments]]
    auth = [c["report"] for c in clicks[enrolments:]]
    for r in enrol:
        r["register_ms"] = r["encrypt_ms"] + r["http_ms"]
    for r in auth:
        r["auth_bytes"] = r["bytes_sent"] + r["bytes_received"]
        r["total_excl_face_ms"] = r["total_ms"] - r["face_ms"]
    browser = next(r for r in results if r.get("step") == "errors")["browser"]
    return {
        "browser": f"Chromium {browser} (headless)", "backend": backend, "landmarks": landmarks,
        "security_bits": security_bits,
        "runs": len(auth),
        "face_pipeline": "test-fixture" if fixture else "browser", "arithmetic": auth[0].get("backend"),
        "workers": auth[0].get("workers"), "accepted_frac": sum(bool(r["accepted"]) for r in auth) / len(auth),
        "keygen_ms": _median(enrol, "keygen_ms"), "register_ms": _median(enrol, "register_ms"),
        "face_ms": None if fixture else _median(auth, "face_ms"),
        **{k: _median(auth, k) for k in ("encrypt_ms", "server_ms", "decrypt_ms", "network_ms")},
        "total_ms": None if fixture else _median(auth, "total_ms"),
        "total_excl_face_ms": _median(auth, "total_excl_face_ms"), "auth_bytes": _median(auth, "auth_bytes"),
    }


def _backend(backend: str | None, landmarks: int | None = None) -> list[str]:
    if backend and landmarks is not None and backend_spec(backend, landmarks).get("landmarks") is None:
        landmarks = None  # the backend's own alignment: nothing to say
    return [*(["--backend", backend] if backend else []), *(["--landmarks", str(landmarks)] if landmarks else [])]


def backend_spec(backend: str, landmarks: int | None) -> dict:
    """The Python backend that makes the templates a server on `backend` with `landmarks` decides on."""
    from ..faces.browser import landmarks_option

    try:
        return {"name": backend, **landmarks_option(backend, landmarks)}
    except ValueError as e:
        raise PrivfaceError(str(e)) from None


def served_backend(url: str) -> str:
    """The face backend of the server at `url` as its page reads it (/app/params.json `backend`; a server that
    does not say runs dlib-resnet128)."""
    import httpx

    return str(httpx.get(f"{url}/app/params.json", timeout=10).json().get("backend", "dlib-resnet128"))


def served_landmarks(url: str) -> int | None:
    """The alignment of the server's templates as its page reads it (/app/params.json `landmarks`)."""
    import httpx

    n = httpx.get(f"{url}/app/params.json", timeout=10).json().get("landmarks")
    return None if n is None else int(n)


def bench_parity(dataset: str = "orl", *, data_root: str | None = None, images: int | None = None,
                 timeout: float = 3600, backend: str | None = None, landmarks: int | None = None) -> dict:
    """Issue 19 item 6 (issue 36 for sface): every image of ``dataset`` embedded in headless Chromium (the page's
    face pipeline, web/src/face, on the models /app/models/ serves for a ``privface serve --backend backend``) and
    by the Python backend of that name (default: the server's default) aligned as the server's params.json says
    (``landmarks``: the server's ``--landmarks``, default the backend's), compared by
    ``eval.web_parity.parity_summary``: detections, L2 distances, equal ×128 coordinates, equal decisions at
    the backend's im2020 threshold over all pairs, EERs."""
    _check()
    if not browser_pipeline():
        raise PrivfaceError("bench web --parity needs the browser face pipeline (web/src/face) built into the page")
    import numpy as np

    from ..eval import datasets
    from ..eval.embed import embed_paths
    from ..eval.web_parity import parity_summary
    from ..protocols.im2020.params import default_tau
    from ..service.launch import serve_subprocess

    ds = datasets.load(dataset, data_root)
    paths = ds.paths[:images] if images else ds.paths
    ids = np.asarray(ds.ids[:len(paths)])
    with tempfile.TemporaryDirectory() as tmp, serve_subprocess("im2020", f"sqlite:///{Path(tmp) / 'p.db'}",
                                                                _backend(backend, landmarks)) as url:
        backend, landmarks = backend or served_backend(url), served_landmarks(url)
        py = embed_paths(paths, backend_spec(backend, landmarks))
        step = {"do": "parity", "bundle": str(WEB / "dist-test" / "parity.js"), "paths": [str(p) for p in paths],
                "names": [str(i) for i in range(len(paths))], "backend": backend}
        results = run_page(url, [{"do": "goto"}, step], fixture=False, timeout=timeout,
                           timeout_ms=int(timeout * 1000))
    rows = results[1]["parity"]
    keep = py.found  # images the Python backend embedded (ORL: all)
    browser = [np.asarray(r["descriptor"], np.float64) if r["descriptor"] is not None else None
               for r, k in zip(rows, keep) if k]
    out = {"dataset": ds.name, "backend": backend, "landmarks": landmarks,
           **parity_summary(py.vectors[keep], browser, ids[keep], default_tau(backend)),
           "undetected_python": int((~keep).sum())}
    face_ms = [r["face_ms"] for r in rows if r["descriptor"] is not None]
    out["face_ms_median"] = round(statistics.median(face_ms), 3) if face_ms else None
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in out.items()}
