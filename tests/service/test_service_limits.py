"""Limits of the service (issue 8 §2) over real loopback HTTP: body caps on every step of every role, session
expiry, the per-subject failure counter (online guessing, seed 000 MC2) with lockout and back-off on every
role that verifies, and the per-client rate limit. Each refusal is a 4xx {"error", "type"} that leaves the
store byte-identical."""
import json
import math
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from test_service import Counter
from test_service_auth import ScopedCounter, _roles

from privface.eval import im2020_attacks as attacks
from privface.protocols.gsm.params import GsmParams
from privface.protocols.gsm.parties import Device
from privface.protocols.im2020 import AuthChallenge, Client, Im2020Params
from privface.protocols.kolberg import KolbergParams
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.gsm import GsmService, provider_key_bytes
from privface.service.bindings.gsm import body_limits as gsm_limits
from privface.service.bindings.im2020 import Im2020Service
from privface.service.bindings.im2020 import body_limits as im2020_limits
from privface.service.bindings.kolberg import KolbergService
from privface.service.client import ServiceClient, ServiceError
from privface.service.clients import im2020 as remote
from privface.service.clients.gsm import DeviceClient, fetch_provider_key
from privface.service.clients.kolberg import KolbergClient
from privface.service.launch import serve_in_thread
from privface.service.limits import LOCKOUT_NAMESPACE, LimitError, Lockout, RateLimiter
from privface.service.sessions import Sessions
from privface.store import open_store
from privface.store.sqlite import SQLiteStore
from privface.templates.fixed_norm import fixed_norm_template

OCTETS = {"content-type": "application/octet-stream"}
TOY = Im2020Params.toy()


