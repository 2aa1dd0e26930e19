"""The page at /app/ in headless Chromium against a real `privface serve --protocol im2020` (SQLite store,
112-bit keys): enrol, verify genuine and impostor, revoke; bad input; CLI ↔ page interop with one key file."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from privface.demo_data import enrolled_photo, impostor_photos
from privface.service.launch import serve_subprocess
from privface.service.web import CSP
from privface.store import open_store

from .browser import ROOT, fixture_bundle, run

pytestmark = pytest.mark.browser
SHOTS = Path(os.environ.get("PRIVFACE_SCREENSHOTS") or ROOT / "reports" / "screenshots").resolve()
MOBILE = {"width": 390, "height": 844}

DLIB = ["--backend", "dlib-resnet128"]  # the page computes dlib descriptors here (issue 36: named)


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("photos")
    enrolled = Image.open(enrolled_photo()).convert("RGB")
    genuine = d / "genuine.png"
    ImageEnhance.Brightness(ImageOps.mirror(enrolled)).enhance(0.8).save(genuine)
    text = d / "notes.png"
    text.write_text("not an image")
    blank = d / "blank.png"
    Image.fromarray(np.full((240, 320, 3), 128, np.uint8)).save(blank)
    impostor = impostor_photos()["astronaut (Eileen Collins)"]
    return {"enrolled": enrolled_photo(), "genuine": genuine, "impostor": impostor, "not_image": text, "blank": blank}


@pytest.fixture(scope="module")
def descriptors(photos) -> dict[str, list[float] | None]:
    """TEST FIXTURE input: the Python pipeline's descriptors, queued for the fixture build of the page only."""
    if fixture_bundle() is None:
        return {k: None for k in photos}
    from privface.faces.registry import make_backend

    backend = make_backend("dlib-resnet128")
    return {k: [float(x) for x in backend.embed(str(photos[k]))] for k in ("enrolled", "genuine", "impostor")} | {
        "blank": None}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "privface.db"
    with serve_subprocess("im2020", f"sqlite:///{db}", DLIB) as url:
        yield url, open_store(f"sqlite:///{db}")


def _face(descriptors, name):
    return [{"do": "fixture", "descriptor": descriptors[name]}] if fixture_bundle() else []


def _with(photos, descriptors, name, action):
    """Choose photo `name`, then click `action` (with the fixture's descriptor queued in fixture mode)."""
    return [{"do": "photo", "path": str(photos[name])}, *_face(descriptors, name), {"do": "click", "id": action}]


