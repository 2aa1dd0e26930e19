"""The declared public API (``privface.__all__``): every name is there, ``import privface`` stays light, the face
functions decide as the default backend does on the embedded demo photos, and ``Im2020Client`` runs the protocol
over real loopback HTTP."""
from __future__ import annotations

import ast
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import privface
from privface import demo_data

FACES = ["load_image", "detect", "embed", "distance", "compare"]
CLIENTS = ["Im2020Client", "DeviceClient", "KolbergClient", "IdentClient", "VerifierClient"]
GALLERY = ["enrol", "identify"]
ERRORS = ["PrivfaceError", "ImageError", "FaceError", "NoFaceError", "AmbiguousFaceError"]


def test_all_lists_exactly_the_declared_names_and_each_exists():
    assert sorted(privface.__all__) == sorted(FACES + CLIENTS + GALLERY + ERRORS)
    for name in privface.__all__:
        assert getattr(privface, name) is not None, name
        assert name in privface.__doc__, f"{name} missing from the module docstring"
    for name in CLIENTS:
        assert inspect.isclass(getattr(privface, name)), name
    assert "private" in privface.__doc__ and "underscore" in privface.__doc__
    with pytest.raises(AttributeError):
        privface.NoSuchName  # noqa: B018


def test_help_shows_the_declared_api():
    out = subprocess.run([sys.executable, "-c", "import privface; help(privface)"], capture_output=True, text=True,
                         check=True, env={**os.environ, "PAGER": "cat"}).stdout
    for name in privface.__all__:
        assert name in out, name


def test_import_privface_loads_no_face_model_and_no_he_library():
    code = ("import sys, privface; heavy = [m for m in ('tenseal', 'dlib', 'onnxruntime', 'gmpy2', 'numpy', "
            "'privface.faces', 'privface.protocols', 'privface.scale', 'privface.service') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


@pytest.fixture(scope="module")
def photos():
    return demo_data.enrolled_photo(), demo_data.impostor_photos()["astronaut (Eileen Collins)"]


@pytest.fixture(scope="module")
def sface():
    from privface.faces.registry import make_backend

    return make_backend("sface")


def test_load_detect_embed_match_the_backend(sface, backend, photos):
    """The default backend is sface (issue 36); ``backend="dlib-resnet128"`` selects dlib."""
    grace, _ = photos
    image = privface.load_image(grace)
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    boxes = privface.detect(image)
    assert boxes == [f.box for f in sface.faces(grace, "all")] and len(boxes) == 1
    np.testing.assert_array_equal(privface.embed(grace), sface.embed(grace))
    every = privface.embed(image, which="all")
    assert every.shape == (1, sface.dim)
    np.testing.assert_array_equal(every[0], sface.embed(grace))
    np.testing.assert_array_equal(privface.embed(grace, backend="dlib-resnet128"), backend.embed(grace))
    assert privface.detect(image, backend="dlib-resnet128") == boxes  # one detector for both


def test_compare_defaults_to_sfaces_threshold(sface, photos):
    grace, astronaut = photos
    copy = next(iter(demo_data.altered_copies(grace).values()))
    a, b, c = privface.embed(grace), privface.embed(copy), privface.embed(astronaut)
    assert privface.compare(a, b) is True and privface.compare(a, c) is False
    d = privface.distance(a, c)
    assert privface.compare(a, c) is bool(d <= 1.12) and sface.threshold == 1.12


def test_embed_without_a_face():
    blank = np.full((64, 64, 3), 127, np.uint8)
    assert privface.detect(blank) == []
    assert privface.embed(blank, which="all").shape[0] == 0
    with pytest.raises(privface.NoFaceError):
        privface.embed(blank)
    with pytest.raises(privface.ImageError):
        privface.load_image(b"not an image")


def test_compare_and_distance_decide_as_the_backend(backend, demo_faces):
    """Every pair of demo embeddings (dlib's: references and altered copies of three people): same distance and
    same decision as the backend's ``distance ≤ threshold``; genuine pairs match, impostor pairs do not."""
    dlib = "dlib-resnet128"
    people = [(name, e) for name, (ref, copies) in demo_faces.items() for e in [ref, *copies]]
    for a_name, a in people:
        for b_name, b in people:
            d = backend.distance(a, b)
            assert privface.distance(a, b) == pytest.approx(float(d), abs=0)
            assert privface.compare(a, b, backend=dlib) is bool(d <= backend.threshold)
            assert privface.compare(a, b, backend=dlib) is (a_name == b_name)
            assert privface.compare(a, b, tolerance=float(d)) is True
    known = [e for _, e in people]
    probe = demo_faces["grace"][1][0]
    np.testing.assert_array_equal(privface.distance(known, probe), backend.distance(np.asarray(known), probe))
    assert privface.compare(known, probe, backend=dlib) == [bool(d <= backend.threshold)
                                              for d in backend.distance(np.asarray(known), probe)]


def test_im2020_client_enrols_verifies_and_revokes_over_http(tmp_path, photos):
    from privface.protocols.im2020 import Im2020Params
    from privface.service.app import create_app
    from privface.service.bindings.im2020 import Im2020Service
    from privface.service.launch import serve_in_thread
    from privface.store import open_store

    toy = Im2020Params.toy()
    grace, astronaut = photos
    genuine = privface.embed(next(iter(demo_data.altered_copies(grace).values())))
    key = tmp_path / "keys" / "grace.key"
    with open_store(f"sqlite:///{tmp_path / 'im2020.db'}") as store, \
            serve_in_thread(create_app(store, [Im2020Service(store, params=toy)])) as url:
        with privface.Im2020Client(url, "grace", toy, workers=1) as client:
            assert client.enrol(privface.embed(grace), key_file=key).replaced is False
            assert client.report["key_file"] == str(key) and client.report["bytes_sent"] > 0
            assert (key.stat().st_mode & 0o777) == 0o600
            assert client.verify(genuine) is True and client.report["decision"] == "accept"
            assert client.verify(privface.embed(astronaut)) is False
        with privface.Im2020Client.from_key_file(key, workers=1) as again:
            assert again.server == url and again.subject_id == "grace"
            assert again.verify(genuine) is True
            assert again.revoke().revoked is True
            assert again.report["key_file_removed"] == str(key)
        assert store.get("im2020", "grace") is None and not key.exists()  # the key opens nothing any more


# The library guide's example (it was the README's "Library" section before the README's content moved to docs/;
# the README's own two examples are run by tests/docs/test_readme.py).
README = Path(__file__).resolve().parents[1] / "docs" / "library.md"


def _library_example() -> str:
    text = README.read_text()
    section = text[text.index("\n## The public API\n"):]
    section = section[:section.index("\n## ", 1)]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_library_example_uses_only_the_api():
    code = _library_example()
    tree = ast.parse(code)
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in imports] == ["import privface"]
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "privface"}
    assert used and used <= set(privface.__all__)


