"""Issue 35 A5 in Chromium: /docs (Swagger UI) renders its operations under its strict CSP with no violation."""
from __future__ import annotations

import pytest

from privface.service.docs import DOCS_CSP
from privface.service.launch import serve_subprocess

from .browser import run

pytestmark = pytest.mark.browser
EXPAND = """(async () => {
  document.querySelector('.opblock-summary-control').click();
  await new Promise((r) => setTimeout(r, 1000));
  return document.querySelectorAll('.opblock.is-open .opblock-body, .opblock.is-open .responses-wrapper').length;
})()"""


def test_docs_render_under_their_csp(tmp_path):
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 'd.db'}") as url:
        r = run(url, [{"do": "open", "path": "/docs", "wait": ".opblock"},
                      {"do": "eval", "js": "document.querySelectorAll('.opblock').length"},
                      {"do": "eval", "js": EXPAND}])
    assert r[0]["http"] == 200 and r[0]["csp"] == DOCS_CSP and r[0]["xfo"] == "DENY"
    assert "/v1/im2020/enrol" in r[0]["text"] and r[1]["value"] >= 4 and r[2]["value"] >= 1
    assert r[-1]["errors"] == []  # no CSP violation (Chromium logs each as a console error), no exception