def test_enrol_verify_revoke_through_the_file_input(server, photos, descriptors, tmp_path):
    url, store = server
    SHOTS.mkdir(parents=True, exist_ok=True)
    key = tmp_path / "alice.key"
    steps = [
        {"do": "goto"}, {"do": "subject", "id": "alice"},
        {"do": "click", "id": "verify"},  # no photo, no key
        {"do": "photo", "path": str(photos["not_image"])},
        *_with(photos, descriptors, "blank", "enrol"),
        *_with(photos, descriptors, "enrolled", "enrol"),
        {"do": "screenshot", "path": str(SHOTS / "web-enrolled-desktop.png")},
        *_with(photos, descriptors, "genuine", "verify"),
        {"do": "screenshot", "path": str(SHOTS / "web-verified-desktop.png")},
        *_with(photos, descriptors, "impostor", "verify"),
        {"do": "export_key", "path": str(key)},
        {"do": "click", "id": "revoke"}, {"do": "click", "id": "revoke-confirm"},
        {"do": "click", "id": "revoke"},  # this device's key is gone
        {"do": "import_key", "path": str(key)},  # the revoked key
        {"do": "click", "id": "revoke"}, {"do": "click", "id": "revoke-confirm"},  # not enrolled any more
        *_with(photos, descriptors, "genuine", "verify"),
    ]
    r = {i: s for i, s in enumerate(run(url, steps))}
    assert r[0]["http"] == 200 and r[0]["csp"] == CSP and r[0]["status"] == "Ready."
    assert r[2]["state"] == "error" and "no key for alice" in r[2]["status"]
    assert r[3]["state"] == "error" and "not an image" in r[3]["status"]
    no_face = r[6 if fixture_bundle() else 5]
    assert no_face["state"] == "error" and "No face was found" in no_face["status"], no_face
    results = [s for s in r.values() if s["step"] == "click"][2:]
    enrol, genuine, impostor, ask, revoke, no_key, _, revoke_again, verify_revoked = results
    assert enrol["decision"] == "Enrolled", enrol
    assert enrol["report"]["keygen_ms"] > 0 and enrol["report"]["bytes_sent"] > 128 * 256
    assert genuine["decision"] == "Accepted" and genuine["report"]["accepted"] is True, genuine
    for k in ("face_ms", "encrypt_ms", "server_ms", "decrypt_ms", "network_ms", "bytes_sent", "bytes_received"):
        assert genuine["report"][k] >= 0
    assert impostor["decision"] == "Rejected" and impostor["report"]["accepted"] is False, impostor
    assert ask["state"] == "ok" and "Confirm below to revoke alice" in ask["status"], ask
    assert revoke["decision"] == "Revoked" and store.get("im2020", "alice") is None
    assert "this device's key are deleted" in revoke["status"], revoke
    assert no_key["state"] == "error" and "no key for alice" in no_key["status"], no_key
    assert revoke_again["state"] == "error" and "not enrolled" in revoke_again["status"]
    assert verify_revoked["state"] == "error" and "not enrolled" in verify_revoked["status"], verify_revoked
    assert key.stat().st_size > 300
    errors = [s for s in r.values() if s["step"] == "errors"][0]["errors"]
    assert [e for e in errors if not e.startswith("Failed to load resource")] == []  # no CSP violation, no throw


def test_bad_input_sends_and_stores_nothing(server, photos, descriptors, tmp_path):
    url, store = server
    foreign = tmp_path / "foreign.key"
    foreign.write_bytes(b"PFw\x01" + os.urandom(64))
    steps = [{"do": "goto"}, {"do": "subject", "id": "bob"},
             {"do": "import_key", "path": str(foreign)},
             {"do": "photo", "path": str(photos["enrolled"])}, *_face(descriptors, "enrolled"),
             {"do": "offline"}, {"do": "click", "id": "enrol"},
             {"do": "screenshot", "path": str(SHOTS / "web-error-mobile.png")}]
    r = run(url, steps, viewport=MOBILE)
    assert r[2]["state"] == "error" and "key file" in r[2]["status"]
    unreachable = [s for s in r if s["step"] == "click"][0]
    assert unreachable["state"] == "error" and "cannot be reached" in unreachable["status"]
    assert store.get("im2020", "bob") is None
    keys = run(url, [{"do": "goto"}, {"do": "keys"}])[1]
    assert "bob" not in keys["keys"]


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privface.cli", *args], capture_output=True, text=True, timeout=300)


def test_cli_and_page_share_one_key_file(server, photos, descriptors, tmp_path):
    """A subject enrolled with the CLI verifies from the page with the same key file, and the reverse."""
    url, _ = server
    cli_key = tmp_path / "carol.key"
    out = _cli("enrol", "--server", url, "--id", "carol", "--key", str(cli_key), *DLIB, str(photos["enrolled"]))
    assert out.returncode == 0, out.stderr
    page_key = tmp_path / "dave.key"
    steps = [{"do": "goto"}, {"do": "import_key", "path": str(cli_key)},
             *_with(photos, descriptors, "genuine", "verify"),
             {"do": "subject", "id": "dave"},
             *_with(photos, descriptors, "enrolled", "enrol"),
             {"do": "export_key", "path": str(page_key)},
             {"do": "screenshot", "path": str(SHOTS / "web-mobile.png")}]
    r = run(url, steps, viewport=MOBILE)
    assert "Imported the key of carol" in r[1]["status"]
    verify, enrol = [s for s in r if s["step"] == "click"]
    assert verify["decision"] == "Accepted", verify
    assert enrol["decision"] == "Enrolled", enrol
    page_key.chmod(0o600)
    out = _cli("verify", "--server", url, "--id", "dave", "--key", str(page_key), "--json", str(photos["genuine"]))
    assert out.returncode == 0 and '"accept"' in out.stdout, out.stdout + out.stderr


