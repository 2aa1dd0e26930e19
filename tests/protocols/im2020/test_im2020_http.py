"""im2020 end to end over real loopback HTTP: the service in uvicorn, the Client party through ServiceClient,
the key file, and the `privface serve / enroll / verify / revoke` commands as subprocesses."""
import dataclasses
import json
import os
import socket
import stat
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from PIL import Image

import privface
from privface import demo_data
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import Client, EnrolRequest, EnrolResponse, Im2020Params
from privface.service.app import create_app
from privface.service.bindings.im2020 import Im2020Service
from privface.service.client import (
    RemoteMessageError,
    RemoteNotEnrolledError,
    RemoteSessionError,
    ServiceClient,
    server_seconds,
)
from privface.service.clients import im2020 as remote
from privface.service.launch import serve_in_thread as serving
from privface.service.sessions import SESSION_HEADER
from privface.store import open_store

TOY = Im2020Params.toy(backend="dlib-resnet128")  # face_like_template is dlib-like (norm 1.4)


def face(seed):
    return attacks.face_like_template(TOY, np.random.default_rng(seed))


def near(t, seed, spread=3):
    return np.clip(t + np.random.default_rng(seed).integers(-spread, spread + 1, t.shape), -128, 128)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with open_store(f"sqlite:///{tmp_path_factory.mktemp('http') / 'im2020.db'}") as s:
        yield s


@pytest.fixture(scope="module")
def url(store):
    with serving(create_app(store, [Im2020Service(store, params=TOY)])) as u:
        yield u


@pytest.fixture
def http(url):
    with remote.service_client(url) as c:
        yield c


def test_register_verify_replace_revoke(http, store):
    alice = Client("alice", TOY, workers=1)
    enrolled = face(1)
    resp, st = remote.enrol(http, alice, enrolled)
    assert resp.replaced is False and st["bytes_sent"] > 0 and st["bytes_received"] > 0
    genuine = remote.verify(http, alice, near(enrolled, 2))
    assert genuine["accepted"] is True and genuine["decision"] == "accept"
    assert remote.verify(http, alice, face(3))["decision"] == "reject"
    # network time = HTTP wall time − server compute (Server-Timing), both measured
    assert set(genuine["server_ms_by_step"]) == {"auth/start", "auth/finish"}
    assert 0 <= genuine["network_ms"] <= genuine["http_ms"] and genuine["server_ms"] > 0

    alice2 = Client("alice", TOY, workers=1)  # re-registration with a new key pair replaces the record
    resp, _ = remote.enrol(http, alice2, face(4))
    assert resp.replaced is True and store.ids("im2020").count("alice") == 1
    assert remote.verify(http, alice2, near(face(4), 5))["accepted"] is True
    assert remote.verify(http, alice2, near(enrolled, 2))["accepted"] is False

    assert remote.revoke(http, alice2)[0].revoked is True and store.get("im2020", "alice") is None
    with pytest.raises(RemoteNotEnrolledError, match="not enrolled") as e:
        remote.verify(http, alice2, face(4))
    assert e.value.status == 404
    with pytest.raises(RemoteNotEnrolledError):
        remote.revoke(http, alice2)


def test_tampered_and_truncated_messages_are_400_without_state_change(http, store):
    bob = Client("bob", TOY, workers=1)
    enrolled = face(6)
    remote.enrol(http, bob, enrolled)
    before = store.get("im2020", "bob")
    good = bob.enrol(face(7)).to_bytes()
    msg = bob.auth_start(enrolled)
    start = msg.to_bytes()
    n = int(bob.pk.n)
    tampered = [dataclasses.replace(msg, c_beta=[0] + msg.c_beta[1:]),  # not a unit
                dataclasses.replace(msg, c_beta=[n + 1] + msg.c_beta[1:]),  # outside Z_N
                dataclasses.replace(msg, c_a=[1 << bob.pk.k] + msg.c_a[1:]),  # a_1 outside M
                dataclasses.replace(msg, c_a=msg.c_a[:-1], c_beta=msg.c_beta[:-1])]  # 127 entries
    bad = [("enrol", good[:-3]), ("enrol", good + b"\x00"), ("enrol", start),
           ("auth/start", start[:200]), *(("auth/start", t.to_bytes()) for t in tampered),
           ("enrol", EnrolRequest("bob", "sface", 15, 1, 48, [], []).to_bytes())]
    for step, body in bad:
        http.reset()
        with pytest.raises(RemoteMessageError) as e:
            http.step(step, body)
        assert e.value.status == 400 and store.get("im2020", "bob") == before
        assert http.session is None
    # a bad s* ends the flow as a 400 and stores nothing
    http.reset()
    http.step("auth/start", start)
    with pytest.raises(RemoteMessageError):
        http.step("auth/finish", b"\x00" * 9)
    assert store.get("im2020", "bob") == before and store.ids("im2020") == ["bob"]


