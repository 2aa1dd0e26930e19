"""/app/ of the im2020 service (service/web.py) over loopback HTTP: strict CSP on every answer, the server's
parameters, no file outside the built page, nothing when im2020 is not served."""
from __future__ import annotations

import contextlib
import http.client

import httpx
import pytest

from privface.protocols.im2020 import Im2020Params
from privface.service import web
from privface.service.app import create_app
from privface.service.bindings.im2020 import Im2020Service
from privface.service.launch import serve_in_thread
from privface.store import open_store


@pytest.fixture
def serve():
    """serve(app) → an httpx client on the app running in uvicorn on a free port (both closed after the test)."""
    with contextlib.ExitStack() as stack:
        def run(app) -> httpx.Client:
            url = stack.enter_context(serve_in_thread(app))
            return stack.enter_context(httpx.Client(base_url=url))
        yield run


def _client(tmp_path, monkeypatch, serve, *, built=True, **options) -> httpx.Client:
    (tmp_path / "sub").mkdir()
    if built:
        (tmp_path / "index.html").write_text("<!doctype html><title>t</title>")
        (tmp_path / "app.js").write_text("export {};")
        (tmp_path / "sub" / "x.css").write_text("body{}")
    (tmp_path.parent / "secret.js").write_text("no")
    monkeypatch.setattr(web, "WEBAPP", tmp_path)
    store = open_store("sqlite://")
    return serve(create_app(store, [Im2020Service(store, **options)]))


def test_page_assets_and_headers(tmp_path, monkeypatch, serve):
    c = _client(tmp_path, monkeypatch, serve)
    r = c.get("/app/")
    assert r.status_code == 200 and r.headers["content-security-policy"] == web.CSP
    assert "'unsafe-inline'" not in web.CSP and "default-src 'none'" in web.CSP
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["content-type"].startswith("text/html")
    assert c.get("/app/app.js").headers["content-type"].startswith("text/javascript")
    assert c.get("/app/sub/x.css").status_code == 200
    assert c.get("/app", follow_redirects=False).status_code == 308
    for bad in ("/app/%2e%2e/secret.js", "/app/nope.js", "/app/sub"):
        assert c.get(bad).status_code == 404, bad
    raw = http.client.HTTPConnection(c.base_url.host, c.base_url.port)  # httpx would normalise the dot segments
    raw.request("GET", "/app/../secret.js")
    assert raw.getresponse().status == 404
    raw.close()


def test_params_are_the_servers(tmp_path, monkeypatch, serve):
    c = _client(tmp_path, monkeypatch, serve, params=Im2020Params.toy(tau=1234))
    p = c.get("/app/params.json").json()
    assert p["tau"] == 1234 and p["insecure_test_params"] is True and p["jl"]["bits"] == Im2020Params.toy().jl.bits
    p = _client(tmp_path / "sub", monkeypatch, serve).get("/app/params.json").json()
    assert (p["security_bits"], p["jl"], p["scale"], p["dims"]) == (112, {"bits": 2048, "k": 136, "p_bits": 768},
                                                                    128, 128)


def test_unbuilt_page_says_so(tmp_path, monkeypatch, serve):
    r = _client(tmp_path, monkeypatch, serve, built=False).get("/app/")
    assert r.status_code == 503 and "make install" in r.text


def test_no_page_without_im2020(tmp_path, monkeypatch, serve):
    monkeypatch.setattr(web, "WEBAPP", tmp_path)
    assert serve(create_app(open_store("sqlite://"), [])).get("/app/").status_code == 404
