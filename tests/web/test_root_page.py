"""`/` of an im2020 server in headless Chromium (issue 35 B1): a person who opens the bare address gets the page."""
from __future__ import annotations

import pytest

from privface.service.launch import serve_subprocess

from .browser import run

pytestmark = pytest.mark.browser


def test_the_bare_address_opens_the_page(tmp_path):
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 'p.db'}", ["--insecure-test-params"]) as url:
        opened = run(url, [{"do": "goto", "path": "/"}])[0]
    assert opened["http"] == 200 and opened["url"] == f"{url}/app/", opened
    assert opened["csp"] and "default-src 'none'" in opened["csp"] and opened["status"] != "Loading…"
