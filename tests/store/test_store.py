"""TemplateStore contract, run against every backend: SQLite (file and memory) and PostgreSQL.

PostgreSQL runs when PRIVFACE_TEST_PG_URL is set (`.ci/with-postgres` sets it; CI always does).
"""
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from privface.store import StoreError, open_store
from privface.store.base import MAX_RECORD_BYTES

PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path / 'store.db'}"
    if request.param == "sqlite-memory":
        return "sqlite://"
    if not PG_URL:
        pytest.skip("PRIVFACE_TEST_PG_URL is not set (.ci/with-postgres sets it)")
    return PG_URL


@pytest.fixture
def proto():
    """A fresh protocol name per test, so PostgreSQL tests sharing one database do not collide."""
    return "t" + secrets.token_hex(6)


@pytest.fixture
def store(url):
    with open_store(url) as s:
        yield s


def test_put_get_replace_delete_ids(store, proto):
    assert store.get(proto, "alice") is None
    assert store.ids(proto) == []
    assert store.put(proto, "alice", b"\x00record-1") is False
    assert store.put(proto, "bob", b"b") is False
    assert store.get(proto, "alice") == b"\x00record-1"
    assert store.put(proto, "alice", b"record-2") is True
    assert store.get(proto, "alice") == b"record-2"
    assert store.ids(proto) == ["alice", "bob"]
    assert store.ids(proto + "x") == []  # protocols do not see each other's records
    assert store.delete(proto, "alice") is True
    assert store.delete(proto, "alice") is False
    assert store.get(proto, "alice") is None
    assert store.ids(proto) == ["bob"]


@pytest.mark.parametrize("subject_id",
                         ["", "a b", "x" * 129, "a/b", "é", "a;DROP TABLE", None, 7, "erin\n", "erin\n\n"])
def test_bad_subject_ids_are_refused_without_change(store, proto, subject_id):
    store.put(proto, "kept", b"v")
    for call in (lambda: store.put(proto, subject_id, b"r"), lambda: store.get(proto, subject_id),
                 lambda: store.delete(proto, subject_id)):
        with pytest.raises(StoreError, match="subject id"):
            call()
    assert store.ids(proto) == ["kept"]


def test_bad_protocol_names_and_records_are_refused(store, proto):
    with pytest.raises(StoreError, match="protocol"):
        store.put("Bad Name", "a", b"r")
    with pytest.raises(StoreError, match="protocol"):
        store.ids("")
    with pytest.raises(StoreError, match="protocol"):
        store.ids(proto + "\n")  # issue 17 §9: `$` would match before a final newline
    with pytest.raises(StoreError, match="1 to"):
        store.put(proto, "a", b"")
    with pytest.raises(StoreError, match="bytes"):
        store.put(proto, "a", "text")
    with pytest.raises(StoreError, match="1 to"):
        store.put(proto, "a", bytes(MAX_RECORD_BYTES + 1))
    assert store.ids(proto) == []


def test_large_record_round_trips(store, proto):
    big = secrets.token_bytes(3 * 1024 * 1024)
    store.put(proto, "big", big)
    assert store.get(proto, "big") == big


def test_records_persist_across_reopen(url, proto):
    if url == "sqlite://":
        pytest.skip("an in-memory store lives as long as its object")
    with open_store(url) as s:
        s.put(proto, "alice", b"one")
        s.put(proto, "bob", b"two")
        s.delete(proto, "bob")
    with open_store(url) as s:
        assert s.get(proto, "alice") == b"one"
        assert s.ids(proto) == ["alice"]


def test_reader_never_sees_a_missing_record_during_replace(store, url, proto):
    versions = [bytes([i]) * 64 for i in range(1, 5)]
    store.put(proto, "alice", versions[0])
    # Readers use their own connection(s) to the same database where there can be one.
    reading = store if url == "sqlite://" else open_store(url)
    stop = threading.Event()
    seen, errors = set(), []

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            store.put(proto, "alice", versions[i % len(versions)])
            store.put(proto, f"w{i % 7}", b"x")

    def reader():
        while not stop.is_set():
            r = reading.get(proto, "alice")
            if r not in versions:
                errors.append(r)
            seen.add(r)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    if reading is not store:
        reading.close()
    assert errors == []
    assert len(seen) > 1  # the readers did overlap with replacements