def y4m(photo: Path, path: Path, frames: int = 2) -> Path:
    """A YUV4MPEG2 (4:2:0) clip of a still photo for Chromium's fake capture device."""
    im = Image.open(photo).convert("RGB")
    im = im.crop((0, 0, im.width // 2 * 2, im.height // 2 * 2))
    y, cb, cr = (np.asarray(c) for c in im.convert("YCbCr").split())
    sub = [np.asarray(Image.fromarray(c).resize((im.width // 2, im.height // 2), Image.BILINEAR)) for c in (cb, cr)]
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{im.width} H{im.height} F10:1 Ip A1:1 C420jpeg\n".encode())
        for _ in range(frames):
            f.write(b"FRAME\n" + y.tobytes() + sub[0].tobytes() + sub[1].tobytes())
    return path


def test_camera_path_with_the_fake_capture_device(server, photos, descriptors, tmp_path):
    """Enrol and verify through getUserMedia (Chromium's fake device playing the demo photo), revoke."""
    url, store = server
    clip = y4m(photos["enrolled"], tmp_path / "face.y4m")
    steps = [{"do": "goto"}, {"do": "subject", "id": "erin"},
             {"do": "camera"}, *_face(descriptors, "enrolled"), {"do": "click", "id": "enrol"},
             {"do": "camera"}, *_face(descriptors, "enrolled"), {"do": "click", "id": "verify"},
             {"do": "screenshot", "path": str(SHOTS / "web-camera-mobile.png")},
             {"do": "click", "id": "revoke"}, {"do": "click", "id": "revoke-confirm"}]
    r = run(url, steps, camera=str(clip), viewport=MOBILE)
    cams = [s for s in r if s["step"] == "camera"]
    assert all(c["state"] == "ok" and c["status"].startswith("Picture ready") for c in cams), cams
    enrol, verify, _, revoke = [s for s in r if s["step"] == "click"]
    assert enrol["decision"] == "Enrolled" and verify["decision"] == "Accepted", (enrol, verify)
    assert revoke["decision"] == "Revoked" and store.get("im2020", "erin") is None


def test_camera_permission_denied(server, photos, tmp_path):
    url, store = server
    clip = y4m(photos["enrolled"], tmp_path / "face.y4m")
    r = run(url, [{"do": "goto"}, {"do": "subject", "id": "frank"}, {"do": "camera"}, {"do": "click", "id": "enrol"}],
            camera=str(clip), deny_camera=True)
    assert r[2]["state"] == "error" and "permission was denied" in r[2]["status"], r[2]
    assert r[3]["state"] == "error" and store.get("im2020", "frank") is None


def test_revoke_needs_this_devices_key_and_a_confirmation(server, photos, descriptors, tmp_path):
    """f27799f: on a server without API keys the page revoked any ID typed in, with no key for it, and said
    "this device's key is deleted". Now revoking proves possession of the key in IndexedDB (revoke/start,
    revoke/finish) and asks first; cancelling changes nothing."""
    url, store = server
    key = tmp_path / "kim.key"
    steps = [{"do": "goto"}, {"do": "subject", "id": "kim"}, *_with(photos, descriptors, "enrolled", "enrol"),
             {"do": "export_key", "path": str(key)},
             {"do": "clear_storage"}, {"do": "click", "id": "revoke"},  # another device: no key for kim
             {"do": "import_key", "path": str(key)},
             {"do": "click", "id": "revoke"}, {"do": "click", "id": "revoke-cancel"},
             {"do": "click", "id": "revoke"},
             {"do": "screenshot", "path": str(SHOTS / "web-revoke-confirm-desktop.png")},
             {"do": "click", "id": "revoke-confirm"}, {"do": "keys"}]
    SHOTS.mkdir(parents=True, exist_ok=True)
    r = run(url, steps)
    enrol, no_key, ask, cancel, ask_again, revoke = [s for s in r if s["step"] == "click"]
    assert enrol["decision"] == "Enrolled", enrol
    assert no_key["state"] == "error" and "no key for kim" in no_key["status"], no_key
    assert ask["state"] == "ok" and "Confirm below to revoke kim" in ask["status"], ask
    assert cancel["status"] == "Revocation cancelled: nothing was changed.", cancel
    assert ask_again["state"] == "ok" and "Confirm below" in ask_again["status"], ask_again
    assert revoke["decision"] == "Revoked", revoke
    assert revoke["status"] == "Revoked kim: the server's record and this device's key are deleted.", revoke
    assert revoke["report"]["bytes_sent"] > 0 and revoke["report"]["decrypt_ms"] >= 0
    assert "kim" not in r[-2]["keys"] and store.get("im2020", "kim") is None
    errors = [s for s in r if s["step"] == "errors"][0]["errors"]
    assert [e for e in errors if not e.startswith("Failed to load resource")] == []


def test_server_with_api_keys(photos, descriptors, tmp_path):
    """Without a key the page says the server needs one and stores nothing; with an enrol+verify key it works,
    revocation included (by the key's proof: f27799f answered "needs the admin scope")."""
    from privface.service.auth import ApiKeys

    db = f"sqlite:///{tmp_path / 'keys.db'}"
    _, secret = ApiKeys(open_store(db)).create("enrol,verify")
    with serve_subprocess("im2020", db, DLIB, auth=True) as url:
        r = run(url, [{"do": "goto"}, {"do": "subject", "id": "gina"}, *_with(photos, descriptors, "enrolled", "enrol"),
                      {"do": "api_key", "key": secret}, *_with(photos, descriptors, "enrolled", "enrol"),
                      *_with(photos, descriptors, "genuine", "verify"),
                      {"do": "click", "id": "revoke"}, {"do": "click", "id": "revoke-confirm"}])
    no_key, enrol, verify, _, revoke = [s for s in r if s["step"] == "click"]
    assert no_key["state"] == "error" and "needs an API key" in no_key["status"], no_key
    assert enrol["decision"] == "Enrolled" and verify["decision"] == "Accepted", (enrol, verify)
    assert revoke["decision"] == "Revoked", revoke
    assert open_store(db).get("im2020", "gina") is None


def test_secure_comparison_server_is_refused_before_decrypting(photos, descriptors, tmp_path):
    """The browser client has no §VII garbled-circuit comparison: against such a server it says so."""
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 'sc.db'}", [*DLIB, "--mode", "secure-comparison"]) as url:
        r = run(url, [{"do": "goto"}, {"do": "subject", "id": "hal"}, *_with(photos, descriptors, "enrolled", "enrol"),
                      *_with(photos, descriptors, "genuine", "verify")])
    assert "secure-comparison" in r[0]["status"]
    enrol, verify = [s for s in r if s["step"] == "click"]
    assert enrol["decision"] == "Enrolled", enrol
    assert verify["state"] == "error" and "secure-comparison mode" in verify["status"], verify


def test_server_requiring_the_trusted_party(photos, descriptors, tmp_path):
    """A server that accepts only TP-signed enrolments (§VII) refuses the page's unsigned one: the page shows the
    server's reason and stores no key (the trusted party has no HTTP client, in the CLI either)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = tmp_path / "tp.pem"
    pem.write_bytes(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    db = f"sqlite:///{tmp_path / 'tp.db'}"
    with serve_subprocess("im2020", db, [*DLIB, "--tp-public-key", str(pem)]) as url:
        r = run(url, [{"do": "goto"}, {"do": "subject", "id": "ivan"}, *_with(photos, descriptors, "enrolled", "enrol"),
                      {"do": "keys"}])
    enrol = [s for s in r if s["step"] == "click"][0]
    assert enrol["state"] == "error" and "trusted party" in enrol["status"], enrol
    assert "ivan" not in r[-2]["keys"] and open_store(db).get("im2020", "ivan") is None
