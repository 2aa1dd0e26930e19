"""PostgreSQL template store: a small psycopg 3 connection pool, one transaction per call."""
from __future__ import annotations

from .base import StoreError, StoreUnavailableError, TemplateStore, check_key, check_record, redact, url_password

# Serialises the CREATE TABLE IF NOT EXISTS of processes that open the store at the same moment
# (two concurrent creations of one table can otherwise fail on the catalog's unique index).
_SCHEMA_LOCK = 0x70726976666163  # "privfac"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS privface_records (
    protocol   TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    record     BYTEA NOT NULL,
    updated    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (protocol, subject_id)
)
"""


class PostgresStore(TemplateStore):
    """Records in the table `privface_records` of a PostgreSQL database, created if missing."""

    def __init__(self, url: str, *, max_connections: int = 4, connect_timeout: float = 5.0):
        import psycopg
        from psycopg_pool import ConnectionPool, PoolTimeout

        self._errors = (psycopg.Error, PoolTimeout)
        self.url = redact(url)
        secret = url_password(url)
        # One direct connection first: it fails fast with the driver's reason (refused, bad URL,
        # login failed) where the pool would only retry until its timeout; it creates the schema.
        try:
            with psycopg.connect(url, connect_timeout=max(1, round(connect_timeout))) as db:
                with db.transaction():
                    db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    db.execute(_SCHEMA)
            # check: a connection the server dropped (restart, idle timeout) is replaced, not used.
            self._pool = ConnectionPool(url, min_size=1, max_size=max_connections, open=False,
                                        timeout=connect_timeout, name="privface",
                                        check=ConnectionPool.check_connection)
            self._pool.open(wait=True, timeout=connect_timeout)
        except Exception as e:  # psycopg.Error, PoolTimeout, or a bad URL the driver cannot parse
            if hasattr(self, "_pool"):
                self._pool.close()
            raise StoreError(f"cannot open PostgreSQL store {self.url}: "
                             f"{_clean(e, secret) or type(e).__name__}") from None

    def _run(self, sql: str, args: tuple):
        try:
            with self._pool.connection() as db:  # commits on success, rolls back on error
                cur = db.execute(sql, args)
                return cur.fetchall() if cur.description else cur.rowcount
        except self._errors as e:
            raise StoreUnavailableError(f"PostgreSQL store {self.url}: {_clean(e, '')}") from None

    def put(self, protocol, subject_id, record) -> bool:
        check_key(protocol, subject_id)
        record = check_record(record)
        # One statement, so one transaction: readers see the old or the new row, never neither.
        # xmax is non-zero exactly when ON CONFLICT updated an existing row.
        rows = self._run(
            "INSERT INTO privface_records (protocol, subject_id, record) VALUES (%s, %s, %s) "
            "ON CONFLICT (protocol, subject_id) DO UPDATE SET record = EXCLUDED.record, updated = now() "
            "RETURNING xmax::text <> '0'", (protocol, subject_id, record))
        return bool(rows[0][0])

    def get(self, protocol, subject_id) -> bytes | None:
        check_key(protocol, subject_id)
        rows = self._run("SELECT record FROM privface_records WHERE protocol = %s AND subject_id = %s",
                         (protocol, subject_id))
        return bytes(rows[0][0]) if rows else None

    def delete(self, protocol, subject_id) -> bool:
        check_key(protocol, subject_id)
        return self._run("DELETE FROM privface_records WHERE protocol = %s AND subject_id = %s",
                         (protocol, subject_id)) > 0

    # One statement each (``TemplateStore.swap``). Under READ COMMITTED an UPDATE/DELETE that waited for a
    # concurrent writer re-checks its WHERE on the row that writer committed, so a stale `expected` matches nothing.
    def _swap_insert(self, protocol, subject_id, record) -> bool:
        return self._run("INSERT INTO privface_records (protocol, subject_id, record) VALUES (%s, %s, %s) "
                         "ON CONFLICT (protocol, subject_id) DO NOTHING", (protocol, subject_id, record)) == 1

    def _swap_delete(self, protocol, subject_id, expected) -> bool:
        return self._run("DELETE FROM privface_records WHERE protocol = %s AND subject_id = %s AND record = %s",
                         (protocol, subject_id, expected)) == 1

    def _swap_update(self, protocol, subject_id, expected, record) -> bool:
        return self._run("UPDATE privface_records SET record = %s, updated = now() "
                         "WHERE protocol = %s AND subject_id = %s AND record = %s",
                         (record, protocol, subject_id, expected)) == 1

    def ids(self, protocol) -> list[str]:
        check_key(protocol, "x")
        rows = self._run("SELECT subject_id FROM privface_records WHERE protocol = %s ORDER BY subject_id",
                         (protocol,))
        return [r[0] for r in rows]

    def close(self) -> None:
        self._pool.close()




def _clean(e: Exception, secret: str) -> str:
    """First line of a driver error, with the password cut out should the driver echo it."""
    text = (str(e).strip().splitlines() or [""])[0]
    return text.replace(secret, "***") if secret else text
