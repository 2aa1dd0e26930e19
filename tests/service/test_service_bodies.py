"""Stalled and slow request bodies on every step (issue 35 A2), the audit of streamed and aliased steps (A6), over
real loopback HTTP: a body is cut with 408 past its deadline or below the minimum rate in a window (and its
connection closed); one caller's requests and body bytes in flight are capped (429 before the body is read) while
others still get in; `privface serve --max-connections` caps the whole server; a streamed answer whose client goes
away stops there and is audited as cut, with the exchange's whole duration; an old step name is audited as called."""
import logging
import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

from privface.service.app import DEFAULT_BODY_LIMITS, create_app
from privface.service.auth import ApiKeys
from privface.service.base import StepResult
from privface.service.launch import serve_in_thread, serve_subprocess
from privface.service.limits import BodyLimits, InFlight
from privface.store.sqlite import SQLiteStore
from privface.wire import framed

OCTETS = {"content-type": "application/octet-stream"}


class Sink:
    """``upload`` takes up to 1 MiB and answers its size; ``pieces`` streams n pieces of 64 kB, ``pause`` s apart
    (``produced`` counts them); ``new`` is also answered under its old name ``old``."""

    name, steps, first_steps = "sink", ("upload", "pieces", "new"), ("upload", "pieces", "new")
    max_body = {"upload": 1 << 20}
    scopes = {"upload": "verify", "pieces": "verify", "new": "verify"}
    step_aliases = {"old": "new"}

    def __init__(self, pause: float = 0.05) -> None:
        self.pause, self.produced, self.closed = pause, 0, threading.Event()

    def handle(self, step, body, state):
        if step != "pieces":
            return StepResult(str(len(body)).encode())

        def pieces():
            try:
                for i in range(body[0]):
                    time.sleep(self.pause)
                    self.produced += 1
                    yield framed(bytes([i]) * 65536)
            finally:
                self.closed.set()
        return StepResult(b"", stream=pieces())


@pytest.fixture
def store(tmp_path):
    with SQLiteStore(tmp_path / "s.db") as s:
        yield s


def _serve(store, svc=None, **kw):
    return serve_in_thread(create_app(store, [svc or Sink()], keys=ApiKeys(store), **kw))


def _post(url, key, step, length) -> socket.socket:
    """A raw POST of a body of ``length`` bytes whose headers only are sent: the caller sends (or not) the rest."""
    u = urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall((f"POST /v1/sink/{step} HTTP/1.1\r\nhost: x\r\ncontent-type: application/octet-stream\r\n"
               f"authorization: Bearer {key}\r\ncontent-length: {length}\r\n\r\n").encode())
    return s


def _answer(s: socket.socket, timeout: float = 10) -> tuple[int, bytes, bool]:
    """(status, head and body read, whether the server then closed the connection)."""
    s.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        more = s.recv(65536)
        if not more:
            break
        data += more
    s.settimeout(1)
    closed = False
    try:
        while more := s.recv(65536):
            data += more
        closed = True
    except TimeoutError:
        pass
    return int(data.split(b" ", 2)[1]), data, closed


def test_a_slow_loris_body_is_cut_with_408_and_its_connection_closed(store):
    """A body trickling in below the minimum rate: 408 after its first window, the connection closed; a body at a
    decent rate, and one that takes longer than a window in total but keeps the rate, still get through."""
    limits = BodyLimits(timeout=30, min_rate=20_000, rate_window=0.5)
    with _serve(store, body_limits=limits) as url:
        key = ApiKeys(store).create("verify")[1]
        s = _post(url, key, "upload", 100_000)
        t0 = time.monotonic()
        try:
            for _ in range(30):  # 100 B every 0.1 s: 1 kB/s
                s.sendall(b"x" * 100)
                time.sleep(0.1)
        except OSError:
            pass  # closed by the server
        status, data, closed = _answer(s)
        assert status == 408 and b"BodyTimeout" in data and b"slower than" in data and closed
        assert time.monotonic() - t0 < 5
        s = _post(url, key, "upload", 120_000)
        for _ in range(12):  # 10 kB every 0.1 s: 100 kB/s, 1.2 s in all
            s.sendall(b"x" * 10_000)
            time.sleep(0.1)
        status, data, _ = _answer(s)
        assert status == 200 and data.endswith(b"120000")
    assert DEFAULT_BODY_LIMITS.timeout > 0 and DEFAULT_BODY_LIMITS.min_rate > 0  # on by default


def test_a_body_past_its_deadline_is_cut_whatever_its_rate(store):
    with _serve(store, body_limits=BodyLimits(timeout=1.0, min_rate=0, rate_window=10)) as url:
        s = _post(url, ApiKeys(store).create("verify")[1], "upload", 1 << 20)
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 3:
                s.sendall(b"x" * 1000)
                time.sleep(0.05)
        except OSError:
            pass
        status, data, closed = _answer(s)
        assert status == 408 and b"within 1 s" in data and closed