def test_swap_changes_only_what_the_caller_read(store, proto):
    assert store.swap(proto, "a", None, None) is True  # absent, as expected
    assert store.swap(proto, "a", b"old", b"new") is False  # nothing to compare with: nothing written
    assert store.get(proto, "a") is None
    assert store.swap(proto, "a", None, b"one") is True  # insert if absent
    assert store.swap(proto, "a", None, b"two") is False and store.get(proto, "a") == b"one"
    assert store.swap(proto, "a", None, None) is False
    assert store.swap(proto, "a", b"stale", b"two") is False and store.get(proto, "a") == b"one"
    assert store.swap(proto, "a", b"one", b"two") is True and store.get(proto, "a") == b"two"
    assert store.swap(proto, "a", b"one", None) is False and store.get(proto, "a") == b"two"
    assert store.swap(proto, "a", b"two", None) is True and store.get(proto, "a") is None
    big = secrets.token_bytes(2 * 1024 * 1024)
    store.put(proto, "b", big)
    assert store.swap(proto, "b", big[:-1] + bytes([big[-1] ^ 1]), b"x") is False  # last byte differs
    assert store.swap(proto, "b", big, b"x") is True and store.ids(proto) == ["b"]
    with pytest.raises(StoreError, match="subject id"):
        store.swap(proto, "a b", None, b"x")
    with pytest.raises(StoreError, match="1 to"):
        store.swap(proto, "b", b"x", b"")


def test_concurrent_swaps_lose_no_update(url, proto, tmp_path):
    """Read-modify-write by compare-and-swap from several connections (as several processes would have):
    every increment lands exactly once."""
    if url == "sqlite://":
        url = f"sqlite:///{tmp_path / 'cas.db'}"  # an in-memory store has one connection only
    stores = [open_store(url) for _ in range(4)]
    retries = []

    def add(s, n):
        for _ in range(n):
            while True:
                old = s.get(proto, "counter")
                if s.swap(proto, "counter", old, str(int(old or b"0") + 1).encode()):
                    break
                retries.append(1)

    threads = [threading.Thread(target=add, args=(s, 25)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stores[0].get(proto, "counter") == b"100"
    for s in stores:
        s.close()


def test_sqlite_file_is_private(tmp_path):
    path = tmp_path / "sub" / "p.db"
    with open_store(f"sqlite:///{path}"):
        pass
    assert path.stat().st_mode & 0o077 == 0


_WRITER = """
import sys
from privface.store import open_store
s = open_store(sys.argv[1])
i = 0
while True:
    s.put("durable", f"s{i}", f"record {i}".encode() * 50)
    print(i, flush=True)  # printed only after put returned, i.e. after COMMIT
    i += 1
"""


def test_sqlite_commits_survive_a_killed_writer(tmp_path):
    path = tmp_path / "d.db"
    url = f"sqlite:///{path}"
    child = subprocess.Popen([sys.executable, "-c", _WRITER, url], stdout=subprocess.PIPE, text=True)
    acknowledged = [int(child.stdout.readline()) for _ in range(40)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with open_store(url) as s:
        for i in acknowledged:
            assert s.get("durable", f"s{i}") == f"record {i}".encode() * 50
        assert len(s.ids("durable")) >= len(acknowledged)


@pytest.mark.parametrize("bad", ["mysql://x", "sqlite:relative.db", "sqlite:///"])
def test_bad_urls_are_refused(bad):
    with pytest.raises(StoreError):
        open_store(bad)


def test_unreachable_postgres_gives_a_clear_error_without_the_password():
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError) as e:
        open_store(f"postgresql://someone:s3cretpw@127.0.0.1:{port}/nodb")
    assert "s3cretpw" not in str(e.value)
    assert "someone:***@127.0.0.1" in str(e.value)


def test_bad_postgres_url_gives_a_clear_error_without_the_password():
    with pytest.raises(StoreError) as e:
        open_store("postgresql://u:s3cretpw@127.0.0.1:notaport/db")
    assert "s3cretpw" not in str(e.value)


def test_wrong_postgres_password_is_refused_without_echoing_it():
    if not PG_URL:
        pytest.skip("PRIVFACE_TEST_PG_URL is not set")
    import re

    wrong = re.sub(r"(://[^:]*:)[^@]*@", r"\1wrongpw123@", PG_URL)
    with pytest.raises(StoreError) as e:
        open_store(wrong)
    assert "wrongpw123" not in str(e.value)


def test_postgres_store_survives_dropped_connections(proto):
    if not PG_URL:
        pytest.skip("PRIVFACE_TEST_PG_URL is not set")
    import psycopg

    with open_store(PG_URL) as s:
        s.put(proto, "alice", b"v")
        with psycopg.connect(PG_URL, autocommit=True) as admin:  # as a server restart would
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]
        assert killed >= 1
        assert s.get(proto, "alice") == b"v"


@pytest.mark.parametrize("url, shown", [
    ("postgresql://ann:s3cret@db:5432/x", "postgresql://ann:***@db:5432/x"),
    ("postgresql://ann:p@ss:w@rd@db/x", "postgresql://ann:***@db/x"),  # issue 17 §11: '@' in the password
    ("postgresql://ann:a/b@db/x", "postgresql://ann:***@db/x"),
    ("postgresql://ann@db/x", "postgresql://ann@db/x"),
    ("sqlite:///faces.db", "sqlite:///faces.db"),
])
def test_redact_hides_the_whole_password(url, shown):
    from privface.store.base import redact, url_password

    assert redact(url) == shown
    password = url_password(url)
    assert not password or password not in redact(url)
