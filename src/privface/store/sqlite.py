"""SQLite template store (the default): WAL journal, one transaction per call."""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from .base import StoreError, StoreUnavailableError, TemplateStore, check_key, check_record

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    protocol   TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    record     BLOB NOT NULL,
    updated    REAL NOT NULL DEFAULT (julianday('now')),
    PRIMARY KEY (protocol, subject_id)
);
"""


class SQLiteStore(TemplateStore):
    """Records in one SQLite file (created mode 0600), or in memory for `sqlite://`."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        try:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if not self.path.exists():
                    self.path.touch(mode=0o600)
            self._db = sqlite3.connect(":memory:" if self.path is None else str(self.path),
                                       check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA secure_delete=ON")  # a deleted record (revocation, a migrated key) is zeroed
            if self.path is not None:
                _retry_locked(lambda: self._db.execute("PRAGMA journal_mode=WAL"))
                self._db.execute("PRAGMA synchronous=FULL")
            _retry_locked(lambda: self._db.executescript(_SCHEMA))
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open SQLite store {self.path or ':memory:'}: {e}") from None

    @staticmethod
    def path_of(url: str) -> Path | None:
        """The file a ``sqlite:`` URL names, None for an in-memory store."""
        rest = url[len("sqlite:"):]
        if rest in ("", "//", "///:memory:"):
            return None
        if not rest.startswith("///"):
            raise StoreError(f"bad SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////abs/path.db")
        return Path(rest[3:])

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        return cls(cls.path_of(url))

    def _run(self, sql: str, args: tuple) -> sqlite3.Cursor:
        try:
            with self._lock:
                return self._db.execute(sql, args)
        except sqlite3.Error as e:
            raise StoreUnavailableError(f"SQLite store: {e}") from None

    def put(self, protocol, subject_id, record) -> bool:
        check_key(protocol, subject_id)
        record = check_record(record)
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    old = self._db.execute("SELECT 1 FROM records WHERE protocol=? AND subject_id=?",
                                           (protocol, subject_id)).fetchone()
                    self._db.execute(
                        "INSERT INTO records (protocol, subject_id, record) VALUES (?, ?, ?) "
                        "ON CONFLICT (protocol, subject_id) DO UPDATE SET record=excluded.record, "
                        "updated=julianday('now')", (protocol, subject_id, record))
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as e:
            raise StoreUnavailableError(f"SQLite store: {e}") from None
        return old is not None

    def get(self, protocol, subject_id) -> bytes | None:
        check_key(protocol, subject_id)
        row = self._run("SELECT record FROM records WHERE protocol=? AND subject_id=?",
                        (protocol, subject_id)).fetchone()
        return None if row is None else bytes(row[0])

    def delete(self, protocol, subject_id) -> bool:
        check_key(protocol, subject_id)
        return self._run("DELETE FROM records WHERE protocol=? AND subject_id=?",
                         (protocol, subject_id)).rowcount > 0

    # One statement each (``TemplateStore.swap``): SQLite runs it as one write transaction, serialised with
    # every other writer.
    def _swap_insert(self, protocol, subject_id, record) -> bool:
        return self._run("INSERT INTO records (protocol, subject_id, record) VALUES (?, ?, ?) "
                         "ON CONFLICT (protocol, subject_id) DO NOTHING", (protocol, subject_id, record)).rowcount == 1

    def _swap_delete(self, protocol, subject_id, expected) -> bool:
        return self._run("DELETE FROM records WHERE protocol=? AND subject_id=? AND record=?",
                         (protocol, subject_id, expected)).rowcount == 1

    def _swap_update(self, protocol, subject_id, expected, record) -> bool:
        return self._run("UPDATE records SET record=?, updated=julianday('now') WHERE protocol=? AND subject_id=? "
                         "AND record=?", (record, protocol, subject_id, expected)).rowcount == 1

    def purge(self, tries: int = 50) -> bool:
        """Copy the WAL into the database and truncate it to zero bytes (``PRAGMA wal_checkpoint(TRUNCATE)``),
        retried while readers hold it: with ``secure_delete`` the freed pages of the database are already
        zeroed, and afterwards no superseded record is left in the -wal file either. True when done."""
        if self.path is None:
            return True
        for attempt in range(tries):
            busy = self._run("PRAGMA wal_checkpoint(TRUNCATE)", ()).fetchone()[0]
            if not busy:
                return True
            time.sleep(0.02 * (attempt + 1))
        return False

    def ids(self, protocol) -> list[str]:
        check_key(protocol, "x")
        rows = self._run("SELECT subject_id FROM records WHERE protocol=? ORDER BY subject_id", (protocol,))
        return [r[0] for r in rows.fetchall()]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _retry_locked(step, tries: int = 40) -> None:
    """Run ``step``, retrying while SQLite says the database is locked: switching a new file to WAL (and creating
    its tables) while another connection opens it fails at once, without waiting in SQLite's busy handler."""
    for attempt in range(tries):
        try:
            step()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or attempt == tries - 1:
                raise
            time.sleep(0.025 * (attempt + 1))
