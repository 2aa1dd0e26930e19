"""Issue 35 A5 over loopback HTTP: no answer of the service may be framed (X-Frame-Options: DENY and CSP
frame-ancestors 'none' on every route, errors included), and /docs runs no inline script under its own CSP."""
from __future__ import annotations

import re

import httpx
import pytest

from privface.protocols.im2020 import Im2020Params
from privface.service import web
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.im2020 import Im2020Service
from privface.service.docs import DOCS_CSP
from privface.service.headers import DEFAULT_CSP
from privface.service.launch import serve_in_thread
from privface.store import open_store

OCTETS = {"content-type": "application/octet-stream"}


@pytest.fixture
def url(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("<!doctype html><title>t</title>")
    monkeypatch.setattr(web, "WEBAPP", tmp_path)
    store = open_store("sqlite://")
    app = create_app(store, [Im2020Service(store, params=Im2020Params.toy())], keys=ApiKeys(store))

    @app.get("/boom")
    def boom():  # a bug: Starlette's own 500 answer
        raise RuntimeError("boom")

    with serve_in_thread(app) as u:
        yield u


CALLS = [("GET", "/healthz", None, 200), ("GET", "/openapi.json", None, 200), ("GET", "/docs", None, 200),
         ("GET", "/docs/init.js", None, 200), ("GET", "/docs-static/swagger-ui.css", None, 200),
         ("GET", "/app/", None, 200), ("GET", "/app/params.json", None, 200), ("GET", "/app/nope.js", None, 404),
         ("GET", "/metrics", None, 401), ("POST", "/v1/im2020/enrol", b"x", 401),
         ("GET", "/v1/im2020/enrol", None, 405), ("POST", "/v1/nope/x", b"x", 401), ("GET", "/nope", None, 404),
         ("GET", "/boom", None, 500)]


@pytest.mark.parametrize("method,path,body,status", CALLS, ids=[f"{m} {p}" for m, p, _, _ in CALLS])
def test_no_answer_may_be_framed(url, method, path, body, status):
    r = httpx.request(method, url + path, content=body, headers=OCTETS if body else None, timeout=30)
    assert r.status_code == status
    assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    assert len(r.headers.get_list("content-security-policy")) == 1
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    if not (path.startswith("/app/") or path.startswith("/docs")):
        assert r.headers["content-security-policy"] == DEFAULT_CSP


def test_docs_has_a_csp_and_no_inline_script(url):
    r = httpx.get(url + "/docs")
    assert r.headers["content-security-policy"] == DOCS_CSP
    assert "'unsafe-inline'" not in DOCS_CSP and "'unsafe-eval'" not in DOCS_CSP
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", r.text, re.S)
    assert len(scripts) == 2 and all('src="' in attrs and not inner.strip() for attrs, inner in scripts), scripts
    assert 'data-openapi="/openapi.json"' in r.text
    js = httpx.get(url + "/docs/init.js")
    assert js.headers["content-type"].startswith("text/javascript") and "SwaggerUIBundle" in js.text
