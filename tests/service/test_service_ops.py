"""Operations of the service (issue 8 §6): /metrics (Prometheus text, scope-protected), the JSON logs and audit
trail of a real `privface serve` process (and that no key, template, ciphertext or score reaches them),
graceful shutdown on SIGTERM with a request in flight, and configuration by TOML file and environment."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from urllib.parse import quote

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_service_auth import ScopedCounter

from privface.cli import _subparser, build_parser, main
from privface.errors import PrivfaceError
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import AuthChallenge, AuthResult, Client, Im2020Params, RevokeRequest
from privface.service import config
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.client import ServiceClient, ServiceError
from privface.service.launch import free_port, serve_in_thread
from privface.service.observe import AUDIT_FIELDS
from privface.store.sqlite import SQLiteStore

OCTETS = {"content-type": "application/octet-stream"}
TOY = Im2020Params.toy()


def _samples(text: str) -> dict:
    """{(name, sorted label items): value} of a Prometheus text exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_metrics_count_steps_and_need_the_metrics_or_admin_scope(tmp_path):
    with SQLiteStore(tmp_path / "m.db") as store:
        keys = ApiKeys(store)
        enrol, verify, scraper, admin = (keys.create(s)[1] for s in ("enrol", "verify", "metrics", "admin"))
        app = create_app(store, [ScopedCounter(store)], keys=keys)
        with serve_in_thread(app) as url:
            def get(key=None):
                return httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {key}"} if key else {})

            assert get().status_code == 401 and get().json()["type"] == "AuthError"
            assert get(verify).status_code == 403 and get(verify).json()["type"] == "ScopeError"
            with ServiceClient(url, "counter", api_key=enrol) as c:
                for i in range(3):
                    c.step("register", f"m{i}:x".encode())
            with ServiceClient(url, "counter", api_key=verify) as c:
                c.step("count/start", b"m0")  # one session stays open
                with pytest.raises(ServiceError):
                    c.step("register", b"no:x")  # 403
            httpx.post(f"{url}/v1/nosuch/{'x' * 300}", content=b"",
                       headers={**OCTETS, "authorization": f"Bearer {enrol}"})
            r = get(scraper)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
            assert get(admin).status_code == 200
            m = _samples(r.text)
            ok = ("privface_requests_total", (("protocol", "counter"), ("status", "200"), ("step", "register")))
            assert m[ok] == 3
            total = lambda p, c, t: m[("privface_requests_total", (("protocol", p), ("status", c), ("step", t)))]  # noqa: E731
            assert total("counter", "403", "register") == 1 and total("unknown", "404", "unknown") == 1
            assert m[("privface_request_seconds_count", (("protocol", "counter"), ("step", "register")))] == 4
            assert m[("privface_sessions_open", ())] == 1
            assert ("privface_rate_limited_total", ()) in m
    with SQLiteStore(tmp_path / "open.db") as store, serve_in_thread(create_app(store, [ScopedCounter(store)])) as url:
        assert httpx.get(f"{url}/metrics").status_code == 200  # keys off: everything is open, /metrics too


# ---------------------------------------------------------------- a real server process


