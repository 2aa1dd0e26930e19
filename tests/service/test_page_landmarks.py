"""Issue 36: /app/params.json names the alignment of the server's face backend (``landmarks``) next to ``backend``,
the same setting the Python backend of that name uses, so the page (which aligns on dlib's CC0 5-point model only)
and the server never disagree; dlib's 68-point model (iBUG 300-W, not for commercial use) is not served. Over real
loopback HTTP: an in-thread app and `privface serve` child processes."""
import httpx
import pytest

from privface.errors import ModelError
from privface.faces import browser
from privface.faces.registry import make_backend
from privface.protocols.im2020 import Im2020Params
from privface.service.app import create_app
from privface.service.bindings.im2020 import Im2020Service
from privface.service.launch import serve_in_thread, serve_subprocess
from privface.store import open_store

DLIB, SFACE = "dlib-resnet128", "sface"


def _params_json(backend: str, landmarks: int | None = None) -> dict:
    store = open_store("sqlite://")
    app = create_app(store, [Im2020Service(store, params=Im2020Params.toy(backend=backend))],
                     face_landmarks=landmarks)
    with serve_in_thread(app) as url:
        return httpx.get(f"{url}/app/params.json").json()


def test_dlib_params_name_its_five_landmarks():
    assert make_backend(DLIB).landmarks == 5  # type: ignore[attr-defined]
    assert _params_json(DLIB)["landmarks"] == browser.backend_landmarks(DLIB) == 5


def test_sface_params_name_the_landmarks_the_python_backend_aligns_on():
    """Without --landmarks, what `make_backend("sface")` aligns on — whatever sface's default is."""
    try:
        python = make_backend(SFACE)
    except ModelError:
        pytest.skip("the SFace weights are not installed (make install)")
    answer = _params_json(SFACE)
    assert answer["backend"] == SFACE
    assert answer["landmarks"] == python.landmarks == browser.backend_landmarks(SFACE)  # type: ignore[attr-defined]


@pytest.mark.parametrize("landmarks", [5, 68])
def test_sface_params_name_the_servers_landmarks(landmarks):
    """--landmarks where sface takes the option; where it aligns on one model only, another count is refused."""
    try:
        browser.landmarks_option(SFACE, landmarks)
    except ValueError as e:
        assert landmarks != browser.backend_landmarks(SFACE) and "landmarks only" in str(e)
        with pytest.raises(ValueError):
            _params_json(SFACE, landmarks)
        return
    assert _params_json(SFACE, landmarks)["landmarks"] == landmarks


def test_served_sface_page_files_and_params(tmp_path):
    """`privface serve --backend sface`: params.json says 5 (the id names the alignment); /app/models/ lists
    sface.onnx (when installed) and landmarks5.dat, never landmarks68.dat, and answers 404 for it."""
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 's.db'}", ["--backend", SFACE],
                          start_timeout=120) as url:
        params = httpx.get(f"{url}/app/params.json", timeout=60).json()
        listed = httpx.get(f"{url}/app/models/index.json", timeout=300).json()
        missing = httpx.get(f"{url}/app/models/landmarks68.dat", timeout=60)
    assert (params["backend"], params["landmarks"]) == (SFACE, 5)
    assert "landmarks5.dat" in listed and "landmarks68.dat" not in listed
    assert missing.status_code == 404


def test_serve_has_no_landmarks_option(tmp_path, capsys):
    """`serve --landmarks` is gone (issue 39's clean-up): the backend id names its alignment (sface = 5 points,
    sface-lm68 = 68); an old script passing it stops at argparse, before anything is served."""
    from privface.cli import main

    for backend in (DLIB, SFACE):
        with pytest.raises(SystemExit) as stop:
            main(["serve", "--protocol", "im2020", "--db", f"sqlite:///{tmp_path / 'd.db'}", "--no-auth",
                  "--backend", backend, "--landmarks", "5"])
        assert stop.value.code == 2
        assert "unrecognized arguments: --landmarks 5" in capsys.readouterr().err
