"""One enrolment per gallery at a time (``scale.gallery.writer_lease`` on ``store.lease.Lease``): a second
enrolment into a gallery whose writer lease is live — another thread, another process, the CLI — is refused
with GalleryError and changes nothing; a SIGKILLed enrolment's lease expires and the next enrolment takes it
over and resumes; a lease lost mid-enrolment stops it before its next write; slow blocks keep the lease alive.

Toy parameters (insecure_test_params): hers holds 1024 templates per block, so 1100 templates are two blocks;
cryptomask's CTS_PER_BLOCK is lowered to 4 (60 templates per block at d = 128).
"""
from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from privface.protocols.cryptomask import encoding
from privface.scale import Gallery, GalleryError, NpySource, enrol, gallery_ids, identify, layout
from privface.scale import cryptomask_gallery as cg
from privface.scale import gallery as gal
from privface.store import open_store
from privface.store.lease import Lease, LeaseHeld, LeaseLost

D = 128
PG_URL = os.environ.get("PRIVFACE_TEST_PG_URL")
HELD = "is being enrolled by .+ since .+; wait, or if that process died, retry after"


def _unit(n, seed, d=D):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _npy(tmp_path, x, name="emb"):
    path = tmp_path / f"{name}.npy"
    np.save(path, x.astype(np.float32))
    return str(path)


def _records(path) -> dict:
    """Every record of a SQLite store but the writer leases: (protocol, id) → bytes."""
    rows = sqlite3.connect(path).execute("SELECT protocol, subject_id, record FROM records").fetchall()
    return {(p, i): bytes(r) for p, i, r in rows if p != gal.LEASE}


def _lease_record(url, name="default"):
    with open_store(url) as s:
        return s.get(gal.LEASE, f"{name}.lease")


def _race(*enrolments):
    """Run the enrolments (callables taking ``after_block``) in threads started together. Whichever gets the
    lease waits after its first block until another is refused (20 s at most), so they really overlap.
    Returns (reports, errors)."""
    start, refused = threading.Barrier(len(enrolments)), threading.Event()
    reports, errors = [], []

    def hold(b):
        if b == 0:
            refused.wait(20)

    def run(fn):
        start.wait()
        try:
            reports.append(fn(hold))
        except GalleryError as e:
            errors.append(e)
            refused.set()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in enrolments]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return reports, errors


# ------------------------------------------------------------------------------------------ the lease itself
def test_lease_is_exclusive_renewed_taken_over_when_expired_and_released(tmp_path):
    now = [1000.0]
    with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        a = Lease(store, "gallery-lease", "x.lease", ttl=60, clock=lambda: now[0])
        b = Lease(store, "gallery-lease", "x.lease", ttl=60, clock=lambda: now[0])
        a.acquire()
        rec = json.loads(store.get("gallery-lease", "x.lease"))
        assert set(rec) == {"token", "host", "pid", "acquired", "expires"}
        assert (rec["pid"], rec["acquired"], rec["expires"]) == (os.getpid(), 1000.0, 1060.0)
        with pytest.raises(LeaseHeld) as held:
            b.acquire()
        assert held.value.holder["expires"] == 1060.0
        now[0] = 1050.0
        a.renew()
        a.check()
        assert json.loads(store.get("gallery-lease", "x.lease"))["expires"] == 1110.0
        now[0] = 1100.0
        with pytest.raises(LeaseHeld):  # renewed: still live
            b.acquire()
        now[0] = 1200.0
        a.check()  # expired but nobody took it: renewed
        assert json.loads(store.get("gallery-lease", "x.lease"))["expires"] == 1260.0
        now[0] = 1261.0
        b.acquire()  # expired: taken over
        with pytest.raises(LeaseLost):
            a.renew()
        with pytest.raises(LeaseLost):
            a.check()
        a.release()  # never deletes another holder's lease
        assert json.loads(store.get("gallery-lease", "x.lease"))["token"] != rec["token"]
        b.release()
        assert store.get("gallery-lease", "x.lease") is None


# ------------------------------------------------------------------------------------- concurrent enrolments
def test_two_threads_enrolling_one_hers_gallery_one_is_refused(tmp_path):
    """Fails on the code before the lease: both enrolments ran (and wrote keys, meta and blocks) at once."""
    x = _unit(1100, 1)
    src, url = NpySource([_npy(tmp_path, x)]), f"sqlite:///{tmp_path}/g.db"
    reports, errors = _race(
        *[lambda hold: enrol(url, src, "hers", tau=0.5, insecure_test_params=True, after_block=hold)] * 2)
    assert len(reports) == 1 and len(errors) == 1, (reports, errors)
    assert "gallery 'default'" in str(errors[0]) and re.search(HELD, str(errors[0]))
    assert (reports[0].blocks_encrypted, reports[0].blocks_skipped) == (2, 0)
    assert gallery_ids(Gallery(url)) == src.ids
    for k in (0, 1099):
        assert identify(x[k], url)["id"] == f"emb.{k}"
    assert _lease_record(url) is None  # released


