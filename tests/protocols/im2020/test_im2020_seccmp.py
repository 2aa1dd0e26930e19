"""im2020 secure-comparison mode (seed 000 §VII Fig. 8): the server learns only the decision bit.
Toy HE keys; the OT and garbled circuit always use their real group."""
import dataclasses
import json
import os

import numpy as np
import pytest

from privface.crypto.joye_libert import JLParams
from privface.errors import ProtocolError
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import (
    AuthChallenge,
    AuthFinish,
    AuthResult,
    Client,
    CompareChallenge,
    CompareFinish,
    CompareRequest,
    CompareSession,
    Im2020Params,
    Server,
)
from privface.service.app import create_app
from privface.service.base import MessageError, SessionError
from privface.service.bindings.im2020 import Im2020Service
from privface.service.client import RemoteMessageError, RemoteSessionError
from privface.service.clients import im2020 as remote
from privface.service.launch import serve_in_thread as serving
from privface.store import open_store

DLIB = "dlib-resnet128"  # the face-like templates and the probes around τ are dlib's (τ = 4602)
SECURE = Im2020Params.toy(mode="secure-comparison", backend=DLIB)
BASIC = Im2020Params.toy(backend=DLIB)
# k = 80 so that compare_bits=64 really reduces (the toy k = 48 is below 64)
WIDE64 = Im2020Params(jl=JLParams(bits=512, k=80), insecure_test_params=True, mode="secure-comparison",
                      compare_bits=64, backend=DLIB)


def face(seed, params=SECURE):
    return attacks.face_like_template(params, np.random.default_rng(seed))


def near(t, seed, spread):
    return np.clip(t + np.random.default_rng(seed).integers(-spread, spread + 1, t.shape), -128, 128)


def sed(a, b):
    return int(((np.asarray(a) - np.asarray(b)) ** 2).sum())


@pytest.fixture
def store(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'im2020.db'}") as s:
        yield s


def enrol(store, params=SECURE):
    """alice's client, her enrolled template and a server that holds it."""
    client, enrolled, server = Client("alice", params, workers=1), face(1, params), Server(store, params)
    server.enrol(client.enrol(enrolled))
    return client, enrolled, server


def run_secure(server, client, probe, tamper=None, forge=None):
    """auth/start → auth/compare → auth/finish in process; ``tamper`` may rewrite the CompareFinish,
    ``forge`` replace s* by forge(s*)."""
    challenge, session = server.auth_start(client.auth_start(probe))
    s_star = client.blinded_score(challenge)
    request, evaluator = client.compare_request(challenge, forge(s_star) if forge else s_star)
    garbled, cmp_session = server.auth_compare(session, request)
    finish = client.compare_finish(evaluator, garbled)
    if tamper:
        finish = tamper(finish)
    return server.compare_finish(cmp_session, finish).accepted


@pytest.mark.parametrize("params", [SECURE, WIDE64], ids=["full-k", "64-bit"])
def test_decisions_equal_plaintext_and_basic_mode(store, params):
    client, enrolled, secure = enrol(store, params)
    basic = Server(store, dataclasses.replace(params, mode="basic"))
    probes = [near(enrolled, 2, 2), near(enrolled, 3, 20), face(4, params)]
    for probe in probes:
        want = sed(enrolled, probe) < params.tau
        assert run_secure(secure, client, probe) is want
        challenge, session = basic.auth_start(client.auth_start(probe))
        assert challenge.compare_bits is None
        assert basic.auth_finish(session, client.auth_finish(challenge))[0].accepted is want
    assert [sed(enrolled, p) < params.tau for p in probes] == [True, False, False]


def test_challenge_names_the_width():
    assert SECURE.circuit_bits == SECURE.jl.k and WIDE64.circuit_bits == 64
    with pytest.raises(ValueError, match="compare_bits"):
        Im2020Params.toy(mode="secure-comparison", compare_bits=32)
    with pytest.raises(ValueError, match="mode"):
        Im2020Params.toy(mode="fast")


def test_made_up_output_label_is_refused(store):
    client, enrolled, server = enrol(store)
    before = store.get("im2020", "alice")
    forged = CompareFinish((1).to_bytes(4, "big") + bytes(16))  # one label, all zero
    with pytest.raises(ProtocolError, match="output label"):
        run_secure(server, client, near(enrolled, 2, 2), tamper=lambda _: forged)
    assert store.get("im2020", "alice") == before


@pytest.mark.parametrize("params", [SECURE, WIDE64], ids=["full-k", "64-bit"])
def test_forged_blinded_score_is_rejected(store, params):
    """A client that feeds the circuit a made-up s* (here: the impostor's s* plus one, and 0) is rejected."""
    client, _, server = enrol(store, params)
    for forge in (lambda s: s + 1, lambda s: 0):
        assert run_secure(server, client, face(9, params), forge=forge) is False