def test_reused_and_expired_sessions_are_409(http, store, url):
    carol = Client("carol", TOY, workers=1)
    enrolled = face(8)
    remote.enrol(http, carol, enrolled)
    http.reset()
    challenge = http.step("auth/start", carol.auth_start(enrolled).to_bytes())
    sid = http.session
    from privface.protocols.im2020 import AuthChallenge

    finish = carol.auth_finish(AuthChallenge.from_bytes(challenge)).to_bytes()
    http.step("auth/finish", finish)
    r = httpx.post(f"{url}/v1/im2020/auth/finish", content=finish,
                   headers={"content-type": "application/octet-stream", SESSION_HEADER: sid})
    assert r.status_code == 409  # a session serves one step

    with serving(create_app(store, [Im2020Service(store, params=TOY)], session_ttl=0.2)) as short:
        with ServiceClient(short, "im2020") as c:
            c.step("auth/start", carol.auth_start(enrolled).to_bytes())
            time.sleep(0.4)
            with pytest.raises(RemoteSessionError) as e:
                c.step("auth/finish", finish)
    assert e.value.status == 409 and store.get("im2020", "carol") is not None


def test_server_timing_header_is_parsed():
    assert server_seconds("compute;dur=12.5") == pytest.approx(0.0125)
    assert server_seconds("db;dur=1, compute;desc=x;dur=2") == pytest.approx(0.002)
    assert server_seconds(None) is None and server_seconds("compute;dur=x") is None


def test_key_file_is_private_refuses_overwrite_and_round_trips(tmp_path):
    client = Client("dave", TOY, workers=1)
    path = tmp_path / "keys" / "dave.key"
    old_umask = os.umask(0)  # even with a permissive umask the file is 0600
    try:
        remote.PendingKey(path, remote.key_record(client, "http://h:1")).commit()
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and [p.name for p in path.parent.iterdir()] == ["dave.key"]
    loaded, record = remote.load_client(path)
    assert record.subject_id == "dave" and record.server == "http://h:1" and loaded.pk.n == client.pk.n
    # the loaded key decrypts what the original encrypted
    from privface.crypto import catalano_fiore as cf

    assert cf.decrypt(loaded._sk, cf.encrypt(client.pk, 12345)) == 12345
    with pytest.raises(remote.KeyFileError, match="--force"):
        remote.PendingKey(path, remote.key_record(Client("dave", TOY), "http://h:1"))
    assert remote.load_client(path)[0].pk.n == client.pk.n
    other = Client("dave", TOY)
    remote.PendingKey(path, remote.key_record(other, "http://h:1"), force=True).commit()
    assert remote.load_client(path)[0].pk.n == other.pk.n and len(list(path.parent.iterdir())) == 1
    pending = remote.PendingKey(tmp_path / "x.key", remote.key_record(other, "u"))
    pending.discard()
    assert list(tmp_path.glob("*x.key*")) == []

    path.chmod(0o644)
    with pytest.raises(remote.KeyFileError, match="readable by others"):
        remote.load_client(path)
    junk = tmp_path / "junk.key"
    junk.write_bytes(b"not a key")
    junk.chmod(0o600)
    with pytest.raises(remote.KeyFileError, match="not a privface"):
        remote.load_client(junk)
    with pytest.raises(remote.KeyFileError, match="no key file"):
        remote.load_client(tmp_path / "missing.key")
    assert "alice.key" in str(remote.default_key_path("http://127.0.0.1:8000", "alice"))


