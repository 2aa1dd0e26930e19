"""The HTTP service mechanism over real loopback HTTP (uvicorn + httpx), with a test-only protocol.

`Counter` is a small multi-round protocol: `register` stores a record, `count/start` opens a flow
on an enrolled subject, `count/next` increments server-side state, `count/finish` ends the flow.
"""
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from privface.service.app import create_app
from privface.service.base import MessageError, NotEnrolledError, SessionError, StepResult
from privface.service.client import (
    RemoteMessageError,
    RemoteNotEnrolledError,
    RemoteSessionError,
    ServiceClient,
    ServiceError,
)
from privface.service.launch import serve_in_thread as serving
from privface.service.sessions import SESSION_HEADER
from privface.store import open_store


class Counter:
    """Test-only ProtocolService."""

    steps = ("register", "count/start", "count/next", "count/finish", "boom")
    first_steps = ("register", "count/start", "boom")
    max_body = {"register": 1024}

    def __init__(self, store, name="counter"):
        self.store, self.name = store, name

    def handle(self, step, body, state):
        if step == "register":
            subject, sep, payload = body.partition(b":")
            if not sep or not payload:
                raise MessageError("register wants b'id:payload'")
            replaced = self.store.put(self.name, subject.decode("ascii", "replace"), payload)
            return StepResult(b"replaced" if replaced else b"new")
        if step == "count/start":
            record = self.store.get(self.name, body.decode("ascii", "replace"))
            if record is None:
                raise NotEnrolledError("subject is not enrolled")
            return StepResult(record, state=0)
        if step == "count/next":
            if body != b"+":
                raise MessageError("count/next wants b'+'")
            return StepResult(str(state + 1).encode(), state=state + 1)
        if step == "count/finish":
            if state < 1:
                raise SessionError("count at least once before finishing")
            return StepResult(f"total {state}".encode())
        raise RuntimeError("secret-template-bytes")  # "boom": a bug inside a step


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with open_store(f"sqlite:///{tmp_path_factory.mktemp('svc') / 'store.db'}") as s:
        yield s


@pytest.fixture(scope="module")
def url(store):
    app = create_app(store, [Counter(store), Counter(store, "other")], max_body=4096)
    with serving(app) as base:
        yield base


@pytest.fixture
def client(url):
    with ServiceClient(url, "counter") as c:
        yield c


def test_register_and_a_full_flow_carry_fresh_sessions(client, store):
    assert client.step("register", b"alice:hello") == b"new"
    assert client.session is None  # register ends its flow
    assert client.step("register", b"alice:hello2") == b"replaced"
    assert store.get("counter", "alice") == b"hello2"
    assert client.step("count/start", b"alice") == b"hello2"
    seen = {client.session}
    assert client.step("count/next", b"+") == b"1"
    seen.add(client.session)
    assert client.step("count/next", b"+") == b"2"
    seen.add(client.session)
    assert len(seen) == 3 and all(len(s) == 32 for s in seen)  # one fresh 128-bit id per step
    assert client.step("count/finish", b"") == b"total 2"
    assert client.session is None
    assert [s.step for s in client.stats][-4:] == ["count/start", "count/next", "count/next", "count/finish"]
    last = client.stats[-1]
    assert (last.request_bytes, last.response_bytes, last.status) == (0, len(b"total 2"), 200)
    assert all(s.seconds > 0 for s in client.stats)


def test_client_keeps_its_connection_and_reopens_one_the_server_closed(store):
    app = create_app(store, [Counter(store)])
    with serving(app, timeout_keep_alive=0.2) as base, ServiceClient(base, "counter") as c:
        c.step("register", b"carol:x")
        conn = c._http._conn
        assert c.step("register", b"carol:y") == b"replaced" and c._http._conn is conn  # keep-alive
        time.sleep(0.6)  # the server closes the idle connection
        assert c.step("count/start", b"carol") == b"y" and c.session is not None
        assert c._http._conn is not conn
    with pytest.raises(ServiceError, match="cannot reach"):
        ServiceClient(base, "counter").step("register", b"carol:z")  # server gone


def test_a_session_id_serves_one_step(client):
    client.step("register", b"bob:x")
    client.step("count/start", b"bob")
    old = client.session
    client.step("count/next", b"+")
    client.session = old
    with pytest.raises(RemoteSessionError, match="unknown session"):
        client.step("count/next", b"+")


