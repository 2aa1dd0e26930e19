"""Crash safety (issue 8 §4): real `privface serve` processes (kolberg auth server + DB server, SQLite stores, API
keys on) killed with SIGKILL at random points of an enrolment loop and of a key rotation (`privface rotate-keys`,
itself killed too), then restarted. Checked after every kill: every acknowledged enrolment is present and
verifies (the auth server decrypts it), every record decodes (nothing half-written, SQLite integrity ok), each
record holds whole copies under the old and/or the new key only, and a re-run of the rotation completes.
Real NTRU parameters; the seed of each run is printed (``PRIVFACE_CRASH_SEED`` replays one)."""
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from privface.protocols.kolberg import KolbergParams
from privface.protocols.kolberg.messages import PublicKey, StoredReference
from privface.protocols.kolberg.parties import PROTOCOL, _Public
from privface.service.auth import ApiKeys
from privface.service.client import ServiceError
from privface.service.clients.kolberg import HttpAuth, KolbergClient
from privface.service.launch import free_port
from privface.store.sqlite import SQLiteStore

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
PARAMS = KolbergParams("ntru")


class Server:
    """`privface serve` on a fixed loopback port, restartable over the same store."""

    def __init__(self, db: Path, port: int, *args: str, env: dict | None = None) -> None:
        self.db, self.port, self.args, self.env, self.proc = db, port, args, env or ENV, None
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> "Server":
        self.log = self.db.with_suffix(".log")
        with open(self.log, "ab") as log:  # a file, not a pipe: a pipe nobody reads can fill and block the server
            self.proc = subprocess.Popen([sys.executable, "-m", "privface.cli", "serve", "--protocol", "kolberg",
                                          "--scheme", "ntru", "--db", f"sqlite:///{self.db}", "--port", str(self.port),
                                          "--log-level", "warning", *self.args],
                                         env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"privface serve did not start: {self.log.read_text()[-800:]!r}")
            time.sleep(0.05)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


