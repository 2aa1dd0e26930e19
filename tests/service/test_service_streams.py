"""Streamed steps of the service (issue 20): answers sent piece by piece (``StepResult.stream``), frame-stream bodies
whose first frame is checked by the service (``stream_heads``/``admit``) before the rest is read, and a stalled
client dropped after ``STREAM_SEND_TIMEOUT`` — over real loopback HTTP with a test-only service."""
import asyncio
import logging
import threading
import time

import pytest

from privface.errors import ProtocolError
from privface.service import app as app_module
from privface.service.app import create_app
from privface.service.base import MessageError, StepResult
from privface.service.client import ServiceClient, ServiceError
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore
from privface.wire import framed


class Streamer:
    """``pieces``: answers n frames of 1 kB (n = the body's one byte); ``upload``: a frame stream whose first
    frame says how many bytes the whole body may have (refused if it is not b"size:<n>")."""

    name, steps, first_steps = "streamer", ("pieces", "upload"), ("pieces", "upload")
    max_body = {"upload": 1 << 20}
    stream_heads = {"upload": 64}

    def __init__(self) -> None:
        self.closed, self.uploads, self.admitted = threading.Event(), [], []

    def admit(self, step, head):
        if not head.startswith(b"size:"):
            raise MessageError("not a size")
        self.admitted.append(head)
        return int(head[5:])

    def handle(self, step, body, state):
        if step == "upload":
            self.uploads.append(len(body))
            return StepResult(b"ok")

        def pieces():
            try:
                for i in range(body[0]):
                    yield framed(bytes([i]) * 1024)
            finally:
                self.closed.set()
        return StepResult(b"", stream=pieces())


@pytest.fixture
def served(tmp_path):
    with SQLiteStore(tmp_path / "s.db") as store:
        svc = Streamer()
        with serve_in_thread(create_app(store, [svc])) as url:
            yield url, svc


def test_a_streamed_answer_is_one_exchange_read_frame_by_frame(served):
    url, svc = served
    with ServiceClient(url, "streamer") as http:
        with http.exchange("pieces", bytes([50])) as answer:
            got = [answer.frame(1024) for _ in range(50)]
        assert got == [bytes([i]) * 1024 for i in range(50)]
        assert len(http.stats) == 1 and http.stats[0].response_bytes == 50 * 1028
        with pytest.raises(ProtocolError, match="after the last"), http.exchange("pieces", bytes([3])) as answer:
            answer.frame()  # two frames left unread: the exchange is refused
    assert svc.closed.wait(5)


def test_a_frame_stream_body_is_read_only_as_far_as_its_head_allows(served):
    url, svc = served
    body = framed(b"size:1000") + bytes(1000 - 13)
    with ServiceClient(url, "streamer") as http:
        assert http.step("upload", body) == b"ok" and svc.uploads == [1000]
        for bad, status in ((body + b"x", 413), (framed(b"nope") + bytes(10), 400), (framed(b"x" * 65), 413),
                            (b"\x00\x00", 400), (framed(b"size:99999999") + bytes(10), 200)):
            if status == 200:
                assert http.step("upload", bad) == b"ok"  # admit may allow more than the body has; the cap holds
                continue
            with pytest.raises(ServiceError) as e:
                http.step("upload", bad)
            assert e.value.status == status, bad[:20]
    assert svc.uploads == [1000, 27]


def test_a_client_that_stops_reading_is_dropped(monkeypatch):
    """A stalled send gives up after STREAM_SEND_TIMEOUT and closes the service's iterator (what it holds for the
    stream goes with it)."""
    monkeypatch.setattr(app_module, "STREAM_SEND_TIMEOUT", 0.2)
    closed = threading.Event()

    def pieces():
        try:
            while True:
                yield b"x" * 1024
        finally:
            closed.set()

    sent = []

    async def send(message):
        sent.append(message["type"])
        if message["type"] == "http.response.body" and len(sent) > 3:
            await asyncio.sleep(3600)  # the client no longer reads

    async def receive():
        await asyncio.sleep(3600)

    stream, ended = app_module._Stream(pieces(), {}, "test"), []
    stream.ended = ended.append
    asyncio.run(stream({"type": "http"}, receive, send))
    assert closed.is_set() and sent[0] == "http.response.start" and len(sent) == 4 and ended == [False]


def test_a_stream_is_audited_when_it_ends_with_its_outcome(served, caplog):
    """The audit record of a streamed step is written when the stream ends, with the whole duration; a stream cut
    short is recorded as cut (error StreamEnded), not as a 200 that was never delivered (test_service_bodies.py)."""
    url, svc = served
    caplog.set_level(logging.INFO, logger="privface.audit")
    with ServiceClient(url, "streamer") as http:
        with http.exchange("pieces", bytes([5])) as answer:
            [answer.frame(1024) for _ in range(5)]
    assert svc.closed.wait(5)
    deadline = time.monotonic() + 5
    while not [r for r in caplog.records if r.name == "privface.audit"] and time.monotonic() < deadline:
        time.sleep(0.05)
    fields = [r.fields for r in caplog.records if r.name == "privface.audit"]
    assert fields and fields[-1]["status"] == 200 and fields[-1]["decision"] == "allowed" and not fields[-1]["error"]