def test_unknown_missing_and_foreign_sessions_are_refused(client, url):
    client.session = "0" * 32
    with pytest.raises(RemoteSessionError, match="unknown session") as e:
        client.step("count/next", b"+")
    assert e.value.status == 409
    client.reset()
    with pytest.raises(RemoteSessionError, match=SESSION_HEADER):
        client.step("count/next", b"+")
    client.step("register", b"carol:x")
    client.step("count/start", b"carol")
    with ServiceClient(url, "other") as other:  # a session of one protocol is no use in another
        other.session = client.session
        with pytest.raises(RemoteSessionError):
            other.step("count/next", b"+")
    assert client.step("count/next", b"+") == b"1"  # ... and the refusal did not consume it


def test_sessions_expire(store):
    with serving(create_app(store, [Counter(store)], session_ttl=0.3)) as base, \
            ServiceClient(base, "counter") as c:
        c.step("register", b"dave:x")
        c.step("count/start", b"dave")
        time.sleep(0.5)
        with pytest.raises(RemoteSessionError, match="expired"):
            c.step("count/next", b"+")


def test_open_sessions_are_bounded(store):
    with serving(create_app(store, [Counter(store)], max_sessions=2, max_sessions_per_caller=3)) as base:
        clients = [ServiceClient(base, "counter") for _ in range(3)]
        clients[0].step("register", b"erin:x")
        clients[0].step("count/start", b"erin")
        clients[1].step("count/start", b"erin")
        with pytest.raises(ServiceError, match="too many open sessions") as e:
            clients[2].step("count/start", b"erin")
        assert e.value.status == 503
        assert clients[0].step("count/next", b"+") == b"1"  # open flows go on
        for c in clients:
            c.close()


def test_body_limits_and_content_type(client, store, url):
    before = store.ids("counter")
    with pytest.raises(ServiceError, match="at most 1024 bytes") as e:  # the step's own limit
        client.step("register", b"big:" + b"x" * 1100)
    assert e.value.status == 413
    r = httpx.post(f"{url}/v1/counter/count/start", content=b"x" * 5000,  # the app's limit
                   headers={"content-type": "application/octet-stream"})
    assert r.status_code == 413
    r = httpx.post(f"{url}/v1/counter/register", content=b"fred:x", headers={"content-type": "text/plain"})
    assert (r.status_code, r.json()["type"]) == (415, "UnsupportedMediaType")
    # A chunked body (no Content-Length) is cut off as soon as it passes the limit.
    r = httpx.post(f"{url}/v1/counter/register", content=iter([b"gina:", b"y" * 600, b"y" * 600]),
                   headers={"content-type": "application/octet-stream"})
    assert r.status_code == 413
    assert store.ids("counter") == before


def test_an_oversized_declared_body_is_refused_before_it_is_sent(url):
    host, port = url.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"POST /v1/counter/register HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/octet-stream\r\nContent-Length: 10000000000\r\n\r\n")
        answer = s.recv(4096)  # answered without waiting for the 10 GB
    assert answer.startswith(b"HTTP/1.1 413")


def test_error_mapping_and_no_state_change_on_bad_input(client, store, url):
    client.step("register", b"hank:kept")
    with pytest.raises(RemoteMessageError, match="id:payload") as e:
        client.step("register", b"no-separator")
    assert e.value.status == 400 and isinstance(e.value, MessageError)
    with pytest.raises(RemoteMessageError, match="subject id"):  # StoreError → 400
        client.step("register", b"bad id:x")
    with pytest.raises(RemoteNotEnrolledError, match="not enrolled"):
        client.step("count/start", b"nobody")
    assert isinstance(RemoteNotEnrolledError("m"), NotEnrolledError)
    assert store.get("counter", "hank") == b"kept"
    assert "bad id" not in store.ids("counter")
    client.step("count/start", b"hank")
    old = client.session
    with pytest.raises(RemoteMessageError, match="wants b'\\+'"):
        client.step("count/next", b"-")
    assert client.session is None  # a refused continuation ends its flow ...
    client.session = old
    with pytest.raises(RemoteSessionError, match="unknown session"):  # ... for good
        client.step("count/next", b"+")
    client.step("count/start", b"hank")
    with pytest.raises(RemoteSessionError, match="at least once"):  # the step's own SessionError
        client.step("count/finish", b"")
    with ServiceClient(url, "nosuch") as c, pytest.raises(ServiceError, match="unknown protocol") as e:
        c.step("register", b"a:b")
    assert e.value.status == 404 and not isinstance(e.value, NotEnrolledError)
    with pytest.raises(ServiceError, match="unknown step") as e:
        client.step("count/nope", b"")
    assert e.value.status == 404
    r = httpx.get(f"{url}/v1/counter/register")
    assert r.status_code == 405 and "error" in r.json()