def test_one_callers_stalled_uploads_are_capped_and_others_still_get_in(store):
    """With 3 requests in flight per caller, a fourth stalled upload of the same key is refused with 429 before its
    body is read; another key is served; a finished request frees its slot. Body bytes in flight: a second upload
    whose declared size would pass the cap is refused at once, a small one is not, and a caller's only upload may be
    larger than the cap (up to its step's own cap)."""
    inflight = InFlight(max_requests=3, max_bytes=300_000)
    with _serve(store, in_flight=inflight) as url:
        (ka, a), b = ApiKeys(store).create("verify"), ApiKeys(store).create("verify")[1]

        def wait_for(n: int) -> None:
            deadline = time.monotonic() + 10
            while inflight.requests(f"key:{ka.key_id}") != n:
                assert time.monotonic() < deadline
                time.sleep(0.02)

        stalled = [_post(url, a, "upload", 1000) for _ in range(3)]
        wait_for(3)
        s = _post(url, a, "upload", 1000)  # nothing of the body sent: the answer comes anyway
        status, data, _ = _answer(s, 5)
        assert status == 429 and b"3 requests in flight" in data and b"retry-after" in data.lower()
        r = httpx.post(f"{url}/v1/sink/upload", content=b"x" * 10, timeout=10,
                       headers={**OCTETS, "authorization": f"Bearer {b}"})
        assert r.status_code == 200
        stalled[0].sendall(b"x" * 1000)
        assert _answer(stalled[0])[0] == 200
        s = _post(url, a, "upload", 5)
        s.sendall(b"hello")
        assert _answer(s)[0] == 200  # a slot of its own again
        for s in stalled[1:]:
            s.close()
        wait_for(0)
        big = _post(url, a, "upload", 900_000)  # alone: may pass max_bytes
        big.sendall(b"x" * 1000)
        wait_for(1)
        s = _post(url, a, "upload", 200_000)
        status, data, _ = _answer(s, 5)
        assert status == 429 and b"bytes of request bodies in flight" in data
        big.sendall(b"x" * 899_000)
        assert _answer(big)[0] == 200


def test_privface_serve_caps_its_connections(tmp_path):
    """`privface serve --max-connections 3`: with three connections open, the next request gets 503."""
    db = f"sqlite:///{tmp_path / 's.db'}"
    with serve_subprocess("im2020", db, ["--max-connections", "3", "--insecure-test-params"]) as url:
        u = urlsplit(url)
        held = [socket.create_connection((u.hostname, u.port), timeout=10) for _ in range(3)]
        try:
            time.sleep(0.3)
            assert httpx.get(f"{url}/healthz", timeout=10).status_code == 503
        finally:
            for s in held:
                s.close()
        time.sleep(0.3)
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200


def _audit(caplog, n=1, timeout=5.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while len(got := [r.fields for r in caplog.records if r.name == "privface.audit"]) < n:
        assert time.monotonic() < deadline, got
        time.sleep(0.05)
    return got


def test_a_stream_cut_by_its_client_stops_and_is_audited_as_cut(store, caplog):
    """The client reads two of 40 pieces and goes away: the service stops computing pieces (uvicorn drops what is sent
    to a closed connection without a word, so before it went on to the end), and the audit record says cut
    (error StreamEnded), not a 200 allowed; a whole stream is audited with its whole duration."""
    caplog.set_level(logging.INFO, logger="privface.audit")
    svc = Sink(pause=0.1)
    with _serve(store, svc) as url:
        key = ApiKeys(store).create("verify")[1]
        s = _post(url, key, "pieces", 1)
        s.sendall(bytes([40]))
        got = b""
        while len(got) < 2 * 65536:
            got += s.recv(65536)
        s.close()
        assert svc.closed.wait(10)
        assert svc.produced < 10
        cut = _audit(caplog)[-1]
        assert cut["decision"] == "cut" and cut["error"] == "StreamEnded" and cut["step"] == "pieces"
        t0 = time.monotonic()
        r = httpx.post(f"{url}/v1/sink/pieces", content=bytes([10]), timeout=30,
                       headers={**OCTETS, "authorization": f"Bearer {key}"})
        took = time.monotonic() - t0
        assert r.status_code == 200 and len(r.content) == 10 * (65536 + 4)
        whole = _audit(caplog, 2)[-1]
        assert whole["decision"] == "allowed" and whole["status"] == 200 and not whole["error"]
        assert 1000 <= whole["ms"] <= took * 1000 + 50  # ten pieces 0.1 s apart: the whole exchange


def test_an_old_step_name_is_audited_as_called(store, caplog):
    """A deprecated alias (im2020's register for enrol) runs the canonical step; the audit names both."""
    caplog.set_level(logging.INFO, logger="privface.audit")
    with _serve(store) as url:
        key = ApiKeys(store).create("verify")[1]
        for route in ("old", "new"):
            r = httpx.post(f"{url}/v1/sink/{route}", content=b"abc", timeout=10,
                           headers={**OCTETS, "authorization": f"Bearer {key}"})
            assert r.status_code == 200 and r.content == b"3"
        old, new = _audit(caplog, 2)[-2:]
        assert (old["step"], old["route"]) == ("new", "old") and (new["step"], new["route"]) == ("new", "new")