def _serve(args, env=None):
    """`privface serve ARGS` in a child process; waits for /healthz; returns (proc, url)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "privface.cli", "serve", "--port", str(port), *args],
                            env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=2)
            return proc, url
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"privface serve did not start: {proc.communicate()[1][-2000:]}")
            time.sleep(0.05)


def _stop(proc) -> list[dict]:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in err.splitlines()]  # every line is one JSON object


@pytest.mark.parametrize("level, to_file", [("debug", False), ("warning", False), ("warning", True)])
def test_audit_trail_of_a_real_server_holds_no_secrets(tmp_path, level, to_file):
    """Every /v1 call leaves one audit record — on stderr, or with `audit-log` as one JSON line in that file —
    at every log level, and neither the log nor the audit file holds a key, template, ciphertext or score."""
    db = tmp_path / "audit.db"
    trail = tmp_path / "logs" / "audit.jsonl"
    trail.parent.mkdir()
    with SQLiteStore(db) as store:
        keys = ApiKeys(store)
        (enrol_key, enrol), (verify_key, verify), (admin_key, admin), (_, scraper) = (
            keys.create(s, name=f"{s}-party") for s in ("enrol", "verify", "admin", "metrics"))
    cfg = tmp_path / "serve.toml"
    cfg.write_text(f'protocol = ["im2020"]\ndb = "sqlite:///{db}"\nlog-level = "{level}"\n'
                   + (f'audit-log = "{trail}"\n' if to_file else ""))
    proc, url = _serve(["--config", str(cfg), "--insecure-test-params"], env={"PRIVFACE_LOCKOUT_FAILURES": "2"})
    client = Client("alice", TOY, workers=1)
    rng = np.random.default_rng(7)
    ref, other = attacks.face_like_template(TOY, rng), attacks.face_like_template(TOY, rng)
    secrets = [enrol.split("_", 2)[2], verify.split("_", 2)[2], admin.split("_", 2)[2], scraper.split("_", 2)[2]]
    try:
        reg = client.enrol(ref)
        with ServiceClient(url, "im2020", api_key=enrol) as c:
            c.step("enrol", reg.to_bytes())
        secrets += [str(reg.pk_n), f"{reg.pk_n:x}", str(reg.c_beta[0]), str(reg.c_a[0]), reg.to_bytes()[-32:].hex(),
                    json.dumps([int(v) for v in ref[:12]])]
        results = []
        for probe in (ref, other, other, other):
            with ServiceClient(url, "im2020", api_key=verify) as c:
                start = client.auth_start(probe)
                try:
                    challenge = AuthChallenge.from_bytes(c.step("auth/start", start.to_bytes()))
                except ServiceError as e:
                    results.append(e.status)
                    continue
                finish = client.auth_finish(challenge)
                results.append(AuthResult.from_bytes(c.step("auth/finish", finish.to_bytes())).accepted)
                secrets += [str(start.c_beta[0]), str(challenge.alpha), str(challenge.beta[0]),
                            str(finish.blinded_score)]
        assert results == [True, False, False, 429]  # PRIVFACE_LOCKOUT_FAILURES=2 reached the server
        with ServiceClient(url, "im2020", api_key=admin) as c:
            c.step("revoke", RevokeRequest("alice").to_bytes())
        assert "privface_attempts_total" in httpx.get(f"{url}/metrics",
                                                      headers={"authorization": f"Bearer {scraper}"}).text
    finally:
        log = _stop(proc)
    if level == "warning":  # the level holds for everything but the audit trail and the start/stop lines
        assert not [r for r in log if r["level"] in ("debug", "info")
                    and r["logger"] not in ("privface.audit", "privface.serve")]
    if to_file:
        assert not [r for r in log if r.get("event") == "audit"]  # the trail went to the file only
        assert trail.stat().st_mode & 0o777 == 0o600
        records = [json.loads(line) for line in trail.read_text().splitlines()]  # one JSON object a line
    else:
        records = [r for r in log if r.get("event") == "audit"]
    assert all(r["event"] == "audit" and set(r) == {"ts", "level", "logger", "msg", "event", *AUDIT_FIELDS}
               for r in records)  # no other field: no body, template, key or score
    audit = [(r["step"], r["subject"], r["decision"], r["status"], r["party"], r["party_name"]) for r in records]
    assert audit == [("enrol", "alice", "allowed", 200, enrol_key.key_id, "enrol-party"),
                     ("auth/start", "alice", "allowed", 200, verify_key.key_id, "verify-party"),
                     ("auth/finish", "alice", "accepted", 200, verify_key.key_id, "verify-party"),
                     *[("auth/start", "alice", "allowed", 200, verify_key.key_id, "verify-party"),
                       ("auth/finish", "alice", "rejected", 200, verify_key.key_id, "verify-party")] * 2,
                     ("auth/start", "alice", "refused", 429, verify_key.key_id, "verify-party"),
                     ("revoke", "alice", "allowed", 200, admin_key.key_id, "admin-party")]
    assert all(r["ts"].endswith("Z") and r["client"] == "127.0.0.1" and r["protocol"] == "im2020" for r in records)
    assert records[-2]["error"] == "LimitError"
    text = "\n".join(json.dumps(r) for r in log + records)
    assert len(secrets) > 20 and not [s for s in secrets if s in text]
    assert any("stopped; store closed" in r["msg"] for r in log)


def test_sigterm_lets_the_request_in_flight_finish(tmp_path):
    db = tmp_path / "g.db"
    proc, url = _serve(["--protocol", "im2020", "--db", f"sqlite:///{db}", "--insecure-test-params", "--no-auth",
                        "--log-format", "text"])
    body = Client("bea", TOY, workers=1).enrol(attacks.face_like_template(TOY, np.random.default_rng(3))).to_bytes()
    host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
    try:
        with socket.create_connection((host, port), timeout=30) as s:
            s.sendall(b"POST /v1/im2020/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:100])
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)  # the upload is half done
            time.sleep(1.0)
            assert proc.poll() is None, "the server quit with a request in flight"
            with pytest.raises(OSError):  # no new connections while draining
                socket.create_connection((host, port), timeout=2).close()
            s.sendall(body[100:])
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "stopped; store closed" in err and "Traceback" not in err
    assert "shutdown: dropping 0 open sessions" in err
    with SQLiteStore(db) as store:
        assert store.get("im2020", "bea") is not None


# ---------------------------------------------------------------- configuration


def _parse(argv, environ=None):
    parser = build_parser()
    config.apply(_subparser(parser, "serve"), argv[1:], environ or {})
    return parser.parse_args(argv)


def test_config_file_environment_and_command_line_precedence(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('protocol = ["gsm"]\nrole = "terminal"\nport = 9001\nrate_limit = 5.5\nlog-format = "text"\n'
                   'host = "0.0.0.0"\n')
    a = _parse(["serve", "--config", str(cfg)])
    assert (a.protocol, a.role, a.port, a.rate_limit, a.log_format, a.host) == (
        ["gsm"], "terminal", 9001, 5.5, "text", "0.0.0.0")
    a = _parse(["serve", "--config", str(cfg), "--port", "9003"],
               {"PRIVFACE_PORT": "9002", "PRIVFACE_PROTOCOL": "im2020,kolberg", "PRIVFACE_LOCKOUT_MAX": "60"})
    assert (a.port, a.protocol, a.lockout_max, a.role) == (9003, ["im2020", "kolberg"], 60.0, "terminal")
    a = _parse(["serve", "--protocol", "im2020"], {"PRIVFACE_NO_AUTH": "1", "PRIVFACE_INSECURE_TEST_PARAMS": "1",
                                                   "PRIVFACE_DATA": "/elsewhere"})
    assert a.no_auth is False and a.insecure_test_params is False  # never from the environment
    assert a.rate_limit == 100.0 and a.lockout_failures == 5 and a.log_format == "json"  # built-in defaults
    with pytest.raises(SystemExit):  # --protocol still required when nothing gives it
        _parse(["serve"])


@pytest.mark.parametrize("content, env, message", [
    ('prot = ["im2020"]', {}, "unknown option 'prot'"),
    ('protocol = ["im2020"]\nport = "x"', {}, "port: 'x' is not a valid int"),
    ('protocol = ["im2020"]\nlog-format = "xml"', {}, "must be one of json, text"),
    ('protocol = "im2020"\nno-auth = true', {}, "unknown option 'no-auth'"),
    ('protocol = ["im2020"', {}, "not valid TOML"),
    ('protocol = ["im2020"]', {"PRIVFACE_RATE_LIMIT": "fast"}, "PRIVFACE_RATE_LIMIT: 'fast' is not a valid float"),
])
def test_bad_configuration_is_refused(tmp_path, capsys, monkeypatch, content, env, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(content)
    with pytest.raises(PrivfaceError, match=message.replace("(", r"\(").replace("[", r"\[")):
        _parse(["serve", "--config", str(cfg)], env)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["serve", "--config", str(cfg)]) == 2
    assert message in capsys.readouterr().err


def test_an_audit_log_that_cannot_be_opened_stops_the_server(tmp_path):
    """PRIVFACE_AUDIT_LOG reaches serve; a path it cannot create is a clear usage error before anything runs."""
    bad = tmp_path / "missing-dir" / "audit.jsonl"
    r = subprocess.run([sys.executable, "-m", "privface.cli", "serve", "--protocol", "im2020", "--no-auth",
                        "--db", f"sqlite:///{tmp_path / 'x.db'}", "--port", str(free_port())],
                       env={**os.environ, "PRIVFACE_AUDIT_LOG": str(bad)}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and f"cannot open --audit-log {bad}: No such file or directory" in r.stderr
    assert not (tmp_path / "x.db").exists()


def test_text_log_lines_cannot_be_forged_through_the_url(tmp_path):
    """Issue 17 §10: an unauthenticated request whose protocol segment holds a newline and a fake audit record
    leaves exactly one text line per call, the forged text escaped or quoted, never a line of its own."""
    proc, url = _serve(["--protocol", "im2020", "--db", f"sqlite:///{tmp_path / 't.db'}", "--insecure-test-params",
                        "--log-format", "text"])
    forged = "im2020 decision=accepted\n2026-01-01 00:00:00,000 info privface.audit: im2020/auth/finish accepted"
    try:
        for protocol in (forged, "x y=z"):
            r = httpx.post(f"{url}/v1/{quote(protocol, safe='')}/auth/finish", content=b"x",
                           headers={"content-type": "application/octet-stream"})
            assert r.status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    audit_lines = [line for line in err.splitlines() if "privface.audit" in line]
    assert len(audit_lines) == 2, err
    for line in audit_lines:
        assert "privface.audit: ?/" in line and " refused event=audit" in line and " decision=refused " in line
        assert 'protocol="' in line  # the URL's text only as one quoted value
    assert not any(line.startswith("2026-01-01") for line in err.splitlines())