def test_a_bug_in_a_step_is_a_500_without_details(url):
    r = httpx.post(f"{url}/v1/counter/boom", content=b"", headers={"content-type": "application/octet-stream"})
    assert r.status_code == 500
    assert r.json() == {"error": "internal server error", "type": "InternalError"}
    assert b"secret" not in r.content and b"Traceback" not in r.content


def test_store_failure_is_a_503_without_details(tmp_path):
    broken = open_store(f"sqlite:///{tmp_path / 'b.db'}")
    with serving(create_app(broken, [Counter(broken)])) as base, ServiceClient(base, "counter") as c:
        assert c.healthz()["protocols"] == ["counter"]
        broken.close()
        with pytest.raises(ServiceError, match="^template store unavailable$") as e:
            c.step("register", b"ivan:x")
        assert e.value.status == 503
        assert httpx.get(f"{base}/healthz").status_code == 503


def test_concurrent_flows(url):
    def flow(k):
        with ServiceClient(url, "counter") as c:
            c.step("register", f"p{k}:v{k}".encode())
            assert c.step("count/start", f"p{k}".encode()) == f"v{k}".encode()
            for i in range(1, 4):
                assert c.step("count/next", b"+") == str(i).encode()
            return c.step("count/finish", b"")

    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(flow, range(12))) == [b"total 3"] * 12


def test_openapi_and_docs(url):
    spec = httpx.get(f"{url}/openapi.json").json()
    op = spec["paths"]["/v1/{protocol}/{step}"]["post"]
    assert "application/octet-stream" in op["requestBody"]["content"]
    assert {"400", "404", "409", "413", "415"} <= set(op["responses"])
    docs = httpx.get(f"{url}/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_client_reports_an_unreachable_service():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with ServiceClient(f"http://127.0.0.1:{port}", "counter") as c, \
            pytest.raises(ServiceError, match="cannot reach") as e:
        c.step("register", b"a:b")
    assert e.value.status == 0


_SERVE = """
import sys
from privface.service import registry
registry.PROTOCOLS["counter"] = "test_service:Counter"
from privface.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_privface_serve_runs_and_shuts_down_gracefully(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "serve.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    proc = subprocess.Popen([sys.executable, "-c", _SERVE, "serve", "--protocol", "counter",
                             "--db", f"sqlite:///{db}", "--port", str(port), "--log-level", "warning", "--no-auth"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        assert health == {"status": "ok", "protocols": ["counter"]}
        with ServiceClient(f"http://127.0.0.1:{port}", "counter") as c:
            assert c.step("register", b"jane:x") == b"new"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"127.0.0.1:{port}" in err and "store closed" in err and "Traceback" not in err
    assert "WARNING: --no-auth" in err and "API keys off" in err
    with open_store(f"sqlite:///{db}") as s:
        assert s.get("counter", "jane") == b"x"


def test_privface_serve_names_an_unavailable_protocol(capsys):
    from privface.cli import main

    assert main(["serve", "--protocol", "nosuch", "--db", "sqlite://"]) == 2
    assert "protocol nosuch is not available" in capsys.readouterr().err


def test_registry_reports_a_failing_import(monkeypatch):
    from privface.errors import PrivfaceError
    from privface.service import registry

    monkeypatch.setitem(registry.PROTOCOLS, "ghost", "privface.no_such_module:Ghost")
    with pytest.raises(PrivfaceError, match="protocol ghost is not available"):
        registry.load_service("ghost", None)



def test_a_flow_over_the_postgresql_store():
    pg = os.environ.get("PRIVFACE_TEST_PG_URL")
    if not pg:
        pytest.skip("PRIVFACE_TEST_PG_URL is not set (.ci/with-postgres sets it)")
    with open_store(pg) as s, serving(create_app(s, [Counter(s, "counterpg")])) as base, \
            ServiceClient(base, "counterpg") as c:
        c.step("register", b"liam:v1")
        assert c.step("register", b"liam:v2") == b"replaced"
        assert c.step("count/start", b"liam") == b"v2"
        assert c.step("count/next", b"+") == b"1"
        assert s.get("counterpg", "liam") == b"v2"
        s.delete("counterpg", "liam")
        c.reset()
        with pytest.raises(RemoteNotEnrolledError):
            c.step("count/start", b"liam")