# ---------------------------------------------------------------- the commands, as subprocesses


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _privface(*args, env):
    return subprocess.run([sys.executable, "-m", "privface.cli", *args], env=env, capture_output=True,
                          text=True, timeout=180)


def test_cli_serve_enrol_verify_revoke(tmp_path):
    port = _free_port()
    server = f"http://127.0.0.1:{port}"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    env.pop("PRIVFACE_API_KEY", None)
    created = _privface("keys", "create", "--db", f"sqlite:///{tmp_path / 'serve.db'}", "--scopes",
                        "enrol,verify,admin", "--name", "cli test", "--json", env=env)
    assert created.returncode == 0, created.stderr
    api_key = json.loads(created.stdout)["api_key"]
    enrol_only = json.loads(_privface("keys", "create", "--db", f"sqlite:///{tmp_path / 'serve.db'}", "--scopes",
                                      "enrol,verify", "--json", env=env).stdout)["api_key"]
    keyless, env = env, {**env, "PRIVFACE_API_KEY": api_key}  # the clients' key, from the environment
    proc = subprocess.Popen([sys.executable, "-m", "privface.cli", "serve", "--protocol", "im2020",
                             "--db", f"sqlite:///{tmp_path / 'serve.db'}", "--port", str(port),
                             "--insecure-test-params", "--log-level", "warning"],
                            env=env, stderr=subprocess.PIPE, text=True)
    genuine = tmp_path / "grace_mirrored.png"
    Image.fromarray(next(iter(demo_data.altered_copies(demo_data.enrolled_photo()).values()))).save(genuine)
    impostor = str(demo_data.impostor_photos()["astronaut (Eileen Collins)"])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{server}/healthz")
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        anonymous = _privface("enrol", "--server", server, "--id", "grace", str(demo_data.enrolled_photo()),
                              "--insecure-test-params", "--json", env=keyless)
        assert anonymous.returncode == 2 and "API key" in anonymous.stderr
        assert not any((tmp_path / "cfg").rglob("*.key"))  # refused before a key file is kept
        enrol = _privface("enrol", "--server", server, "--id", "grace", str(demo_data.enrolled_photo()),
                          "--insecure-test-params", "--json", env=env)
        assert enrol.returncode == 0, enrol.stderr
        key = json.loads(enrol.stdout)["key_file"]
        assert key.startswith(str(tmp_path / "cfg")) and stat.S_IMODE(os.stat(key).st_mode) == 0o600
        assert b"grace" in open(key, "rb").read()

        ok = _privface("verify", "--server", server, "--id", "grace", str(genuine), "--json", env=env)
        assert ok.returncode == 0, ok.stderr
        out = json.loads(ok.stdout)
        assert list(out) == ["id", "decision", "accepted", "face", "c1_face_ms", "c2_encrypt_ms", "c3_decrypt_ms",
                             "network_ms", "total_ms", "bytes_sent", "bytes_received", "mode"]
        assert out["decision"] == "accept" and out["accepted"] is True and out["bytes_received"] > 0
        assert out["face"].startswith("the face at ") and out["face"].endswith("(the only one)")

        two = tmp_path / "two.png"  # Grace Hopper and Eileen Collins, faces of the same size (issue 35 B4)
        Image.fromarray(demo_data.two_faces()).save(two)
        refused = _privface("verify", "--server", server, "--id", "grace", str(two), env=env)
        assert refused.returncode == 2 and "2 faces of about the same size" in refused.stderr, refused.stderr
        assert "--face N" in refused.stderr and "face 0 at" in refused.stderr and "face 1 at" in refused.stderr
        grace = 0 if privface.detect(two)[0][0] < 320 else 1
        chosen = _privface("verify", "--server", server, "--id", "grace", "--face", str(grace), str(two), env=env)
        assert chosen.returncode == 0, chosen.stderr
        assert ("(largest of 2)" if grace == 0 else "(face 1 of 2)") in chosen.stdout, chosen.stdout
        other = _privface("verify", "--server", server, "--id", "grace", "--face", str(1 - grace), str(two), env=env)
        assert other.returncode == 1, other.stderr

        bad = _privface("verify", "--server", server, "--id", "grace", impostor, "--json", env=env)
        assert bad.returncode == 1 and json.loads(bad.stdout)["decision"] == "reject"

        again = _privface("enrol", "--server", server, "--id", "grace", impostor, "--insecure-test-params",
                          env=env)
        assert again.returncode == 2 and "--force" in again.stderr
        before = open(key, "rb").read()
        taken = _privface("enrol", "--server", server, "--id", "grace", impostor, "--insecure-test-params", "--force",
                          env={**env, "PRIVFACE_API_KEY": enrol_only})
        assert taken.returncode == 2 and "already enrolled" in taken.stderr  # registration creates only (409)
        assert open(key, "rb").read() == before and not list(os.scandir(os.path.dirname(key)))[1:]
        still = _privface("verify", "--server", server, "--id", "grace", str(genuine), "--json", env=env)
        assert still.returncode == 0 and json.loads(still.stdout)["accepted"] is True

        revoked = _privface("revoke", "--server", server, "--id", "grace", "--json",
                            env={**env, "PRIVFACE_API_KEY": enrol_only})  # the key's proof: no admin needed
        assert revoked.returncode == 0 and json.loads(revoked.stdout)["revoked"] is True
        assert not os.path.exists(key)
        nofile = _privface("revoke", "--server", server, "--id", "grace", env=env)
        assert nofile.returncode == 2 and "no key file" in nofile.stderr and "--admin" in nofile.stderr
        gone = _privface("revoke", "--server", server, "--id", "grace", "--admin", env=env)
        assert gone.returncode == 2 and "not enrolled" in gone.stderr
        nokey = _privface("verify", "--server", server, "--id", "grace", str(genuine), env=env)
        assert nokey.returncode == 2 and "no key file" in nokey.stderr
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "INSECURE" in err.upper() and "TOY KEY SIZES" in err and "API keys required" in err
    assert api_key not in err and api_key.split("_", 2)[2] not in err  # the secret is never logged
    down = _privface("revoke", "--server", server, "--id", "grace", "--admin", env=env)
    assert down.returncode == 2 and "cannot reach" in down.stderr


