"""Attacks on the gsm services over real loopback HTTP (issue 17, findings 1, 3, 5 and the first-message queue):
a `verify` key claiming a match for someone else's subject id with a forged Π1 m1, the same trick against the
failure counter, re-enrolment of an enrolled subject by an `enrol` key, the provider's signing key in the
template store, and an unbounded background precomputation queue. Toy 1024-bit keys."""
from __future__ import annotations

import dataclasses
import logging
import os
import threading

import numpy as np
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

from privface.protocols.gsm import Decision, Device, GsmParams, MatchStart, ServiceProvider, zk
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.gsm import GsmService, provider_key_bytes
from privface.service.client import RemoteAlreadyEnrolledError, RemoteMessageError, ServiceClient
from privface.service.clients.gsm import DeviceClient, fetch_provider_key
from privface.service.launch import serve_in_thread, serve_subprocess
from privface.service.limits import LOCKOUT_NAMESPACE, Lockout
from privface.store import open_store
from privface.templates.fixed_norm import fixed_norm_template
from privface.wire import decode

P = GsmParams.toy(ell=16, m=8, cos_threshold=0.6)
COUNTER = (LOCKOUT_NAMESPACE.format(protocol="gsm"), "hana")
LEGACY_KEY = ("gsm-provider", "ed25519-signing-key")


def template(seed: int, base=None, noise: float = 0.0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=P.ell)
    return fixed_norm_template(x if base is None else base + x * noise * P.zeta, P.m)


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    """A provider with API keys on (an `enrol` key, an `enrol`+`admin` key) and its signing key in a file."""
    root = tmp_path_factory.mktemp("gsm-sec")
    with open_store(f"sqlite:///{root / 'sp.db'}") as store:
        keys = ApiKeys(store)
        enrol, admin = keys.create("enrol", name="kiosk")[1], keys.create("enrol,admin", name="ops")[1]
        svc = GsmService(store, role="provider", params=P, signing_key_path=root / "sp.key")
        with serve_in_thread(create_app(store, [svc], keys=keys)) as url:
            yield {"url": url, "store": store, "enrol": enrol, "admin": admin,
                   "vk": fetch_provider_key(url, api_key=enrol)}


@pytest.fixture(scope="module")
def hana(provider):
    """The real subject "hana", enrolled with the provider (Π_en with its proofs) by the `enrol` key."""
    client = DeviceClient(Device("hana", P, provider_key=provider["vk"]), api_key=provider["enrol"])
    u = template(1)
    client.enrol(provider["url"], u)
    return client, u


def _terminal(tmp_path, provider, capture, **options):
    """A terminal app with API keys (a `verify` key) and the failure counter (3 rejections), over its own store."""
    store = open_store(f"sqlite:///{tmp_path / 't.db'}")
    keys = ApiKeys(store)
    verify = keys.create("verify", name="door")[1]
    svc = GsmService(store, role="terminal", params=P, provider_key=provider_key_bytes(provider["vk"]),
                     capture=lambda: capture[0], **options)
    app = create_app(store, [svc], keys=keys, lockout=Lockout(store, failures=3, base=30.0))
    return store, svc, app, verify


def _forged_pi1(subject: str) -> bytes:
    """What the attack sent: a Π1 m1 naming ``subject``, encoded by the attacker's own device (so it decrypts
    the terminal's challenge), with a made-up signature."""
    m1 = Device(subject, P).pi1_enrol(template(99))
    return MatchStart(1, dataclasses.replace(m1, signature=bytes(64)).to_bytes()).to_bytes()


def _claim_over_http(url: str, api_key: str, start: bytes, bit: bool) -> bytes:
    with ServiceClient(url, "gsm", api_key=api_key) as http:
        http.step("match/start", start)
        return http.step("match/finish", Decision(bit).to_bytes())


def test_forged_pi1_first_message_gets_no_match_and_changes_no_counter(tmp_path, provider, hana):
    """Finding 1: a `verify` key sent an unsigned Π1 m1 naming "hana" and its own bit 1 → `match: true`. Now σ is
    checked for Π1 as for Π2/Π3 (even where Π1 is allowed): 400 before any state, no match, no counter."""
    capture = [template(2)]
    store, _, app, verify = _terminal(tmp_path, provider, capture, allow_pi1=True)
    with store, serve_in_thread(app) as url:
        for bit in (True, False):
            with pytest.raises(RemoteMessageError, match="signature"):
                _claim_over_http(url, verify, _forged_pi1("hana"), bit)
        assert store.get(*COUNTER) is None


