"""Issue 35 A3: /app/ files are streamed, cached by ETag and limited per client address, over loopback HTTP.
Before the fix every /app/models/<name> request read the whole file into memory: 30 clients that never read the
22 MB ResNet took an im2020 server from 111 to 733 MiB."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from privface.protocols.im2020 import Im2020Params
from privface.service import web
from privface.service.app import create_app
from privface.service.bindings.im2020 import Im2020Service
from privface.service.launch import free_port, serve_in_thread
from privface.store import open_store

MODEL_BYTES = 22 * 1024 * 1024
SERVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    import uvicorn
    from privface.protocols.im2020 import Im2020Params
    from privface.service import web
    from privface.service.app import create_app
    from privface.service.bindings.im2020 import Im2020Service
    from privface.store import open_store

    root, port = Path(sys.argv[1]), int(sys.argv[2])
    web.WEBAPP = root / "webapp"
    web.model_files = lambda: {"resnet.onnx": root / "resnet.onnx"}
    store = open_store("sqlite://")
    app = create_app(store, [Im2020Service(store, params=Im2020Params.toy())])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
""")


def _page(root: Path) -> Path:
    (root / "webapp").mkdir()
    (root / "webapp" / "index.html").write_text("<!doctype html><title>t</title>")
    model = root / "resnet.onnx"
    model.write_bytes(os.urandom(MODEL_BYTES))
    return model


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _stalled(port: int, path: str, source: str = "127.0.0.1") -> socket.socket:
    """A client that asks for ``path`` and never reads the answer (a small receive buffer)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return s


def _started(s: socket.socket, timeout: float = 30) -> bytes:
    """The first bytes of the answer, left in the socket (MSG_PEEK): the server has begun to answer."""
    s.settimeout(timeout)
    return s.recv(64, socket.MSG_PEEK)


def test_stalled_model_downloads_keep_the_server_small(tmp_path):
    """30 clients (30 addresses, so the per-address limit plays no part) ask for the 22 MB model and never read."""
    _page(tmp_path)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(tmp_path), str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    socks: list[socket.socket] = []
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
                time.sleep(0.05)
        assert len(httpx.get(f"{url}/app/models/resnet.onnx", timeout=30).content) == MODEL_BYTES  # warm-up
        before = _rss_mib(proc.pid)
        for i in range(30):
            socks.append(_stalled(port, "/app/models/resnet.onnx", f"127.0.0.{i + 2}"))
        assert all(_started(s).startswith(b"HTTP/1.1 200") for s in socks)
        time.sleep(1.0)
        after = _rss_mib(proc.pid)
        print(json.dumps({"figure": "web_static_rss", "clients": 30, "file_mib": MODEL_BYTES / 2**20,
                          "rss_before_mib": round(before, 1), "rss_after_mib": round(after, 1),
                          "load": os.getloadavg()[0]}))
        assert after - before < 40, (before, after)  # read whole, 30 × 22 MB would be 660 MiB
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def page(tmp_path, monkeypatch):
    model = _page(tmp_path)
    monkeypatch.setattr(web, "WEBAPP", tmp_path / "webapp")
    monkeypatch.setattr(web, "model_files", lambda: {"resnet.onnx": model})
    store = open_store("sqlite://")
    with serve_in_thread(create_app(store, [Im2020Service(store, params=Im2020Params.toy())])) as url:
        yield url, model


def test_etag_and_304(page):
    url, model = page
    with httpx.Client(base_url=url, timeout=30) as c:
        r = c.get("/app/models/resnet.onnx")
        etag = r.headers["etag"]
        assert r.status_code == 200 and r.content == model.read_bytes()
        assert etag == f'"{hashlib.sha256(r.content).hexdigest()[:32]}"' and "max-age" in r.headers["cache-control"]
        again = c.get("/app/models/resnet.onnx", headers={"if-none-match": etag})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
        index = c.get("/app/")
        assert index.headers["cache-control"] == "no-cache" and index.headers["etag"]
        assert index.headers["content-security-policy"] == web.CSP
        same = c.get("/app/", headers={"if-none-match": f'"other", {index.headers["etag"]}'})
        assert same.status_code == 304 and same.headers["content-security-policy"] == web.CSP
        assert c.get("/app/", headers={"if-none-match": '"other"'}).status_code == 200


def test_per_address_limit_and_slow_readers(page, monkeypatch):
    url, _ = page
    port = int(url.rsplit(":", 1)[1])
    socks = [_stalled(port, "/app/models/resnet.onnx") for _ in range(web.RESPONSES_PER_ADDRESS)]
    try:
        assert all(_started(s).startswith(b"HTTP/1.1 200") for s in socks)
        r = httpx.get(f"{url}/app/", timeout=10)
        assert r.status_code == 429 and r.headers["retry-after"] == "1" and "too many" in r.text
        other = _stalled(port, "/app/", "127.0.0.2")  # another address is not held up
        assert _started(other).startswith(b"HTTP/1.1 200")
        other.close()
    finally:
        for s in socks:
            s.close()
    deadline = time.monotonic() + 10
    while httpx.get(f"{url}/app/", timeout=10).status_code == 429:  # closed connections give their slots back
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # a client that takes nothing for SEND_TIMEOUT s loses the connection (and its slot)
    monkeypatch.setattr(web, "SEND_TIMEOUT", 0.5)
    s = _stalled(port, "/app/models/resnet.onnx")
    try:
        assert _started(s).startswith(b"HTTP/1.1 200")
        time.sleep(2.0)
        got, s_timeout = 0, time.monotonic() + 20
        s.settimeout(20)
        while piece := s.recv(1 << 20):
            got += len(piece)
            assert time.monotonic() < s_timeout
        assert got < MODEL_BYTES  # cut short, the connection closed by the server
    finally:
        s.close()
    assert httpx.get(f"{url}/app/", timeout=10).status_code == 200
