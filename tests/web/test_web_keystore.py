"""Issue 35 A5 in Chromium: the page keeps the key file wrapped — AES-GCM under a non-extractable WebCrypto key
stored as a CryptoKey in IndexedDB — never as plain bytes; verify, export and import still work; a record of the
old plain form is wrapped on the next load."""
from __future__ import annotations

import base64
import subprocess
import sys

import pytest
from PIL import Image, ImageEnhance, ImageOps

from privface.demo_data import enrolled_photo
from privface.service.launch import serve_subprocess

from .browser import fixture_bundle, run

pytestmark = pytest.mark.browser

READ = """(async () => {
  const db = await new Promise((res, rej) => { const q = indexedDB.open("privface"); q.onsuccess = () => res(q.result);
    q.onerror = () => rej(q.error); });
  const get = (store, key) => new Promise((res, rej) => { const q = db.transaction(store).objectStore(store).get(key);
    q.onsuccess = () => res(q.result); q.onerror = () => rej(q.error); });
  const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
  const rec = await get("keys", "%s");
  const wk = db.objectStoreNames.contains("wrapping") ? await get("wrapping", "aes-gcm") : null;
  db.close();
  let exported = "refused";
  try { await crypto.subtle.exportKey("raw", wk); exported = "exported"; } catch { }
  const raw = rec instanceof Uint8Array || rec instanceof ArrayBuffer ? hex(rec) :
    rec ? hex(rec.iv) + hex(rec.data) + JSON.stringify(Object.keys(rec)) : null;
  return { kind: Object.prototype.toString.call(rec), raw, wrapping: wk && Object.prototype.toString.call(wk),
    extractable: wk && wk.extractable, algorithm: wk && wk.algorithm.name, exported };
})()"""

OLD_PAGE = """(async () => {  // what the page before issue 35 left: database version 1, the key file's bytes
  await new Promise((r) => { const q = indexedDB.deleteDatabase("privface"); q.onsuccess = q.onerror = () => r(); });
  const db = await new Promise((res, rej) => { const q = indexedDB.open("privface", 1);
    q.onupgradeneeded = () => q.result.createObjectStore("keys"); q.onsuccess = () => res(q.result);
    q.onerror = () => rej(q.error); });
  const bytes = Uint8Array.from(atob("%s"), (c) => c.charCodeAt(0));
  await new Promise((res, rej) => { const tx = db.transaction("keys", "readwrite");
    tx.objectStore("keys").put(bytes, "%s"); tx.oncomplete = res; tx.onerror = () => rej(tx.error); });
  db.close();
  return bytes.length;
})()"""

DLIB = ["--backend", "dlib-resnet128"]  # the page computes dlib descriptors here (issue 36: named)


def _contains_any_window(haystack_hex: str, needle: bytes, width: int = 16) -> bool:
    raw = bytes.fromhex(haystack_hex.split("[")[0]) if haystack_hex else b""
    return any(needle[i:i + width] in raw for i in range(len(needle) - width + 1))


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    d = tmp_path_factory.mktemp("photos")
    genuine = d / "genuine.png"
    ImageEnhance.Brightness(ImageOps.mirror(Image.open(enrolled_photo()).convert("RGB"))).enhance(0.8).save(genuine)
    return {"enrolled": enrolled_photo(), "genuine": genuine}


def _with(photos, name, action):
    face = []
    if fixture_bundle():
        from privface.faces.registry import make_backend

        dlib = make_backend("dlib-resnet128")
        face = [{"do": "fixture", "descriptor": [float(x) for x in dlib.embed(str(photos[name]))]}]
    return [{"do": "photo", "path": str(photos[name])}, *face, {"do": "click", "id": action}]


def test_key_is_stored_wrapped_and_still_verifies_and_exports(photos, tmp_path):
    key = tmp_path / "kim.key"
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 'k.db'}", DLIB) as url:
        r = run(url, [{"do": "goto"}, {"do": "subject", "id": "kim"}, *_with(photos, "enrolled", "enrol"),
                      {"do": "eval", "js": READ % "kim"}, {"do": "export_key", "path": str(key)},
                      {"do": "goto"}, {"do": "subject", "id": "kim"}, *_with(photos, "genuine", "verify")])
        key.chmod(0o600)
        cli = subprocess.run([sys.executable, "-m", "privface.cli", "verify", "--server", url, "--id", "kim", "--key",
                              str(key), "--json", str(photos["genuine"])], capture_output=True, text=True, timeout=300)
    enrol, verify = [s for s in r if s["step"] == "click"]
    assert enrol["decision"] == "Enrolled" and verify["decision"] == "Accepted", (enrol, verify)
    stored = [s for s in r if s["step"] == "eval"][0]["value"]
    assert stored["kind"] == "[object Object]" and stored["wrapping"] == "[object CryptoKey]", stored
    assert stored["extractable"] is False and stored["algorithm"] == "AES-GCM" and stored["exported"] == "refused"
    file = key.read_bytes()
    assert len(file) > 300 and not _contains_any_window(stored["raw"], file)  # no 16 bytes of the key file in clear
    assert cli.returncode == 0 and '"accept"' in cli.stdout, cli.stdout + cli.stderr  # the export is the CLI's format
    assert [e for e in r[-1]["errors"] if not e.startswith("Failed to load resource")] == []


def test_plain_records_of_the_old_page_are_wrapped_on_load(photos, tmp_path):
    key, exported = tmp_path / "lee.key", tmp_path / "lee-exported.key"
    db = f"sqlite:///{tmp_path / 'm.db'}"
    with serve_subprocess("im2020", db, DLIB) as url:
        out = subprocess.run([sys.executable, "-m", "privface.cli", "enrol", "--server", url, "--id", "lee", "--key",
                              str(key), *DLIB, str(photos["enrolled"])], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        file = key.read_bytes()
        r = run(url, [{"do": "open", "path": "/healthz", "wait": "body"},  # the page's origin, before the page runs
                      {"do": "eval", "js": OLD_PAGE % (base64.b64encode(file).decode(), "lee")},
                      {"do": "eval", "js": READ % "lee"},
                      {"do": "goto"}, {"do": "keys"}, {"do": "eval", "js": READ % "lee"},
                      {"do": "subject", "id": "lee"}, *_with(photos, "genuine", "verify"),
                      {"do": "export_key", "path": str(exported)}])
    before, after = [s["value"] for s in r if s["step"] == "eval"][1:]
    assert before["kind"] == "[object Uint8Array]" and bytes.fromhex(before["raw"]) == file  # the old form, as stored
    assert after["kind"] == "[object Object]" and not _contains_any_window(after["raw"], file), after
    assert after["extractable"] is False and after["exported"] == "refused"
    assert "lee" in [s for s in r if s["step"] == "keys"][0]["keys"]
    verify = [s for s in r if s["step"] == "click"][0]
    assert verify["decision"] == "Accepted", verify
    assert exported.read_bytes() == file  # unwrapped, the key file is the one stored