def test_pi1_is_refused_by_default(tmp_path, provider, hana):
    """A service terminal serves Π1 only when its operator allows it by name; Π2 and Π3 still work."""
    client, u = hana
    capture = [u]
    store, _, app, verify = _terminal(tmp_path, provider, capture)
    with store, serve_in_thread(app) as url:
        device = DeviceClient(client.device, api_key=verify)
        for call in (device.match, device.present):
            with pytest.raises(RemoteMessageError, match="off on this terminal"):
                call(url, "pi1")
        assert device.match(url, "pi2").match and device.match(url, "pi3").match


def test_pi1_cannot_reset_or_lock_a_real_subjects_counter(tmp_path, provider, hana, caplog):
    """Finding 1: the counter was keyed by the subject of the unsigned Π1 m1, so a claimed match reset a real
    subject's rejections (unlimited Π2/Π3 guessing) and claimed non-matches locked the subject out. Now a
    forged Π1 is refused, and even a genuine, allowed Π1 answers a Claim, is audited as a claim and leaves the
    counter alone."""
    client, u = hana
    capture = [template(2)]
    store, _, app, verify = _terminal(tmp_path, provider, capture, allow_pi1=True)
    with store, serve_in_thread(app) as url:
        device = DeviceClient(client.device, api_key=verify)
        for _ in range(2):  # two real rejections: one more locks "hana" out
            assert not device.match(url, "pi2").match
        counted = store.get(*COUNTER)
        assert counted is not None
        with pytest.raises(RemoteMessageError, match="signature"):  # reset attempt
            _claim_over_http(url, verify, _forged_pi1("hana"), True)
        for _ in range(3):  # lock-out attempt
            with pytest.raises(RemoteMessageError, match="signature"):
                _claim_over_http(url, verify, _forged_pi1("hana"), False)
        assert store.get(*COUNTER) == counted
        caplog.set_level(logging.INFO, logger="privface.audit")
        start = MatchStart(1, client.device.first_message().to_bytes()).to_bytes()
        for bit in (True, False):  # the real device's own claims, whatever the capture
            answer = _claim_over_http(url, verify, start, bit)
            assert decode(answer) == ("gsm.Claim", {"device_claims_match": bit})
        assert store.get(*COUNTER) == counted
        finishes = [r.fields for r in caplog.records if getattr(r, "fields", {}).get("step") == "match/finish"]
        assert [f["decision"] for f in finishes[-2:]] == ["pi1-claimed-match", "pi1-claimed-no-match"]
        capture[0] = u
        assert device.match(url, "pi2").match  # Π2 still decides, and an acceptance resets the counter
        assert store.get(*COUNTER) is None


def test_enrolment_is_create_only_unless_admin(tmp_path, provider, hana):
    """Finding 3: any `enrol` key replaced an enrolled subject's key and template, then matched as that subject.
    Now an `enrol` key gets 409 (checked at enrol/start and, atomically, at enrol/finish), the old m1 still
    matches; an `admin` key may replace."""
    client, u = hana
    url, store = provider["url"], provider["store"]
    before = store.get("gsm", "hana")
    mallory = DeviceClient(Device("hana", P, provider_key=provider["vk"]), api_key=provider["enrol"])
    with pytest.raises(RemoteAlreadyEnrolledError, match="already enrolled") as refused:
        mallory.enrol(url, template(7))
    assert refused.value.status == 409 and store.get("gsm", "hana") == before
    capture = [u]
    t_store, _, app, verify = _terminal(tmp_path, provider, capture)
    with t_store, serve_in_thread(app) as t_url:
        assert DeviceClient(client.device, api_key=verify).match(t_url, "pi2").match

    # two enrolments of a new subject race: both pass enrol/start, only the first finish wins
    devices = [Device("ivy", P, provider_key=provider["vk"]) for _ in range(2)]
    https = [ServiceClient(url, "gsm", api_key=provider["enrol"]) for _ in devices]
    try:
        challenges = [h.step("enrol/start", d.enrol_start(template(8)).to_bytes()) for h, d in zip(https, devices)]
        answers = [d.enrol_respond(zk.NormChallenge.from_bytes(c, d.pk, P.ell)).to_bytes()
                   for d, c in zip(devices, challenges)]
        first = https[0].step("enrol/finish", answers[0])
        with pytest.raises(RemoteAlreadyEnrolledError, match="enrolled meanwhile"):
            https[1].step("enrol/finish", answers[1])
    finally:
        for h in https:
            h.close()
    assert store.get("gsm", "ivy") == first

    admin = DeviceClient(Device("ivy", P, provider_key=provider["vk"]), api_key=provider["admin"])
    replaced = admin.enrol(url, template(9))
    assert store.get("gsm", "ivy") == replaced.to_bytes() != first


def _private_bytes(pem: bytes) -> list[bytes]:
    """The key as it would appear in a database: its PEM body lines and its raw 32-byte seed."""
    key = load_pem_private_key(pem, password=None)
    raw = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return [raw, *(line for line in pem.splitlines() if line and not line.startswith(b"-----"))]


