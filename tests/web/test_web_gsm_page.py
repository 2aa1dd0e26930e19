"""The gsm Device in Chromium (issue 39): /app/gsm.js served by a gsm provider makes the device's key in a Web Worker
with progress, enrols with Π_en and its proofs at the Python provider, keeps the key file (with m1) wrapped in
IndexedDB, and exports it; the exported key file drives a Python Device that the Python terminal accepts.
Toy 1024-bit keys."""
from __future__ import annotations

import json

import pytest

from privface.service.app import create_app
from privface.service.bindings.gsm import GsmService, provider_key_bytes
from privface.service.clients.gsm import DeviceClient, fetch_provider_key, load_device
from privface.service.launch import serve_in_thread
from privface.store import open_store

from .browser import run
from .test_web_gsm import P, template

pytestmark = pytest.mark.browser


def test_browser_page_enrols_gsm_device_and_keeps_its_key_wrapped(tmp_path):
    u = template(31)
    capture = [None]
    with open_store(f"sqlite:///{tmp_path / 'sp.db'}") as sp_store, \
            open_store(f"sqlite:///{tmp_path / 't.db'}") as t_store:
        with serve_in_thread(create_app(sp_store, [GsmService(sp_store, role="provider", params=P)])) as sp_url:
            vk = provider_key_bytes(fetch_provider_key(sp_url))
            terminal = GsmService(t_store, role="terminal", params=P, provider_key=vk, capture=lambda: capture[0])
            with serve_in_thread(create_app(t_store, [terminal])) as t_url:
                js = """(async () => {
                  const m = await import("/app/gsm.js");
                  const stages = new Set();
                  const r = await m.enrolHere("web1", TEMPLATE, (what) => stages.add(what));
                  const dev = await m.storedDevice("web1");
                  const raw = await new Promise((ok) => { const q = indexedDB.open("privface");
                    q.onsuccess = () => { const g = q.result.transaction("keys").objectStore("keys").get("gsm/web1");
                    g.onsuccess = () => ok(g.result); }; });
                  const pre = await new Promise((ok) => { const q = indexedDB.open("privface");
                    q.onsuccess = () => { const g = q.result.transaction("keys").objectStore("keys")
                      .get("gsm-pre/web1");
                    g.onsuccess = () => { const h = q.result.transaction("keys").objectStore("keys")
                      .get("gsm-next/web1");
                      h.onsuccess = () => ok(g.result === undefined && h.result === undefined); }; }; });
                  const key = await m.exportKey("web1");
                  await m.ensurePrepared("web1");  // a new key made ahead leaves the enrolled one in place
                  const kept = (await m.storedDevice("web1")).enrolled;
                  return { bits: r.bits, keygen_ms: r.keygen_ms, device_ms: r.device_ms, stages: [...stages],
                    precomputed: r.phases_ms.precomputed, precompute_gone: pre, kept,
                    enrolled: dev.enrolled, wrapped: raw && raw.v === 1 && !(raw instanceof Uint8Array),
                    key: Array.from(key, (b) => b.toString(16).padStart(2, "0")).join("") };
                })()""".replace("TEMPLATE", json.dumps([int(x) for x in u]))
                res = run(sp_url, [{"do": "open", "path": "/app/params.json", "wait": "body"},
                                   {"do": "eval", "js": js}])
                out = res[1]["value"]
                assert out["bits"] == P.paillier_bits and out["enrolled"] and out["wrapped"], out
                assert {"keygen", "precompute", "proving", "provider"} <= set(out["stages"])
                assert out["precomputed"] == 1 and out["precompute_gone"], out  # used once, then deleted
                assert out["kept"], out
                device, record = load_device(bytes.fromhex(out["key"]), P)
                assert record.subject_id == "web1" and sp_store.get("gsm", "web1") == device.first_message().to_bytes()
                capture[0] = template(32, u, 0.1)
                assert DeviceClient(device).match(t_url, "pi2").match
                capture[0] = template(33)
                assert not DeviceClient(device).match(t_url, "pi3").match


def test_bench_web_gsm_toy():
    """`privface bench web --protocol gsm` end to end with toy parameters: decisions as expected (genuine, impostor
    alternating), no ⊥, the page's bytes per matching step equal to the Python Device's."""
    from privface.bench.gsm_web import bench_gsm_web

    out = bench_gsm_web(runs=1, ell=16, m=8, insecure_test_params=True)
    for v in ("pi2", "pi3"):
        assert out[v]["decisions_as_expected"] and out[v]["aborted"] == 0 and out[v]["bytes_max_diff"] <= 1, out[v]
    assert out["enrol_bytes_max_diff"] is not None and out["keygen_ms"] > 0
