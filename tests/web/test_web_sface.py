"""The page on an sface server (issue 36): its face worker (web/src/app/faceWorker.ts, the real page's pipeline) embeds
ORL photos with SFace — dlib's 5 landmarks (CC0), the eye centres and nose base onto their ArcFace-template positions,
SFace in onnxruntime-web — within 0.02 (L2) of Python's `sface` backend with ``landmarks=5``; a server whose templates
are aligned on 68 landmarks gets a refusal, not other templates; a server on dlib-resnet128 still gets dlib's
templates. Headless Chromium against `privface serve` on loopback."""
from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from PIL import Image

from privface.eval import datasets
from privface.faces.browser import landmarks_option
from privface.faces.registry import make_backend
from privface.service.launch import serve_subprocess

from .browser import fixture_bundle, run

pytestmark = pytest.mark.browser
MAX_L2 = 0.02  # bench web --parity's goal (issue 36)
OFFSET = 300
SFACE_AT = ("--backend", "sface")  # the backend id names its alignment: sface = 5 points


def large(photo, k: int, side: int, out):
    """`photo` enlarged k× by pixel replication, on a black side×side image at (OFFSET, OFFSET) when side > 0 — what
    the page's test code draws on its canvas."""
    im = Image.open(photo).convert("RGB")
    im = im.resize((im.width * k, im.height * k), Image.Resampling.NEAREST)
    if side:
        canvas = Image.new("RGB", (side, side))
        canvas.paste(im, (OFFSET, OFFSET))
        im = canvas
    im.save(out)
    return out

# The page's own face worker, driven as face.ts drives it: init (the models of the server's backend), open, embed.
WORKER = """(async () => {
  const w = new Worker(new URL("face-worker.js", location.href), { type: "module" });
  let id = 0;
  const call = (m) => new Promise((resolve, reject) => {
    const me = id++;
    const h = (e) => {
      if (e.data.id !== me || e.data.stage) return;
      w.removeEventListener("message", h);
      if (e.data.error) reject(new Error(e.data.error.message)); else resolve(e.data.result);
    };
    w.addEventListener("message", h);
    w.postMessage({ ...m, id: me });
  });
  const backend = await call({ op: "init", base: location.href, threads: 1 });
  const out = [];
  for (const [b64, k, side] of IMAGES) {
    let blob = new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))]);
    if (k > 1 || side > 0) { // enlarged k× by pixel replication, on a black side×side canvas at (OFFSET, OFFSET)
      const bmp = await createImageBitmap(blob);
      const canvas = side > 0 ? new OffscreenCanvas(side, side) : new OffscreenCanvas(bmp.width * k, bmp.height * k);
      const ctx = canvas.getContext("2d");
      ctx.fillStyle = "#000";
      ctx.fillRect(0, 0, canvas.width, canvas.height);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(bmp, side > 0 ? OFFSET : 0, side > 0 ? OFFSET : 0, bmp.width * k, bmp.height * k);
      blob = await canvas.convertToBlob({ type: "image/png" });
    }
    await call({ op: "open", source: blob });
    out.push(Array.from((await call({ op: "embed", face: 0 })).descriptor));
  }
  w.terminate();
  return { backend, descriptors: out };
})()"""


@pytest.fixture(scope="module")
def photos(tmp_path_factory, data_root):
    """Three ORL photos (two subjects) as PNG, which the browser decodes (it has no PGM decoder)."""
    ds = datasets.load("orl", data_root)
    out = tmp_path_factory.mktemp("orl")
    paths = []
    for src in (ds.paths[0], ds.paths[1], ds.paths[10]):
        p = out / f"{src.parent.name}_{src.stem}.png"
        Image.open(src).convert("RGB").save(p)
        paths.append(p)
    return paths


def _spec(backend: str, landmarks: int | None) -> dict:
    """The Python backend aligned on `landmarks`: an option of `backend`, or (where sface aligns on one model only)
    the backend id of SFace on the 68-point model."""
    try:
        return {"name": backend, **landmarks_option(backend, landmarks)}
    except ValueError:
        return {"name": "sface-lm68"}


def _page(url: str, photos, enlarge: tuple[tuple[int, int], ...] = ()) -> dict:
    """The page worker's descriptors of `photos`, each made larger in the browser first (see `large`): (k, side)."""
    if fixture_bundle():
        pytest.skip("the browser face pipeline is not built into the page")
    enlarge = enlarge or ((1, 0),) * len(photos)
    images = json.dumps([[base64.b64encode(p.read_bytes()).decode(), k, side] for p, (k, side) in zip(photos, enlarge)])
    steps = [{"do": "goto"}, {"do": "eval",
                                "js": f"(() => {{ const IMAGES = {images}, OFFSET = {OFFSET}; return {WORKER}; }})()"}]
    return run(url, steps, timeout=900)[1]["value"]