def _dump(path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


# ---------------------------------------------------------------- units


def test_token_bucket_refuses_without_spending_and_refills():
    clock = Clock(0.0)
    rl = RateLimiter(2, 3, clock=clock)
    for _ in range(3):
        rl.take("a")
    with pytest.raises(LimitError) as e:
        rl.take("a")
    assert e.value.retry_after == 1
    rl.take("b")  # per client
    clock.t = 0.5  # one token back (2/s)
    rl.take("a")
    with pytest.raises(LimitError):
        rl.take("a")
    clock.t = 100.0  # full again, never more than the burst
    for _ in range(3):
        rl.take("a")
    with pytest.raises(LimitError):
        rl.take("a")
    small = RateLimiter(1, 1, max_clients=4, clock=clock)
    for i in range(50):
        small.take(f"c{i}")
    assert len(small._buckets) <= 4
    with pytest.raises(ValueError):
        RateLimiter(0, 1)


def test_lockout_backoff_doubles_persists_and_resets(tmp_path):
    clock = Clock()
    with SQLiteStore(tmp_path / "l.db") as store:
        lock = Lockout(store, failures=3, base=10, cap=35, clock=clock)
        assert [lock.record("im2020", "ann", False) for _ in range(2)] == [1, 2]
        lock.check("im2020", "ann")  # two rejections: not yet locked
        assert lock.record("im2020", "ann", False) == 3
        with pytest.raises(LimitError) as e:
            lock.check("im2020", "ann")
        assert e.value.retry_after == 10
        lock.check("im2020", "bob")  # per subject
        lock.check("gsm", "ann")  # per protocol
        clock.t += 10
        lock.check("im2020", "ann")  # back-off over: one more try
        lock.record("im2020", "ann", False)
        with pytest.raises(LimitError) as e:
            lock.check("im2020", "ann")
        assert e.value.retry_after == 20  # doubled
        assert [lock.backoff(n) for n in (2, 3, 4, 5, 6, 60)] == [0, 10, 20, 35, 35, 35]  # capped
    with SQLiteStore(tmp_path / "l.db") as store:  # a restart keeps the counter
        lock = Lockout(store, failures=3, base=10, cap=35, clock=clock)
        with pytest.raises(LimitError):
            lock.check("im2020", "ann")
        clock.t += 20
        assert lock.record("im2020", "ann", True) == 0  # an acceptance resets …
        assert store.ids(LOCKOUT_NAMESPACE.format(protocol="im2020")) == []  # … by deleting the record
        before = _dump(tmp_path / "l.db")
        lock.record("im2020", "cat", True)  # an acceptance without failures writes nothing
        assert _dump(tmp_path / "l.db") == before


def test_lockout_bounds_attempts_in_flight(tmp_path):
    with SQLiteStore(tmp_path / "l.db") as store:
        lock = Lockout(store, failures=3, base=10, clock=Clock())
        with lock.attempt("p", "ann"), lock.attempt("p", "ann"), lock.attempt("p", "ann"):
            with pytest.raises(LimitError, match="in progress"):
                with lock.attempt("p", "ann"):
                    pass
            with lock.attempt("p", "bob"):
                pass
        lock.record("p", "ann", False)
        lock.record("p", "ann", False)
        with lock.attempt("p", "ann"):  # one rejection left: one attempt at a time
            with pytest.raises(LimitError):
                with lock.attempt("p", "ann"):
                    pass
        assert json.loads(store.get(LOCKOUT_NAMESPACE.format(protocol="p"), "ann"))["leases"] == {}  # released
        assert store.ids(LOCKOUT_NAMESPACE.format(protocol="p")) == ["ann"]  # bob: no failures, no lease, no record


_RESERVE_AND_HANG = """
import sys, time
from privface.service.limits import Lockout
from privface.store import open_store
lock = Lockout(open_store(sys.argv[1]), failures=2, base=10, clock=lambda: 1_000_000.0, lease=30)
with lock.attempt(sys.argv[2], "cat"):
    print("reserved", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_lockout_in_flight_bound_holds_across_processes(tmp_path, backend):
    """Two Lockout instances over their own connections to one store, as two server processes have: the
    in-flight leases live in the store, so the second reservation is refused while the first is in flight;
    a lease whose process died expires by itself."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'l.db'}"
    elif not (url := os.environ.get("PRIVFACE_TEST_PG_URL")):
        pytest.skip("PRIVFACE_TEST_PG_URL is not set (.ci/with-postgres sets it)")
    proto = "p" + secrets.token_hex(4)
    clock = Clock()
    with open_store(url) as one, open_store(url) as two:
        a, b = (Lockout(s, failures=2, base=10, clock=clock, lease=30) for s in (one, two))
        a.record(proto, "ann", False)  # one rejection left
        with a.attempt(proto, "ann"):
            with pytest.raises(LimitError, match="in progress"):
                with b.attempt(proto, "ann"):
                    pass
            with b.attempt(proto, "bob"):  # other subjects are not held up
                pass
        with b.attempt(proto, "ann"):  # released: the other process may go
            assert b.record(proto, "ann", False) == 2
        with pytest.raises(LimitError, match="too many rejected"):
            with a.attempt(proto, "ann"):
                pass
        assert a.record(proto, "cat", False) == 1
        child = subprocess.Popen([sys.executable, "-c", _RESERVE_AND_HANG, url, proto], stdout=subprocess.PIPE,
                                 text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert child.stdout.readline().strip() == "reserved"
        child.send_signal(signal.SIGKILL)  # a server process killed mid-step: its lease is never released
        child.wait()
        with pytest.raises(LimitError, match="in progress"):
            with b.attempt(proto, "cat"):
                pass
        clock.t += 31  # the lease expires
        with b.attempt(proto, "cat"):
            assert b.record(proto, "cat", True) == 0
        assert two.ids(LOCKOUT_NAMESPACE.format(protocol=proto)) == ["ann"]  # cat: reset, expired lease gone


def test_sessions_expire_and_peek_does_not_consume():
    clock = Clock(0.0)
    s = Sessions(ttl=5, max_sessions=2, clock=clock)
    sid = s.open("p", "state", "key:a")
    assert s.peek("p", sid, "key:a") == "state" and len(s) == 1
    clock.t = 4.9
    assert s.take("p", sid, "key:a") == "state" and len(s) == 0
    sid = s.open("p", "again", "key:a")
    clock.t = 9.9
    from privface.service.base import SessionError

    with pytest.raises(SessionError, match="expired"):
        s.peek("p", sid, "key:a")
    assert len(s) == 0


# ---------------------------------------------------------------- body caps


def test_every_step_of_every_role_has_an_explicit_body_cap(tmp_path):
    """A cap per step, declared by the service (not the app-wide 16 MiB default), refused with 413 one byte
    over it, before anything is read or changed."""
    roles = _roles(tmp_path)
    try:
        for label, path, store, svc in roles:
            caps = svc.max_body
            assert set(svc.steps) <= set(caps), f"{label}: steps without a cap"
            with serve_in_thread(create_app(store, [svc])) as url:
                before = _dump(path)
                for step in svc.steps:
                    assert 16 <= caps[step] <= 8 * 1024 * 1024, (label, step)
                    r = httpx.post(f"{url}/v1/{svc.name}/{step}", content=b"\x00" * (caps[step] + 1),
                                   headers=OCTETS, timeout=30)
                    assert r.status_code == 413 and r.json()["type"] == "TooLarge", (label, step)
                    assert str(caps[step]) in r.json()["error"]
                assert _dump(path) == before
    finally:
        for _, _, store, _ in roles:
            store.close()


def test_body_caps_hold_real_messages():
    """At least twice the measured sizes at the real parameters (docstrings of body_limits), and every
    toy-size message of a full im2020 flow fits."""
    sc = im2020_limits(Im2020Params.for_level(128, mode="secure-comparison"))
    assert sc["enrol"] >= 2 * 52893 and sc["auth/start"] >= 2 * 52118 and sc["auth/compare"] >= 2 * 38927
    basic = im2020_limits(Im2020Params.for_level(112))
    assert basic["enrol"] >= 2 * 35997 and basic["auth/finish"] >= 2 * 25
    provider, terminal = gsm_limits(GsmParams(), "provider"), gsm_limits(GsmParams(), "terminal")
    assert provider["enrol/start"] >= 2 * 199861 and provider["enrol/finish"] >= 2 * 410
    assert terminal["match/start"] >= 2 * 15895 and terminal["match/compare"] >= 2 * 4559
    caps = im2020_limits(TOY)
    client = Client("ann", TOY, workers=1)
    t = attacks.face_like_template(TOY, np.random.default_rng(1))
    assert len(client.enrol(t).to_bytes()) <= caps["enrol"]
    assert len(client.auth_start(t).to_bytes()) <= caps["auth/start"]


# ---------------------------------------------------------------- failure counter over HTTP, every verifying role


def _face(seed):
    return attacks.face_like_template(TOY, np.random.default_rng(seed))


class Im2020Role:
    name = "im2020"

    def __init__(self, root, lockout):
        self.path = root / "im2020.db"
        self.store = SQLiteStore(self.path)
        self.app = create_app(self.store, [Im2020Service(self.store, params=TOY)], lockout=lockout(self.store))

    def enrol(self, url):
        self.client, self.ref = Client("ann", TOY, workers=1), _face(1)
        with remote.service_client(url) as http:
            remote.enrol(http, self.client, self.ref)

    def attempt(self, url, genuine: bool) -> bool:
        with remote.service_client(url) as http:
            return remote.verify(http, self.client, self.ref if genuine else _face(2))["accepted"]


class GsmRole:
    """A provider (own store) enrols; the failure counter lives with the terminal, which decides."""
    name = "gsm"
    P = GsmParams.toy()

    def __init__(self, root, lockout):
        self.sp_store, self.path = SQLiteStore(root / "sp.db"), root / "terminal.db"
        self.store, self.capture = SQLiteStore(self.path), [None]
        provider = GsmService(self.sp_store, role="provider", params=self.P)
        self.sp = serve_in_thread(create_app(self.sp_store, [provider]))
        self.sp_url = self.sp.__enter__()
        vk = provider_key_bytes(fetch_provider_key(self.sp_url))
        term = GsmService(self.store, role="terminal", params=self.P, provider_key=vk, capture=lambda: self.capture[0])
        self.app = create_app(self.store, [term], lockout=lockout(self.store))

    def _template(self, seed):
        return fixed_norm_template(np.random.default_rng(seed).normal(size=self.P.ell), self.P.m)

    def enrol(self, url):
        self.client = DeviceClient(Device("ann", self.P, provider_key=fetch_provider_key(self.sp_url)))
        self.u = self._template(1)
        self.client.enrol(self.sp_url, self.u)

    def attempt(self, url, genuine: bool) -> bool:
        self.capture[0] = self.u if genuine else self._template(2)
        d = self.client.match(url, "pi2")
        return bool(d.match) and not d.aborted

    def close(self):
        self.sp.__exit__(None, None, None)
        self.sp_store.close()


class KolbergRole:
    """The DB server holds the counter (it returns the auth server's decision); the auth server in-process."""
    name = "kolberg"
    params = KolbergParams("ntru")

    def __init__(self, root, lockout):
        self.auth_store, self.path = SQLiteStore(root / "auth.db"), root / "db.db"
        self.store = SQLiteStore(self.path)
        auth = KolbergService(self.auth_store, role="auth", scheme="ntru")
        db = KolbergService(self.store, role="db", scheme="ntru", auth=auth.party)
        self.app = create_app(self.store, [db], lockout=lockout(self.store))

    def _emb(self, seed):
        x = np.random.default_rng(seed).normal(size=128)
        return x / np.linalg.norm(x)

    def enrol(self, url):
        with KolbergClient(url, self.params) as c:
            c.enrol("ann", self._emb(1))

    def attempt(self, url, genuine: bool) -> bool:
        with KolbergClient(url, self.params) as c:
            return c.verify("ann", self._emb(1) if genuine else self._emb(2))

    def close(self):
        self.auth_store.close()


@pytest.mark.parametrize("role_cls", [Im2020Role, GsmRole, KolbergRole], ids=lambda c: c.name)
def test_online_guessing_is_locked_out_with_growing_backoff(tmp_path, role_cls):
    clock = Clock()
    role = role_cls(tmp_path, lambda store: Lockout(store, failures=3, base=60, cap=3600, clock=clock))
    try:
        with serve_in_thread(role.app) as url:
            role.enrol(url)
            assert role.attempt(url, True) is True
            assert [role.attempt(url, False) for _ in range(3)] == [False] * 3
            before = _dump(role.path)
            sessions = len(role.app.state.sessions)
            for genuine in (False, True):  # while locked, even the right face is refused (no oracle either way)
                with pytest.raises(ServiceError, match="too many rejected attempts") as e:
                    role.attempt(url, genuine)
                assert e.value.status == 429
            assert _dump(role.path) == before and len(role.app.state.sessions) == sessions
            snap = role.app.state.metrics.render().decode()
            assert f'privface_lockout_refusals_total{{protocol="{role.name}"}} 2.0' in snap
            assert f'privface_attempts_total{{protocol="{role.name}",result="rejected"}} 3.0' in snap
            clock.t += 60  # back-off over: one more try; a rejection doubles it
            assert role.attempt(url, False) is False
            clock.t += 60
            with pytest.raises(ServiceError) as e:
                role.attempt(url, True)
            assert e.value.status == 429
            clock.t += 60
            assert role.attempt(url, True) is True  # success resets
            assert role.store.ids(LOCKOUT_NAMESPACE.format(protocol=role.name)) == []
            assert [role.attempt(url, False) for _ in range(2)] == [False] * 2  # counting starts again
            assert role.attempt(url, True) is True
    finally:
        role.store.close()
        if hasattr(role, "close"):
            role.close()


def test_lockout_survives_a_restart_and_answers_retry_after(tmp_path):
    path, clock = tmp_path / "s.db", Clock()
    client, ref = Client("ann", TOY, workers=1), _face(1)
    with SQLiteStore(path) as store, serve_in_thread(create_app(
            store, [Im2020Service(store, params=TOY)], lockout=Lockout(store, 2, 30, clock=clock))) as url, \
            remote.service_client(url) as http:
        remote.enrol(http, client, ref)
        assert [remote.verify(http, client, _face(2))["accepted"] for _ in range(2)] == [False, False]
    with SQLiteStore(path) as store, serve_in_thread(create_app(  # a new process over the same store
            store, [Im2020Service(store, params=TOY)], lockout=Lockout(store, 2, 30, clock=clock))) as url:
        body = client.auth_start(ref).to_bytes()
        before = _dump(path)
        r = httpx.post(f"{url}/v1/im2020/auth/start", content=body, headers=OCTETS)
        assert r.status_code == 429 and r.headers["retry-after"] == "30"
        assert r.json()["type"] == "LimitError" and set(r.json()) == {"error", "type"}
        assert _dump(path) == before
        clock.t += 12
        r = httpx.post(f"{url}/v1/im2020/auth/start", content=body, headers=OCTETS)
        assert r.headers["retry-after"] == "18"


def test_concurrent_guesses_cannot_outrun_the_counter(tmp_path):
    """Many sessions opened first, then all deciding steps at once: at most `failures` are decided."""
    with SQLiteStore(tmp_path / "s.db") as store:
        lock = Lockout(store, failures=3, base=600, clock=Clock())
        app = create_app(store, [Im2020Service(store, params=TOY)], lockout=lock)
        client, wrong = Client("ann", TOY, workers=1), _face(2)
        with serve_in_thread(app) as url:
            with remote.service_client(url) as http:
                remote.enrol(http, client, _face(1))
            finishes = []
            for _ in range(12):
                with ServiceClient(url, "im2020") as c:
                    challenge = AuthChallenge.from_bytes(c.step("auth/start", client.auth_start(wrong).to_bytes()))
                    finishes.append((c.session, client.auth_finish(challenge).to_bytes()))
            gate = threading.Barrier(len(finishes))

            def finish(item):
                sid, body = item
                gate.wait()
                return httpx.post(f"{url}/v1/im2020/auth/finish", content=body,
                                  headers={**OCTETS, "x-privface-session": sid}, timeout=30).status_code

            with ThreadPoolExecutor(len(finishes)) as pool:
                codes = list(pool.map(finish, finishes))
        assert codes.count(200) <= 3 and codes.count(200) + codes.count(429) == len(codes)
        record = json.loads(store.get(LOCKOUT_NAMESPACE.format(protocol="im2020"), "ann"))
        assert record["failures"] == codes.count(200)


def test_unknown_subjects_leave_no_counter(tmp_path):
    """The counter writes only for a decided attempt: probing unknown IDs stores nothing."""
    with SQLiteStore(tmp_path / "s.db") as store:
        app = create_app(store, [Im2020Service(store, params=TOY)], lockout=Lockout(store, 1, 60))
        with serve_in_thread(app) as url, remote.service_client(url) as http:
            before = _dump(tmp_path / "s.db")
            for name in ("nobody", "ghost"):
                with pytest.raises(ServiceError) as e:
                    remote.verify(http, Client(name, TOY, workers=1), _face(3))
                assert e.value.status == 404
            assert _dump(tmp_path / "s.db") == before


# ---------------------------------------------------------------- rate limit


def test_rate_limit_per_client_address_and_per_key(tmp_path):
    path = tmp_path / "r.db"
    with SQLiteStore(path) as store:
        app = create_app(store, [Counter(store)], rate_limit=RateLimiter(0.5, 3))
        with serve_in_thread(app) as url:
            codes = [httpx.post(f"{url}/v1/counter/register", content=f"u{i}:x".encode(), headers=OCTETS).status_code
                     for i in range(3)]
            assert codes == [200] * 3
            before = _dump(path)
            r = httpx.post(f"{url}/v1/counter/register", content=b"u9:x", headers=OCTETS)
            assert r.status_code == 429 and r.json()["type"] == "LimitError"
            assert 1 <= int(r.headers["retry-after"]) <= 2 and _dump(path) == before
            assert httpx.get(f"{url}/healthz").status_code == 200  # probes are not limited
            assert "privface_rate_limited_total 1.0" in app.state.metrics.render().decode()
        keys = ApiKeys(store)
        a, b = keys.create("enrol")[1], keys.create("enrol")[1]
        app = create_app(store, [ScopedCounter(store)], keys=keys, rate_limit=RateLimiter(0.5, 2))
        with serve_in_thread(app) as url:
            post = lambda key: httpx.post(f"{url}/v1/counter/register", content=b"v:x",  # noqa: E731
                                          headers={**OCTETS, "authorization": f"Bearer {key}"}).status_code
            assert [post(a) for _ in range(3)] == [200, 200, 429]
            assert post(b) == 200  # another key has its own bucket
            assert post("pfk_000000000000_" + "x" * 43) == 401  # no key: refused before the bucket
            service = keys.create("enrol,internal")[1]
            assert [post(service) for _ in range(5)] == [200] * 5  # service-to-service keys are not limited


def test_lockout_and_rate_limit_retry_after_are_whole_seconds():
    assert LimitError("x", 0.01).retry_after == 1 and LimitError("x", 2.2).retry_after == math.ceil(2.2)


def test_a_trailing_newline_is_not_another_subject(tmp_path):
    """Issue 17 §9: ``ann\\n`` was a distinct subject id with a failure counter of its own (``re.match`` with
    ``$``), so a guesser could spread guesses over spellings. Over HTTP it is now refused before the counter."""
    import struct

    with SQLiteStore(tmp_path / "s.db") as store:
        app = create_app(store, [Im2020Service(store, params=TOY)], lockout=Lockout(store, 1, 60))
        with serve_in_thread(app) as url, remote.service_client(url) as http:
            client, ref = Client("ann", TOY, workers=1), _face(1)
            remote.enrol(http, client, ref)
            start = client.auth_start(_face(2)).to_bytes()
            plain = struct.pack(">I", 3) + b"ann"
            assert start.count(plain) == 1
            before = _dump(tmp_path / "s.db")
            r = httpx.post(f"{url}/v1/im2020/auth/start", content=start.replace(plain, struct.pack(">I", 4) + b"ann\n"),
                           headers={"content-type": "application/octet-stream"})
            assert r.status_code == 400 and "does not match" in r.json()["error"]
            assert _dump(tmp_path / "s.db") == before