def test_basic_messages_refused_in_secure_mode_and_vice_versa(store):
    client, enrolled, secure = enrol(store)
    basic = Server(store, BASIC)
    challenge, session = secure.auth_start(client.auth_start(enrolled))
    with pytest.raises(ProtocolError, match="secure-comparison"):
        client.auth_finish(challenge)
    with pytest.raises(ProtocolError, match="does not accept s"):
        secure.auth_finish(session, AuthFinish(client.blinded_score(challenge)))
    b_challenge, b_session = basic.auth_start(client.auth_start(enrolled))
    with pytest.raises(ProtocolError, match="basic mode"):
        basic.auth_compare(b_session, CompareRequest(b""))
    with pytest.raises(ProtocolError, match="width"):
        client.compare_request(dataclasses.replace(challenge, compare_bits=32))


def test_service_step_order_and_bad_bodies(store):
    svc = Im2020Service(store, params=SECURE)
    client = Client("alice", SECURE, workers=1)
    enrolled = face(1)
    svc.handle("enrol", client.enrol(enrolled).to_bytes(), None)
    start = svc.handle("auth/start", client.auth_start(enrolled).to_bytes(), None)
    challenge = AuthChallenge.from_bytes(start.body)
    request, evaluator = client.compare_request(challenge)
    with pytest.raises(SessionError, match="auth/compare"):  # finish straight after start
        svc.handle("auth/finish", CompareFinish(b"").to_bytes(), start.state)
    with pytest.raises(SessionError):
        svc.handle("auth/compare", request.to_bytes(), None)
    with pytest.raises(MessageError, match="OT request"):
        svc.handle("auth/compare", CompareRequest(b"\x00\x01").to_bytes(), start.state)
    cmp = svc.handle("auth/compare", request.to_bytes(), start.state)
    assert isinstance(cmp.state, CompareSession)
    with pytest.raises(SessionError):  # a compare session cannot be compared again
        svc.handle("auth/compare", request.to_bytes(), cmp.state)
    with pytest.raises(MessageError):
        svc.handle("auth/finish", b"junk", cmp.state)
    finish = client.compare_finish(evaluator, CompareChallenge.from_bytes(cmp.body))
    assert AuthResult.from_bytes(svc.handle("auth/finish", finish.to_bytes(), cmp.state).body).accepted


def test_over_http_follows_the_server_mode(store):
    with serving(create_app(store, [Im2020Service(store, params=SECURE)])) as url:
        with remote.service_client(url) as http:
            alice = Client("alice", SECURE, workers=1)
            enrolled = face(1)
            remote.enrol(http, alice, enrolled)
            # a Client built with basic params still follows the server's challenge
            plain_alice = Client("alice", BASIC, keypair=(alice.pk, alice._sk), workers=1)
            genuine = remote.verify(http, plain_alice, near(enrolled, 2, 2))
            assert genuine["accepted"] is True and genuine["mode"] == "secure-comparison"
            assert genuine["compare_bits"] == SECURE.jl.k
            assert genuine["compare_bytes"] > 0 and genuine["s3_compare_ms"] > 0
            assert set(genuine["server_ms_by_step"]) == {"auth/start", "auth/compare", "auth/finish"}
            assert remote.verify(http, alice, face(9))["accepted"] is False
            # skipping auth/compare is a step-order error; a made-up label is refused
            http.reset()
            challenge = AuthChallenge.from_bytes(http.step("auth/start", alice.auth_start(enrolled).to_bytes()))
            with pytest.raises(RemoteSessionError):
                http.step("auth/finish", CompareFinish(bytes(20)).to_bytes())
            http.reset()
            challenge = AuthChallenge.from_bytes(http.step("auth/start", alice.auth_start(enrolled).to_bytes()))
            request, _ = alice.compare_request(challenge)
            http.step("auth/compare", request.to_bytes())
            with pytest.raises(RemoteMessageError, match="output label"):
                http.step("auth/finish", CompareFinish((1).to_bytes(4, "big") + bytes(16)).to_bytes())
            assert remote.verify(http, alice, near(enrolled, 3, 2))["accepted"] is True


def test_verify_mode_insists_before_sending_anything(store):
    with serving(create_app(store, [Im2020Service(store, params=SECURE)])) as url:
        with remote.service_client(url) as http:
            alice = Client("alice", SECURE, workers=1)
            remote.enrol(http, alice, face(1))
            before = len(http.stats)
            with pytest.raises(remote.ModeMismatchError, match="secure-comparison"):
                remote.verify(http, alice, face(1), mode="basic")
            assert [s.step for s in http.stats[before:]] == ["auth/start"]
            assert remote.verify(http, alice, face(1), mode="secure-comparison")["accepted"] is True


