"""The page as an installable app (issue 39) in headless Chromium against a real `privface serve --protocol
im2020`: Chromium's own installability check passes (manifest, icons, service worker controlling the page), and
with the network gone the page opens again from the service worker's cache with the stored keys listed."""
from __future__ import annotations

import pytest

from privface.protocols.im2020 import Im2020Params
from privface.protocols.im2020.parties import Client
from privface.service.clients.im2020 import key_record
from privface.service.launch import serve_subprocess

from .browser import run

pytestmark = pytest.mark.browser


def test_page_is_installable_and_opens_offline(tmp_path):
    db = tmp_path / "privface.db"
    key = tmp_path / "pwa.key"
    with serve_subprocess("im2020", f"sqlite:///{db}") as url:
        key.write_bytes(key_record(Client("pwa", Im2020Params()), url).to_bytes())
        r = run(url, [{"do": "goto"}, {"do": "import_key", "path": str(key)}, {"do": "installability"},
                      {"do": "offline_reload", "wait": "#keys"}])
    install, offline = r[2], r[3]
    # "in-incognito": the runner's browser context keeps no profile on disk, which Chromium never offers to install
    # from; every other criterion (manifest, icons, start URL, service worker) is checked
    errors = [e["errorId"] for e in install["errors"] if e["errorId"] != "in-incognito"]
    assert errors == [] and install["manifest"].endswith("/app/manifest.webmanifest"), install
    assert install["manifest_errors"] == [], install
    assert offline["from_sw"] is True and "pwa" in offline["keys"], offline