def test_two_threads_appending_to_one_cryptomask_gallery_one_is_refused(tmp_path, monkeypatch):
    """Both batches would rewrite the same last block (Alg. 1 line 7); one is refused, then runs afterwards."""
    monkeypatch.setattr(cg, "CTS_PER_BLOCK", 4)
    x = _unit(200, 2)
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/k.db"
    enrol(url, NpySource([_npy(tmp_path, x[:40], "a")]), "cryptomask", key_store_url=keys, tau=0.5,
          insecure_test_params=True)
    srcs = {"b": NpySource([_npy(tmp_path, x[40:120], "b")]), "c": NpySource([_npy(tmp_path, x[120:], "c")])}

    def run(src):
        return lambda hold: enrol(url, src, "cryptomask", key_store_url=keys, tau=0.5, insecure_test_params=True,
                                  after_block=hold)

    reports, errors = _race(run(srcs["b"]), run(srcs["c"]))
    assert len(reports) == 1 and len(errors) == 1 and "is being enrolled by" in str(errors[0])
    assert reports[0].n == 120
    loser = srcs["c"] if "b.0" in cg.CMGallery(url).ids() else srcs["b"]
    assert enrol(url, loser, "cryptomask", key_store_url=keys, tau=0.5, insecure_test_params=True).n == 200
    g = cg.CMGallery(url)
    assert sorted(g.ids()) == sorted(s for src in (NpySource([_npy(tmp_path, x[:40], "a")]), *srcs.values())
                                     for s in src.ids)
    q = encoding.quantize(x)
    for k in (5, 100, 199):
        y = x[k] + 0.3 * np.random.default_rng(k).standard_normal(D) / np.sqrt(D)
        y /= np.linalg.norm(y)
        want = bool((q @ encoding.quantize(y)).max() >= round(0.5 * (1 << 2 * encoding.SCALE_BITS)))
        assert want is True and identify(y, url, key_store_url=keys)["match"] is True
    assert _lease_record(url) is None


_CHILD = r"""
import os, signal, sys, time
from privface.scale import NpySource, enrol

url, emb, mode, marker = sys.argv[1:5]

def after(b):
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if b == 0:
        open(marker, "w").close()
        deadline = time.time() + 300
        while not os.path.exists(marker + ".go") and time.time() < deadline:
            time.sleep(0.05)

rep = enrol(url, NpySource([emb]), "hers", tau=0.5, insecure_test_params=True, after_block=after)
print("enrolled", rep.blocks_encrypted)
"""


