"""The gsm terminal's kiosk (issue 39; service/bindings/gsm_kiosk.py) over loopback HTTP: frames and status only
with the kiosk token, frames only JPEG/PNG; the terminal compares the latest fresh frame, and the kiosk shows why a
match was refused — no fresh frame / no face, another provider's m1, a subject locked out — or the decision."""
from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest

from privface.errors import TemplateError
from privface.protocols.gsm import Device, GsmParams
from privface.service.app import create_app
from privface.service.bindings.gsm import GsmService, provider_key_bytes
from privface.service.bindings.gsm_kiosk import Kiosk
from privface.service.client import ServiceError
from privface.service.clients.gsm import DeviceClient, fetch_provider_key
from privface.service.launch import serve_in_thread
from privface.service.limits import Lockout
from privface.store import open_store
from privface.templates.fixed_norm import fixed_norm_template

P = GsmParams.toy(ell=16, m=8, cos_threshold=0.6)
JPEG = b"\xff\xd8\xff\xe0 a frame"


def _u(seed, base=None, noise=0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=P.ell) if base is None else base + rng.normal(size=P.ell) * noise
    return fixed_norm_template(x, P.m)


def _req(url, path, token=None, data=None):
    headers = {"x-kiosk-token": token} if token else {}
    req = urllib.request.Request(url + path, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_kiosk_token_frames_and_refusals(tmp_path):
    x = np.random.default_rng(1).normal(size=P.ell)
    seen = {JPEG: fixed_norm_template(x + 0.01, P.m), JPEG + b"impostor": _u(9)}

    def template_of(frame: bytes):
        if frame not in seen:
            raise TemplateError("no face found")
        return seen[frame]

    kiosk = Kiosk(template_of)
    with open_store(f"sqlite:///{tmp_path / 'sp.db'}") as sp_store, \
            open_store(f"sqlite:///{tmp_path / 'o.db'}") as o_store, \
            open_store(f"sqlite:///{tmp_path / 't.db'}") as t_store:
        with serve_in_thread(create_app(sp_store, [GsmService(sp_store, role="provider", params=P)])) as sp_url, \
                serve_in_thread(create_app(o_store, [GsmService(o_store, role="provider", params=P)])) as other_url:
            terminal = GsmService(t_store, role="terminal", params=P, kiosk=kiosk,
                                  provider_key=provider_key_bytes(fetch_provider_key(sp_url)))
            app = create_app(t_store, [terminal], lockout=Lockout(t_store, failures=2, base=600))
            with serve_in_thread(app) as t_url:
                status = lambda: json.loads(_req(t_url, "/app/kiosk/status", kiosk.token)[1])  # noqa: E731
                assert _req(t_url, "/app/kiosk/status")[0] == 403
                assert _req(t_url, "/app/kiosk/frame", "wrong", JPEG)[0] == 403
                assert _req(t_url, "/app/kiosk/frame", kiosk.token, b"GIF89a")[0] == 400
                assert json.loads(_req(t_url, "/app/params.json")[1])["kiosk"] is True

                alice = DeviceClient(Device("alice", P, provider_key=fetch_provider_key(sp_url)))
                alice.enrol(sp_url, fixed_norm_template(x, P.m))
                with pytest.raises(ServiceError):  # no frame posted yet
                    alice.match(t_url, "pi2")
                assert status()["state"] == "refused" and "no fresh frame" in status()["message"]

                assert _req(t_url, "/app/kiosk/frame", kiosk.token, JPEG)[0] == 204
                assert alice.match(t_url, "pi2").match
                assert status()["state"] == "accept" and status()["subject"] == "alice"

                mallory = DeviceClient(Device("mallory", P, provider_key=fetch_provider_key(other_url)))
                mallory.enrol(other_url, _u(3))
                with pytest.raises(ServiceError):
                    mallory.match(t_url, "pi2")
                assert status()["state"] == "refused" and "signature" in status()["message"]

                assert _req(t_url, "/app/kiosk/frame", kiosk.token, JPEG + b"noface")[0] == 204
                with pytest.raises(ServiceError):
                    alice.match(t_url, "pi3")
                assert status()["state"] == "refused" and "no usable face" in status()["message"]

                assert _req(t_url, "/app/kiosk/frame", kiosk.token, JPEG + b"impostor")[0] == 204
                for _ in range(2):
                    assert not alice.match(t_url, "pi3").match
                    assert status()["state"] == "reject"
                with pytest.raises(ServiceError):  # two rejections: alice is locked out
                    alice.match(t_url, "pi2")
                assert status()["state"] == "locked" and status()["subject"] == "alice"
                assert "x" not in status() and "score" not in json.dumps(status())