def _store_bytes(db) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))  # the database, its WAL and SHM


def test_signing_key_file_is_created_0600_and_kept_out_of_the_store(tmp_path, capsys):
    """Finding 5: the provider's Ed25519 key sat in clear in the store, so a copy of the database forged m1
    for anyone. Now `--signing-key PATH` (default: next to a SQLite store) holds it, created 0600, and the
    provider refuses a key file others may read."""
    from privface.cli import main

    toy = GsmParams.toy()
    for db, options, path in ((tmp_path / "a" / "sp.db", ["--signing-key", str(tmp_path / "keys" / "sp.pem")],
                               tmp_path / "keys" / "sp.pem"),
                              (tmp_path / "b" / "sp.db", [], tmp_path / "b" / "sp.gsm-signing.key")):
        serve = ["--role", "provider", "--insecure-test-params", *options]
        with serve_subprocess("gsm", f"sqlite:///{db}", serve) as url:
            vk = fetch_provider_key(url)
            dev = Device("ines", toy, provider_key=vk)
            DeviceClient(dev).enrol(url, fixed_norm_template(np.random.default_rng(5).normal(size=toy.ell), toy.m))
        assert path.stat().st_mode & 0o777 == 0o600
        pem = path.read_bytes()
        assert provider_key_bytes(load_pem_private_key(pem, password=None).public_key()) == provider_key_bytes(vk)
        data = _store_bytes(db)
        assert b"ines" in data and not any(secret in data for secret in _private_bytes(pem))
    os.chmod(path, 0o640)
    assert main(["serve", "--protocol", "gsm", "--role", "provider", "--no-auth", "--insecure-test-params",
                 "--db", f"sqlite:///{db}", "--port", "0"]) != 0
    assert "accessible by others" in capsys.readouterr().err


def test_clear_text_key_of_an_old_store_is_moved_into_the_key_file(tmp_path):
    """Finding 5, upgrade: a store written by an older privface holds the key in clear. Without a key file the
    provider refuses to start and says how to migrate; with one, the key moves there (same public key, so
    terminals and issued m1 stay valid) and its bytes leave the database."""
    old = ServiceProvider(P)._signing_key
    pem = old.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    db = tmp_path / "old.db"
    with open_store(f"sqlite:///{db}") as store:
        store.put(*LEGACY_KEY, pem)
        with pytest.raises(Exception, match="--signing-key"):
            GsmService(store, role="provider", params=P)
        assert store.get(*LEGACY_KEY) == pem
    with serve_subprocess("gsm", f"sqlite:///{db}", ["--role", "provider", "--insecure-test-params"]) as url:
        assert provider_key_bytes(fetch_provider_key(url)) == provider_key_bytes(old.public_key())
    key_file = tmp_path / "old.gsm-signing.key"
    assert key_file.stat().st_mode & 0o777 == 0o600 and key_file.read_bytes() == pem
    with open_store(f"sqlite:///{db}") as store:
        assert store.get(*LEGACY_KEY) is None
    assert not any(secret in _store_bytes(db) for secret in _private_bytes(pem))


def test_precompute_queue_is_bounded(tmp_path):
    """The terminal's background precomputation (r^N and reuse tables per presented m1) was an unbounded queue:
    each distinct valid m1 added a job. Now at most `m1_pending` wait (the oldest dropped); a dropped m1 still
    matches, computing inline."""
    sp = ServiceProvider(P, insecure_skip_proofs=True)
    first = Device("d0", P, provider_key=sp.public_key)
    devices = [first] + [Device(f"d{i}", P, keypair=(first.pk, first._sk), provider_key=sp.public_key)
                         for i in range(1, 6)]
    u = template(1)
    for d in devices:
        d.accept_enrolment(sp.enrol_unproven(d.unproven_enrol_request(u)))
    capture = [u]
    with open_store(f"sqlite:///{tmp_path / 't.db'}") as store:
        svc = GsmService(store, role="terminal", params=P, provider_key=provider_key_bytes(sp.public_key),
                         capture=lambda: capture[0], m1_pending=2)
        cache, gate = svc.m1_cache, threading.Event()
        cache._schedule(b"gate", gate.wait)  # keeps the background thread busy while m1 arrive
        with serve_in_thread(create_app(store, [svc])) as url:
            try:
                for d in devices:
                    DeviceClient(d).present(url, "pi2")
                    assert cache.pending <= 2
                assert cache.dropped == len(devices) - 2 and len(cache) == len(devices)
            finally:
                gate.set()
            cache.wait()
            assert cache.pending == 0
            assert DeviceClient(devices[0]).match(url, "pi2").match  # its precomputation was dropped