def test_readme_library_example_runs(tmp_path, monkeypatch):
    """The block as written, in a folder holding me.jpg (the enrolled demo photo), me2.jpg (an altered copy) and
    group.jpg (an impostor beside the enrolled face), against a loopback im2020 server at default parameters."""
    from PIL import Image

    from privface.service.app import create_app
    from privface.service.bindings.im2020 import Im2020Service
    from privface.service.launch import serve_in_thread
    from privface.store import open_store

    grace = demo_data.enrolled_photo()
    monkeypatch.chdir(tmp_path)
    shutil.copy(grace, "me.jpg")
    Image.fromarray(next(iter(demo_data.altered_copies(grace).values()))).save("me2.jpg")
    other = Image.open(demo_data.impostor_photos()["astronaut (Eileen Collins)"]).convert("RGB")
    group = Image.new("RGB", (other.width * 2, other.height))
    group.paste(other, (0, 0))
    group.paste(Image.open(grace).convert("RGB").resize(other.size), (other.width, 0))
    group.save("group.jpg")
    code = _library_example()
    assert "    client.verify(" in code
    with open_store(f"sqlite:///{tmp_path / 'im2020.db'}") as store, \
            serve_in_thread(create_app(store, [Im2020Service(store)])) as url:
        code = code.replace("http://127.0.0.1:8000", url).replace("    client.verify(", "    assert client.verify(")
        names: dict = {}
        exec(compile(code, str(README), "exec"), names)
        assert store.get("im2020", "me") is None  # revoked at the end
    assert privface.compare(names["others"], names["me"]).count(True) == 1
    assert not (tmp_path / "me.key").exists()  # revoke() proved possession of its key, then deleted it


def test_enrol_and_identify_a_gallery_of_photos(tmp_path, photos):
    """privface.enrol on a folder of face photos (hers, toy CKKS), then privface.identify: the enrolled person's
    altered copy is found, an unenrolled face is not."""
    from PIL import Image

    grace, astronaut = photos
    faces = tmp_path / "faces"
    faces.mkdir()
    Image.open(grace).convert("RGB").save(faces / "hopper.png")
    Image.open(astronaut).convert("RGB").save(faces / "collins.png")
    url = f"sqlite:///{tmp_path}/g.db"
    # τ = 0.95 cosine for dlib-resnet128 (as tests/scale/test_gallery.py: genuine ≥ 0.993, impostors ≤ 0.883)
    report = privface.enrol(url, faces, "hers", tau=0.95, insecure_test_params=True)
    assert report.n == 2
    probe = privface.embed(demo_data.altered_copies(grace)["mirrored, darker"])
    assert privface.identify(probe, url)["id"] == "hopper"
    assert privface.identify(privface.embed(demo_data.impostor_photos()["cameraman"]), url)["id"] is None


def test_enrol_takes_the_cli_defaults_for_idface(tmp_path, photos):
    """Issue 37 item 4: ``privface.enrol(url, photos, "idface-ckks")`` with nothing else chooses what `privface
    gallery enrol` chooses (centred with the shipped mean, lifted to D = 2048 at d = 128, the calibrated τ for that
    setting) — it used to fail, finding no default τ for the uncentred, unlifted setting. Toy CKKS."""
    from PIL import Image

    grace, astronaut = photos
    faces = tmp_path / "faces"
    faces.mkdir()
    Image.open(grace).convert("RGB").save(faces / "hopper.png")
    Image.open(astronaut).convert("RGB").save(faces / "collins.png")
    url = f"sqlite:///{tmp_path}/g.db"
    report = privface.enrol(url, faces, "idface-ckks", insecure_test_params=True)
    assert (report.n, report.centring, report.lift) == (2, "shipped", 2048)
    probe = privface.embed(demo_data.altered_copies(grace)["mirrored, darker"])
    assert privface.identify(probe, url)["id"] == "hopper"
