"""Running the service on a free loopback port: `serve_subprocess` (`privface serve` in a child process,
for benchmarks and the demo: it does not share the client's GIL, so timings are not distorted) and
`serve_in_thread` (an app in a thread of this process, for tests)."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence

import httpx

from ..errors import PrivfaceError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_in_thread(app, *, port: int = 0, **config) -> Iterator[str]:
    """Run an ASGI `app` with uvicorn on a loopback port (``port``; 0: a free one) in a thread; yields the base URL.
    `config`: more uvicorn.Config options (e.g. timeout_keep_alive, or ssl_certfile/ssl_keyfile for an https URL)."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        scheme = "https" if config.get("ssl_certfile") else "http"
        yield f"{scheme}://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def serve_subprocess(protocol: str, db: str, options: Sequence[str] = (), *,
                     start_timeout: float = 60.0, auth: bool = False, processes: list | None = None) -> Iterator[str]:
    """Run `privface serve --protocol … --db … OPTIONS` on a free port; yields its base URL and stops it
    (SIGTERM, graceful) on exit. Without `auth` the child runs with `--no-auth` (loopback benchmarks and
    the demo on a throw-away store); with it, create keys in `db` first (`ApiKeys`). `processes` (a list)
    receives the child's Popen, e.g. for its pid."""
    port = free_port()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "privface.cli", "serve", "--protocol", protocol,
                                 "--db", db, "--port", str(port), "--log-level", "warning",
                                 *(() if auth else ("--no-auth",)), *options],
                                stdout=subprocess.DEVNULL, stderr=err, text=True)
        if processes is not None:
            processes.append(proc)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + start_timeout
            while True:
                try:
                    httpx.get(f"{url}/healthz", timeout=2)
                    break
                except httpx.HTTPError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err.seek(0)
                        raise PrivfaceError(f"privface serve did not start: {err.read()[-500:]}") from None
                    time.sleep(0.05)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