def test_serve_options_reach_the_im2020_service(tmp_path):
    from privface.cli import build_parser
    from privface.cli.serve import _service_options
    from privface.errors import PrivfaceError
    from privface.protocols.im2020 import TrustedParty
    from privface.service.base import MessageError

    pem = tmp_path / "tp.pem"
    pem.write_bytes(TrustedParty(TOY).public_key_pem())
    a = build_parser().parse_args(["serve", "--protocol", "im2020", "--insecure-test-params", "--tau", "4000",
                                   "--tp-public-key", str(pem)])
    service = Im2020Service(open_store("sqlite://"), **_service_options(a, "im2020"))
    assert service.server.params.tau == 4000 and service.server.params.insecure_test_params
    with pytest.raises(MessageError, match="signed"):
        service.handle("enrol", Client("erin", TOY).enrol(face(9)).to_bytes(), None)
    a = build_parser().parse_args(["serve", "--protocol", "im2020", "--security-bits", "128"])
    assert _service_options(a, "im2020")["params"].security_bits == 128
    a = build_parser().parse_args(["serve", "--protocol", "im2020", "--tp-public-key", str(tmp_path / "no.pem")])
    with pytest.raises(PrivfaceError, match="--tp-public-key"):
        _service_options(a, "im2020")


def test_the_old_step_name_register_still_enrols_and_openapi_marks_it_deprecated(http, url, store):
    """`enrol` was called `register` before 0.2: a client that still posts there enrols the same way."""
    erin = Client("erin", TOY, workers=1)
    body = erin.enrol(face(40)).to_bytes()
    r = httpx.post(f"{url}/v1/im2020/register", content=body, headers={"content-type": "application/octet-stream"})
    assert r.status_code == 200 and EnrolResponse.from_bytes(r.content).subject_id == "erin"
    assert remote.verify(http, erin, near(face(40), 41))["accepted"] is True
    again = httpx.post(f"{url}/v1/im2020/enrol", content=body, headers={"content-type": "application/octet-stream"})
    assert again.status_code == 200  # no API keys here: the caller may replace
    paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    assert paths["/v1/im2020/register"]["post"]["deprecated"] is True
    assert not paths["/v1/im2020/enrol"]["post"].get("deprecated")
