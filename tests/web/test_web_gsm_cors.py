"""Cross-origin terminals and pairing codes (issue 39): the gsm Device's page on the provider's origin presents to a
terminal on another loopback origin (another port) in Chromium — the terminal answers CORS for exactly the origins it
was given (``create_app(allow_origins=…)``, ``serve --allow-origin``) and the provider's page lists exactly those in
its CSP ``connect-src``. Without either, the browser keeps the page from the terminal. Toy 1024-bit keys."""
from __future__ import annotations

import json
import socket

import pytest

from privface.errors import PrivfaceError
from privface.service.app import create_app
from privface.service.bindings.gsm import GsmService, provider_key_bytes
from privface.service.bindings.gsm_kiosk import Kiosk
from privface.service.clients.gsm import fetch_provider_key
from privface.service.cors import check_origins
from privface.service.launch import serve_in_thread
from privface.store import open_store

from .browser import run
from .test_web_gsm import P, template

pytestmark = pytest.mark.browser


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("bad", ["*", "null", "http://a.example/", "http://a.example/app", "ftp://a.example",
                                 "http://a.example:0", "http://a.example:70000", "http://"])
def test_allow_origin_must_be_an_origin(bad):
    with pytest.raises(PrivfaceError, match="allow-origin"):
        check_origins([bad])
    assert check_origins(["HTTPS://Kiosk.Example:8443", "http://127.0.0.1:9"]) == ("https://kiosk.example:8443",
                                                                                   "http://127.0.0.1:9")


def test_page_presents_to_a_terminal_on_another_origin(tmp_path):
    """A kiosk's pairing code leads the page to its terminal once (a second use is refused); Π2 genuine accepted and
    Π3 impostor rejected across origins; a terminal without CORS for the page's origin, and
    one the page's CSP does not list, are both unreachable from the page (with the page's message)."""
    import httpx

    u = template(41)
    captures = [template(42, u, 0.1), template(43)]
    sp_port, t_port, o_port, x_port = (free_port() for _ in range(4))
    sp_origin, t_origin, o_origin = (f"http://127.0.0.1:{p}" for p in (sp_port, t_port, o_port))
    stores = [open_store(f"sqlite:///{tmp_path / f'{n}.db'}") for n in ("sp", "t", "o", "x")]
    sp_store, t_store, o_store, x_store = stores
    try:
        provider = GsmService(sp_store, role="provider", params=P)
        with serve_in_thread(create_app(sp_store, [provider], allow_origins=[t_origin, o_origin]),
                             port=sp_port) as sp_url:
            vk = provider_key_bytes(fetch_provider_key(sp_url))

            def terminal(store, kiosk=None):
                return GsmService(store, role="terminal", params=P, provider_key=vk, capture=lambda: captures.pop(0),
                                  kiosk=kiosk)

            kiosk = Kiosk(lambda frame: None)  # its pairing codes only: the capture is ``captures``
            with serve_in_thread(create_app(t_store, [terminal(t_store, kiosk)], allow_origins=[sp_origin]),
                                 port=t_port) as t_url, \
                    serve_in_thread(create_app(o_store, [terminal(o_store)]), port=o_port) as o_url, \
                    serve_in_thread(create_app(x_store, [terminal(x_store)], allow_origins=[sp_origin]),
                                    port=x_port) as x_url:
                csp = httpx.get(f"{sp_url}/app/").headers["content-security-policy"]
                assert f"connect-src 'self' {t_origin} {o_origin};" in csp
                t_csp = httpx.get(f"{t_url}/app/").headers["content-security-policy"]
                assert f"connect-src 'self' {sp_origin};" in t_csp
                pre = httpx.options(f"{sp_url}/v1/gsm/enrol/start", headers={  # a provider's steps: no CORS
                    "origin": t_origin, "access-control-request-method": "POST"})
                assert "access-control-allow-origin" not in pre.headers
                pre = httpx.options(f"{t_url}/v1/gsm/match/start", headers={
                    "origin": "http://127.0.0.1:1", "access-control-request-method": "POST"})
                assert pre.status_code == 403 and "access-control-allow-origin" not in pre.headers
                for path in ("/v1/gsm/match/start", "/app/pair"):
                    pre = httpx.options(f"{t_url}{path}", headers={
                        "origin": sp_origin, "access-control-request-method": "POST"})
                    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == sp_origin
                assert httpx.post(f"{t_url}/app/kiosk/pair").status_code == 403  # the kiosk token only
                code = httpx.post(f"{t_url}/app/kiosk/pair", headers={"x-kiosk-token": kiosk.token}).json()["code"]
                js = """(async () => {
                  const m = await import("/app/gsm.js");
                  await m.enrolHere("cors1", TEMPLATE);
                  const out = {};
                  out.paired = await m.resolvePairingCode("CODE".slice(0, 4).toLowerCase() + "-" + "CODE".slice(4));
                  try { await m.resolvePairingCode("CODE"); out.reused = "resolved"; }
                  catch (e) { out.reused = String(e.message || e); }
                  out.genuine = await m.presentAndMatch("cors1", out.paired, "pi2");
                  out.impostor = await m.presentAndMatch("cors1", "T_URL", "pi3");
                  for (const [k, url] of [["no_cors", "O_URL"], ["no_csp", "X_URL"]]) {
                    try { await m.presentAndMatch("cors1", url, "pi2"); out[k] = "reached"; }
                    catch (e) { out[k] = String(e.message || e); }
                  }
                  return out;
                })()"""
                js = (js.replace("TEMPLATE", json.dumps([int(x) for x in u])).replace("T_URL", t_url)
                      .replace("O_URL", o_url).replace("X_URL", x_url).replace("CODE", code))
                res = run(sp_url, [{"do": "open", "path": "/app/params.json", "wait": "body"},
                                   {"do": "eval", "js": js}])
                out = res[1]["value"]
                assert out["paired"].rstrip("/") == t_url and "already used" in out["reused"], out
                assert out["genuine"]["decision"] == "accept" and out["genuine"]["match"], out
                assert out["impostor"]["decision"] == "reject" and not out["impostor"]["match"], out
                assert "cannot be reached" in out["no_cors"] and "cannot be reached" in out["no_csp"], out
                assert captures == []  # the two refused terminals never got as far as a capture
    finally:
        for s in stores:
            s.close()
