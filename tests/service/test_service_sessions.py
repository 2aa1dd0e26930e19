"""Sessions per caller (issue 17 §4) over real loopback HTTP: one API key cannot fill the shared session table,
and a session id is honoured only for the key (or, without keys, the address) that opened it."""
import httpx
import pytest
from test_service import Counter
from test_service_auth import ScopedCounter

from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.launch import serve_in_thread
from privface.service.sessions import SESSION_HEADER, SessionQuotaError, Sessions
from privface.store.sqlite import SQLiteStore

OCTETS = {"content-type": "application/octet-stream"}


def _post(url, step, body, key=None, sid=None):
    headers = dict(OCTETS)
    if key:
        headers["authorization"] = f"Bearer {key}"
    if sid:
        headers[SESSION_HEADER] = sid
    return httpx.post(f"{url}/v1/counter/{step}", content=body, headers=headers)


@pytest.fixture
def keyed(tmp_path):
    """The scoped test protocol behind API keys, a table of 10 sessions and 3 per caller."""
    with SQLiteStore(tmp_path / "s.db") as store:
        keys = ApiKeys(store)
        mallory = keys.create("enrol,verify", name="mallory")[1]
        alice = keys.create("enrol,verify", name="alice")[1]
        app = create_app(store, [ScopedCounter(store)], keys=keys, max_sessions=10, max_sessions_per_caller=3)
        with serve_in_thread(app) as url:
            assert _post(url, "register", b"erin:x", alice).status_code == 200
            yield url, mallory, alice, app.state.sessions


def test_one_key_cannot_fill_the_session_table(keyed):
    url, mallory, alice, sessions = keyed
    for _ in range(3):
        assert _post(url, "count/start", b"erin", mallory).status_code == 200
    refused = _post(url, "count/start", b"erin", mallory)
    assert refused.status_code == 429 and refused.json()["type"] == "LimitError" and "share" in refused.json()["error"]
    assert 1 <= int(refused.headers["retry-after"]) <= 120
    assert len(sessions) == 3  # the refusal opened nothing
    r = _post(url, "count/start", b"erin", alice)  # everyone else still gets in
    assert r.status_code == 200 and r.headers[SESSION_HEADER]
    assert _post(url, "register", b"frank:y", alice).status_code == 200


def test_a_session_answers_only_the_key_that_opened_it(keyed):
    url, mallory, alice, sessions = keyed
    sid = _post(url, "count/start", b"erin", alice).headers[SESSION_HEADER]
    stolen = _post(url, "count/next", b"+", mallory, sid)
    assert stolen.status_code == 409 and "unknown session" in stolen.json()["error"]
    mine = _post(url, "count/next", b"+", alice, sid)  # the foreign try did not consume it
    assert mine.status_code == 200 and mine.content == b"1"


def test_without_keys_the_client_address_is_the_caller(tmp_path):
    with SQLiteStore(tmp_path / "a.db") as store:
        app = create_app(store, [Counter(store)], max_sessions=200)  # default share: 1 % → 2
        with serve_in_thread(app) as url:
            assert _post(url, "register", b"erin:x").status_code == 200
            for _ in range(2):
                assert _post(url, "count/start", b"erin").status_code == 200
            assert _post(url, "count/start", b"erin").status_code == 429


def test_session_table_counts_per_owner_and_frees_on_take_and_expiry():
    class Clock:
        t = 0.0

        def __call__(self):
            return self.t

    clock = Clock()
    s = Sessions(ttl=5, max_sessions=4, clock=clock, max_per_caller=2)
    a1, a2 = s.open("p", 1, "key:a"), s.open("p", 2, "key:a")
    with pytest.raises(SessionQuotaError) as e:
        s.open("p", 3, "key:a")
    assert e.value.retry_after == 5
    b1 = s.open("p", 3, "key:b")
    assert s.take("p", a1, "key:a") == 1 and s.owned("key:a") == 1
    s.open("p", 4, "key:a")
    clock.t = 6  # all expire
    assert s.owned("key:a") == 0 and s.owned("key:b") == 0 and len(s) == 0
    del a2, b1