class Deployment:
    def __init__(self, root: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.auth_db, self.db_db = root / "auth.db", root / "db.db"
        with SQLiteStore(self.auth_db) as s:
            keys = ApiKeys(s)
            internal, self.admin = keys.create("internal")[1], keys.create("admin")[1]
        with SQLiteStore(self.db_db) as s:
            self.client_key = ApiKeys(s).create("enrol,verify,admin")[1]
        self.auth = Server(self.auth_db, free_port(), "--role", "auth").start()
        self.db = Server(self.db_db, free_port(), "--role", "db", "--auth-url", self.auth.url,
                         env={**ENV, "PRIVFACE_AUTH_API_KEY": internal}).start()
        self.embeddings: dict[str, np.ndarray] = {}  # every subject ever sent
        self.acknowledged: set[str] = set()
        self.kills = 0

    def client(self) -> KolbergClient:
        return KolbergClient(self.db.url, PARAMS, api_key=self.client_key, timeout=30)

    def _kill(self, victim) -> None:
        """SIGKILL a Server or a running subprocess."""
        if isinstance(victim, Server):
            victim.kill()
            self.kills += 1
        elif victim.poll() is None:
            victim.send_signal(signal.SIGKILL)
            self.kills += 1

    def kill_after(self, victim, low: float, high: float) -> threading.Thread:
        def kill():
            time.sleep(self.rng.uniform(low, high))
            self._kill(victim)
        t = threading.Thread(target=kill)
        t.start()
        return t

    # ------------------------------------------------------------ the loops

    def enrol_until_killed(self, round_no: int) -> int:
        """Enrol new subjects until the DB server dies under SIGKILL; returns how many were acknowledged."""
        killer = self.kill_after(self.db, 0.3, 2.5)
        acked = 0
        with self.client() as c:
            for i in range(10_000):
                name = f"r{round_no}-{i}"
                self.embeddings[name] = np.random.default_rng(self.rng.randrange(2**32)).normal(size=PARAMS.dims)
                try:
                    c.enrol(name, self.embeddings[name])
                except ServiceError:
                    break
                self.acknowledged.add(name)
                acked += 1
        killer.join()
        self.db.start()
        return acked

    def rotate(self, *, kill: str | None) -> int:
        """`privface rotate-keys`; with ``kill`` ("rotate-keys" or "auth") SIGKILL that process at a random point
        (then restart the auth server if it was the one). Returns the exit code (−9 when killed)."""
        proc = subprocess.Popen([sys.executable, "-m", "privface.cli", "rotate-keys", "--protocol", "kolberg",
                                 "--db", f"sqlite:///{self.db_db}", "--auth-url", self.auth.url, "--json"],
                                env={**ENV, "PRIVFACE_API_KEY": self.admin}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        killer = None
        if kill is not None:
            killer = threading.Thread(target=self._kill_mid_rotation,
                                      args=(self.auth if kill == "auth" else proc, proc))
            killer.start()
        out, err = proc.communicate(timeout=300)
        if killer is not None:
            killer.join()
            if kill == "auth":
                self.auth.start()
        if proc.returncode == 0:
            self.last_report = json.loads(out)
        return proc.returncode

    def _kill_mid_rotation(self, victim, rotation: subprocess.Popen) -> None:
        """SIGKILL ``victim`` once the rotation has made a random amount of progress: a record gaining its
        new-key copy (first pass) or losing its old one (second pass) counts one step, of 2 × records."""
        with SQLiteStore(self.db_db) as store:
            ids = store.ids(PROTOCOL)
            new = 1 + max(v for s in ids for v in StoredReference.from_bytes(store.get(PROTOCOL, s)).versions)
            target = self.rng.randrange(0, 2 * len(ids))
            while rotation.poll() is None:
                versions = [StoredReference.from_bytes(b).versions
                            for b in map(lambda s: store.get(PROTOCOL, s), ids) if b]
                if sum((new in v) + (v == [new]) for v in versions) >= target:
                    break
                time.sleep(0.01)
        self._kill(victim)

    # ------------------------------------------------------------ the checks

    def key_versions(self) -> dict[int, _Public]:
        with HttpAuth(self.auth.url, api_key=self.admin) as a:
            ring = a.keys()
        return {v: _Public(PARAMS, PublicKey(ring.scheme, k)) for v, k in zip(ring.versions, ring.keys)}

    def check(self) -> dict:
        """Every acknowledged enrolment present and verifying; every record whole, under held keys only."""
        for path in (self.auth_db, self.db_db):
            with sqlite3.connect(path) as con:
                assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        pubs = self.key_versions()
        with SQLiteStore(self.db_db) as store:
            ids = set(store.ids(PROTOCOL))
            records = {s: StoredReference.from_bytes(store.get(PROTOCOL, s)) for s in ids}  # WireError if torn
        missing = self.acknowledged - ids
        assert not missing, f"acknowledged enrolments lost: {sorted(missing)}"
        assert ids <= set(self.embeddings), "a record nobody enrolled"
        for s, rec in records.items():
            assert rec.subject_id == s and rec.versions and len(rec.versions) == len(rec.templates)
            assert set(rec.versions) <= set(pubs), f"{s}: copies under {rec.versions}, auth holds {sorted(pubs)}"
            assert len(set(rec.versions)) == len(rec.versions) <= 2
            for v, t in zip(rec.versions, rec.templates):
                pubs[v].load(t, "template")  # a whole, valid ciphertext under that key
        with self.client() as c:  # decryptable: the auth server decides on every record, genuine probe accepted
            rejected = [s for s in sorted(ids) if not c.verify(s, self.embeddings[s])]
        assert not rejected, f"enrolments that no longer verify: {rejected}"
        return {"records": len(ids), "versions": sorted({tuple(r.versions) for r in records.values()})}

    def stop(self) -> None:
        for s in (self.db, self.auth):
            if s.proc is not None and s.proc.poll() is None:
                s.proc.terminate()
                s.proc.wait(30)


def _run(tmp_path, rounds: int) -> dict:
    seed = int(os.environ.get("PRIVFACE_CRASH_SEED", random.SystemRandom().randrange(2**32)))
    print(f"crash-safety seed {seed}")
    d = Deployment(tmp_path, seed)
    try:
        figures = {"rounds": rounds, "acknowledged": 0, "rotation_kills": 0}  # a loss fails check()
        for r in range(rounds):
            figures["acknowledged"] += d.enrol_until_killed(r)
            d.check()
            before = max(d.key_versions())
            kill = ("rotate-keys", "auth")[r % 2]
            code = d.rotate(kill=kill)
            figures["rotation_kills"] += code != 0
            state = d.check()  # mid-rotation: whole records under old and/or new key, all still verify
            assert d.rotate(kill=None) == 0, "a re-run of the rotation must complete"
            assert d.last_report["to_version"] > before
            final = d.check()
            assert final["versions"] == [(d.last_report["to_version"],)], final
            assert sorted(d.key_versions()) == [d.last_report["to_version"]]
            print(json.dumps({"round": r, "killed": kill, "rotate_exit": code, "mid": state["versions"], **final}))
        figures.update(kills=d.kills, records=final["records"])
        print(json.dumps(figures))
        return figures
    finally:
        d.stop()


def test_sigkill_during_enrolment_and_key_rotation_loses_nothing(tmp_path):
    figures = _run(tmp_path, 3)
    assert figures["acknowledged"] > 0 and figures["kills"] >= 3


@pytest.mark.stress
def test_sigkill_many_rounds(tmp_path):
    figures = _run(tmp_path, 12)
    assert figures["acknowledged"] > 0