def _child(url, emb, mode, marker):
    return subprocess.Popen([sys.executable, "-c", _CHILD, url, emb, mode, str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_process_is_refused_by_the_cli_and_changes_nothing(tmp_path):
    x = _unit(1100, 3)
    emb, url, marker = _npy(tmp_path, x), f"sqlite:///{tmp_path}/g.db", tmp_path / "holding"
    child = _child(url, emb, "hold", marker)
    try:
        deadline = time.time() + 300
        while not marker.exists():
            assert child.poll() is None and time.time() < deadline, child.communicate()
            time.sleep(0.05)
        before = _records(tmp_path / "g.db")
        r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "enrol", "--scheme", "hers", "--gallery",
                            url, "--insecure-test-params", "--json", emb], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "gallery 'default'" in r.stderr and f"/{child.pid} since" in r.stderr and "retry after" in r.stderr
        assert _records(tmp_path / "g.db") == before
    finally:
        (tmp_path / "holding.go").touch()
        out, err = child.communicate(timeout=300)
    assert child.returncode == 0 and "enrolled 2" in out, err
    assert identify(x[1050], url)["id"] == "emb.1050"
    assert _lease_record(url) is None


def test_a_sigkilled_enrolments_lease_expires_and_the_next_enrolment_resumes(tmp_path, monkeypatch):
    x = _unit(1100, 4)
    emb, url = _npy(tmp_path, x), f"sqlite:///{tmp_path}/g.db"
    child = _child(url, emb, "kill", tmp_path / "unused")
    child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL
    dead = json.loads(_lease_record(url))
    assert dead["pid"] == child.pid and dead["expires"] > time.time()
    before = _records(tmp_path / "g.db")
    with pytest.raises(GalleryError, match=HELD):  # still live: refused, nothing written
        enrol(url, NpySource([emb]), "hers", tau=0.5, insecure_test_params=True)
    assert _records(tmp_path / "g.db") == before
    monkeypatch.setattr(layout, "lease_clock", lambda: time.time() + gal.LEASE_TTL + 1)
    rep = enrol(url, NpySource([emb]), "hers", tau=0.5, insecure_test_params=True)
    assert (rep.blocks_encrypted, rep.blocks_skipped) == (1, 1)
    assert gallery_ids(Gallery(url)) == [f"emb.{i}" for i in range(1100)]
    assert identify(x[7], url)["id"] == "emb.7" and identify(x[1090], url)["id"] == "emb.1090"
    assert _lease_record(url) is None


# --------------------------------------------------------------------------------- lost, slow, interrupted
def test_a_lost_lease_stops_the_enrolment_before_its_next_write(tmp_path):
    x = _unit(1100, 5)
    url = f"sqlite:///{tmp_path}/g.db"
    foreign = json.dumps({"token": "other", "host": "elsewhere", "pid": 1, "acquired": time.time(),
                          "expires": time.time() + 999}).encode()

    def taken_over(b):  # as if this enrolment had stalled past its expiry and another had taken the lease
        with open_store(url) as s:
            s.put(gal.LEASE, "default.lease", foreign)

    with pytest.raises(GalleryError, match="lost its writer lease"):
        enrol(url, NpySource([_npy(tmp_path, x)]), "hers", tau=0.5, insecure_test_params=True, after_block=taken_over)
    with open_store(url) as s:
        assert s.get(gal.LOCAL, "default.block.000000") is not None
        assert s.get(gal.LOCAL, "default.block.000001") is None  # nothing written after the loss
        assert not any(i.startswith("default.block.000001") for i in s.ids(gal.LOCAL))
        assert s.get(gal.LEASE, "default.lease") == foreign  # the other holder's lease is left alone


def test_slow_blocks_keep_the_lease_alive(tmp_path, monkeypatch):
    """Blocks slower than the TTL: the heartbeat renews every TTL / 3, so a second enrolment is still refused."""
    monkeypatch.setattr(layout, "LEASE_TTL", 0.3)
    x = _unit(1100, 6)
    src, url = NpySource([_npy(tmp_path, x)]), f"sqlite:///{tmp_path}/g.db"
    refusals = []

    def slow(b):
        time.sleep(1.0)
        with pytest.raises(GalleryError, match=HELD) as e:
            enrol(url, src, "hers", tau=0.5, insecure_test_params=True)
        refusals.append(str(e.value))

    rep = enrol(url, src, "hers", tau=0.5, insecure_test_params=True, after_block=slow)
    assert rep.blocks_encrypted == 2 and len(refusals) == 2
    assert identify(x[1], url)["id"] == "emb.1"


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_enrolment_releases_its_lease(tmp_path, interrupt):
    x = _unit(1100, 7)
    src, url = NpySource([_npy(tmp_path, x)]), f"sqlite:///{tmp_path}/g.db"

    def stop(b):
        raise interrupt

    with pytest.raises(interrupt):
        enrol(url, src, "hers", tau=0.5, insecure_test_params=True, after_block=stop)
    assert _lease_record(url) is None
    rep = enrol(url, src, "hers", tau=0.5, insecure_test_params=True)  # at once: no lease to wait for
    assert (rep.blocks_encrypted, rep.blocks_skipped) == (1, 1)


# ---------------------------------------------------------------------------------------------- PostgreSQL
@pytest.mark.skipif(not PG_URL, reason="PRIVFACE_TEST_PG_URL not set (CI sets it via .ci/with-postgres)")
def test_postgres_two_threads_enrolling_one_gallery_one_is_refused(tmp_path):
    import secrets

    x = _unit(1100, 8)
    src, name, keys = NpySource([_npy(tmp_path, x)]), f"t{secrets.token_hex(6)}", f"sqlite:///{tmp_path}/k.db"
    reports, errors = _race(*[lambda hold: enrol(PG_URL, src, "hers", key_store_url=keys, tau=0.5,
                                                 insecure_test_params=True, name=name, after_block=hold)] * 2)
    assert len(reports) == 1 and len(errors) == 1 and f"gallery {name!r}" in str(errors[0])
    assert identify(x[1050], PG_URL, key_store_url=keys, name=name)["id"] == "emb.1050"
    assert _lease_record(PG_URL, name) is None