def test_serve_mode_options():
    from privface.cli import build_parser
    from privface.cli.serve import _service_options

    a = build_parser().parse_args(["serve", "--protocol", "im2020", "--mode", "secure-comparison",
                                   "--compare-bits", "64"])
    params = _service_options(a, "im2020")["params"]
    assert params.mode == "secure-comparison" and params.circuit_bits == 64 and params.security_bits == 112
    a = build_parser().parse_args(["serve", "--protocol", "im2020", "--mode", "secure-comparison"])
    params = _service_options(a, "im2020")["params"]
    assert params.circuit_bits == params.jl.k == 136
    options = _service_options(build_parser().parse_args(["serve", "--protocol", "im2020"]), "im2020")
    assert options["params"].mode == "basic"


def test_cli_serve_secure_comparison_and_verify_follows(tmp_path):
    """`privface serve --mode secure-comparison`; `privface verify` follows it, or refuses with --mode basic."""
    from test_im2020_http import _privface

    from privface import demo_data
    from privface.service.launch import serve_subprocess

    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    photo = str(demo_data.enrolled_photo())
    with serve_subprocess("im2020", f"sqlite:///{tmp_path / 's.db'}",
                          ["--insecure-test-params", "--mode", "secure-comparison"]) as url:
        enrol = _privface("enrol", "--server", url, "--id", "grace", photo, "--insecure-test-params", env=env)
        assert enrol.returncode == 0, enrol.stderr
        ok = _privface("verify", "--server", url, "--id", "grace", photo, "--json", env=env)
        assert ok.returncode == 0, ok.stderr
        out = json.loads(ok.stdout)
        assert out["accepted"] is True and out["mode"] == "secure-comparison" and out["compare_bits"] == 48
        assert out["compare_bytes"] > 10_000 and out["s3_compare_ms"] > 0
        refused = _privface("verify", "--server", url, "--id", "grace", photo, "--mode", "basic", env=env)
        assert refused.returncode == 2 and "runs the secure-comparison mode" in refused.stderr


@pytest.mark.slow
@pytest.mark.parametrize("compare_bits", [None, 64])
def test_real_size_secure_comparison(store, compare_bits):
    """112-bit keys (JL 2048, k = 136) and the full-width (or 64-bit) circuit: genuine accepted, impostor
    refused, the same decisions as the basic mode on the same pairs."""
    params = Im2020Params.for_level(112, mode="secure-comparison", compare_bits=compare_bits)
    client, enrolled, server = enrol(store, params)
    basic = Server(store, dataclasses.replace(params, mode="basic", compare_bits=None))
    for probe, expect in ((near(enrolled, 2, 2), True), (face(7, params), False)):
        assert run_secure(server, client, probe) == expect == (sed(probe, enrolled) < params.tau)
        challenge, session = basic.auth_start(client.auth_start(probe))
        assert basic.auth_finish(session, client.auth_finish(challenge))[0].accepted == expect


def test_forged_labels_count_as_rejections_over_http(store):
    """Issue 35 A6: a forged output label is refused (400) and counted by the failure counter like a rejection,
    so `failures` forged labels lock the subject out as `failures` rejected attempts do."""
    from privface.service.client import ServiceError
    from privface.service.limits import LOCKOUT_NAMESPACE, Lockout

    lock = Lockout(store, failures=3, base=600)
    with serving(create_app(store, [Im2020Service(store, params=SECURE)], lockout=lock)) as url, \
            remote.service_client(url) as http:
        alice, enrolled = Client("alice", SECURE, workers=1), face(1)
        remote.enrol(http, alice, enrolled)
        forged = CompareFinish((1).to_bytes(4, "big") + bytes(16)).to_bytes()
        for n in range(1, 4):
            http.reset()
            challenge = AuthChallenge.from_bytes(http.step("auth/start", alice.auth_start(enrolled).to_bytes()))
            request, _ = alice.compare_request(challenge)
            http.step("auth/compare", request.to_bytes())
            with pytest.raises(RemoteMessageError, match="output label"):
                http.step("auth/finish", forged)
            assert json.loads(store.get(LOCKOUT_NAMESPACE.format(protocol="im2020"), "alice"))["failures"] == n
        http.reset()
        with pytest.raises(ServiceError) as e:  # locked out: even the genuine face waits for the back-off
            remote.verify(http, alice, enrolled)
        assert e.value.status == 429
