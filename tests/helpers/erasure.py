"""Scaffolding the erasure tests of every scheme share (issue 37): windows of old ciphertext bytes, a scan of a
store's files (SQLite) or of PostgreSQL's live rows and, after the operator's VACUUM (FULL), its table files, and
the kill -9 loop (a command killed at a random moment on a fresh copy of the store, then the caller's checks)."""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def windows(raw: bytes, k: int = 32, size: int = 64) -> list[bytes]:
    """k windows of ``size`` bytes spread over ``raw``: none may be left in a store after its erasure."""
    step = len(raw) // k
    return [raw[i * step:i * step + size] for i in range(k)]


def store_files(directory: Path, pattern: str = "g.db*") -> bytes:
    """Every byte of the SQLite store's files (database, WAL, journal) in ``directory``."""
    return b"".join(p.read_bytes() for p in sorted(Path(directory).glob(pattern)))


def postgres_bytes(pg_url: str, name: str, vacuum: bool = False):
    """(the live gallery rows of gallery ``name`` in PostgreSQL, and with ``vacuum`` the table's and its TOAST's
    files after VACUUM (FULL) and a checkpoint — None if this user cannot read them)."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as db:
        rows = db.execute("SELECT record FROM privface_records WHERE protocol = 'gallery' AND subject_id LIKE %s",
                          (f"{name}.%",)).fetchall()
        live = b"".join(bytes(r[0]) for r in rows)
        if not vacuum:
            return live, None
        db.execute("VACUUM (FULL) privface_records")
        db.execute("CHECKPOINT")
        root = Path(db.execute("SHOW data_directory").fetchone()[0])
        rels = db.execute("SELECT pg_relation_filepath(c.oid), pg_relation_filepath(c.reltoastrelid) FROM pg_class c "
                          "WHERE c.relname = 'privface_records'").fetchone()
    try:
        return live, b"".join(p.read_bytes() for rel in rels if rel for p in sorted(root.glob(rel + "*")))
    except PermissionError:
        return live, None


def crash_seed() -> random.Random:
    """The kill loop's random source: ``PRIVFACE_CRASH_SEED`` replays a run (the seed is printed)."""
    seed = int(os.environ.get("PRIVFACE_CRASH_SEED", random.randrange(1 << 30)))
    print("PRIVFACE_CRASH_SEED", seed)
    return random.Random(seed)


def kill_runs(tmp_path: Path, files: tuple[str, ...], argv: Callable[[str], list[str]],
              check: Callable[[str, bool], bool], *, runs: int = 3, delay: tuple[float, float] = (2.0, 15.0),
              rng: random.Random | None = None) -> list[tuple[bool, bool]]:
    """``runs`` times: copy ``files`` from ``tmp_path`` into a fresh directory, start ``argv(url)`` (url = that
    copy's ``sqlite:///…/<files[0]>``) as a child process, SIGKILL it after a random delay if still running, then
    ``check(url, killed)`` — the caller's assertions; it returns whether the change was done. Returns
    (killed, done) per run."""
    rng = rng or crash_seed()
    outcomes = []
    for run in range(runs):
        d = tmp_path / f"run{run}"
        d.mkdir()
        for f in files:
            shutil.copy(tmp_path / f, d / f)
        url = f"sqlite:///{d}/{files[0]}"
        proc = subprocess.Popen([sys.executable, *argv(url)], env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(*delay))
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        outcomes.append((killed, check(url, killed)))
    print({"kill_outcomes": outcomes})
    return outcomes





def assert_gone_from_postgres(pg_url: str, name: str, old: list[bytes]) -> None:
    """None of the ``old`` windows in gallery ``name``'s live PostgreSQL rows, nor — after the operator's
    VACUUM (FULL) (docs/operations.md) — in the table's and its TOAST's files (skipped if this user cannot read
    them); the file scan is shown to find what is stored."""
    import pytest

    live, stored = postgres_bytes(pg_url, name, vacuum=True)
    assert not any(w in live for w in old)
    if stored is None:
        pytest.skip("the cluster's files are not readable by this user")
    assert live[:64] in stored  # the scan finds what is stored
    assert not any(w in stored for w in old)  # the table and its TOAST: no old window


def after_lease_expiry(monkeypatch, run: Callable[[], object]):
    """``run()`` as a later invocation would, once a killed process's writer lease has expired."""
    from privface.scale import layout as lay

    monkeypatch.setattr(lay, "lease_clock", lambda: time.time() + 2 * lay.LEASE_TTL)
    try:
        return run()
    finally:
        monkeypatch.setattr(lay, "lease_clock", time.time)


__all__ = ["ENV", "SRC", "after_lease_expiry", "assert_gone_from_postgres", "crash_seed", "kill_runs", "postgres_bytes",
           "store_files", "windows"]