def _python(backend: str, photos, landmarks: int | None = None) -> np.ndarray:
    model = make_backend(**_spec(backend, landmarks))
    return np.stack([model.embed(str(p)) for p in photos]).astype(np.float64)


def test_page_on_an_sface_server_runs_sface(photos, tmp_path):
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 's.db'}", list(SFACE_AT)) as url:
        import httpx

        listed = httpx.get(f"{url}/app/models/index.json", timeout=120).json()
        assert {"sface.onnx", "landmarks5.dat"} <= set(listed) and "landmarks68.dat" not in listed
        params = httpx.get(f"{url}/app/params.json", timeout=60).json()
        assert (params["backend"], params["landmarks"]) == ("sface", 5)
        # and two photos larger than the page's 1280-px working image, aligned on the photo as given as Python does:
        # a face over twice the chip (Pillow's BOX shrink of the whole photo) and one under (a crop of the bitmap)
        sizes = ((1, 0),) * len(photos) + ((16, 0), (2, 2000))
        out = _page(url, [*photos, photos[0], photos[0]], sizes)
    assert out["backend"] == "sface"
    shown = [*photos, large(photos[0], 16, 0, tmp_path / "x16.png"), large(photos[0], 2, 2000, tmp_path / "pad.png")]
    browser, python = np.asarray(out["descriptors"], np.float64), _python("sface", shown, landmarks=5)
    assert browser.shape == (5, 128)
    assert np.linalg.norm(browser - python, axis=1).max() <= MAX_L2
    # and not the 68-point alignment's template (the same photos through Python's other sface alignment differ)
    assert np.linalg.norm(browser[:3] - _python("sface", photos, landmarks=68), axis=1).min() > MAX_L2
    # and not dlib's template: SFace and dlib's ResNet give unrelated vectors
    assert np.linalg.norm(browser[:3] - _python("dlib-resnet128", photos), axis=1).min() > 0.5


def test_page_refuses_a_server_aligned_on_68_landmarks(tmp_path):
    """The page aligns on dlib's 5-point model only: on a server whose params.json says its sface templates are
    68-point ones (a server of another version; this one's sface may have no such setting) its face worker refuses
    to load, naming both, rather than make templates the server would misjudge. A real server on loopback whose
    params.json route answers 68."""
    from fastapi.responses import JSONResponse
    from starlette.routing import Route

    from privface.protocols.im2020 import Im2020Params
    from privface.service.app import create_app
    from privface.service.bindings.im2020 import Im2020Service
    from privface.service.launch import serve_in_thread
    from privface.service.web import HEADERS, params_json
    from privface.store import open_store

    if fixture_bundle():
        pytest.skip("the browser face pipeline is not built into the page")
    params = Im2020Params.toy(backend="sface")

    async def said_68(request):
        return JSONResponse({**params_json(params), "landmarks": 68}, headers=HEADERS)

    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        app = create_app(store, [Im2020Service(store, params=params)])
        app.router.routes.insert(0, Route("/app/params.json", said_68))
        with serve_in_thread(app) as url:
            js = f"""(async () => {{ const IMAGES = [], OFFSET = {OFFSET};
              try {{ await {WORKER}; return "loaded"; }} catch (e) {{ return String(e.message); }} }})()"""
            message = run(url, [{"do": "goto"}, {"do": "eval", "js": js}], timeout=600)[1]["value"]
    assert "aligned on 68 landmarks" in message and "5-point" in message


def test_page_on_a_dlib_server_runs_dlib(photos, tmp_path):
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 'd.db'}", ["--backend", "dlib-resnet128"]) as url:
        out = _page(url, photos)
    assert out["backend"] == "dlib-resnet128"
    browser, python = np.asarray(out["descriptors"], np.float64), _python("dlib-resnet128", photos)
    assert np.linalg.norm(browser - python, axis=1).max() <= MAX_L2


def test_sface_pipeline_matches_python_through_the_parity_harness(photos, tmp_path):
    """bench web --parity's harness with the backend named (whatever the server's own)."""
    from privface.bench.web import bench_parity

    out = bench_parity("orl", images=11, backend="sface", landmarks=5)  # two subjects: impostor pairs for the EER
    assert (out["backend"], out["landmarks"]) == ("sface", 5) and out["undetected_browser"] == 0
    assert out["max_l2"] <= MAX_L2 and out["decisions_equal_frac"] == 1.0
