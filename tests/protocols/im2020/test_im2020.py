"""im2020 (seed 000): parties, BlindESED, TP-signed registration, the ProtocolService, App. E attacks."""
import dataclasses
import json

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.errors import ProtocolError, UnknownSubjectError
from privface.eval import im2020_attacks as attacks
from privface.protocols import catalogue
from privface.protocols.im2020 import (
    DEFAULT_TAU,
    AuthChallenge,
    AuthFinish,
    AuthResult,
    AuthStart,
    Client,
    EnrolRequest,
    EnrolResponse,
    Im2020Params,
    Randomizers,
    RevokeRequest,
    Server,
    SignedEnrolRequest,
    TrustedParty,
    decide,
    unblind,
)
from privface.service.base import MessageError, NotEnrolledError, SessionError
from privface.service.bindings.im2020 import Im2020Service
from privface.store import open_store

TOY = Im2020Params.toy(backend="dlib-resnet128")  # face_like_template and the `backend` fixture are dlib's


@pytest.fixture(scope="module")
def client():
    return Client("alice", TOY, workers=1)


@pytest.fixture
def server():
    return Server(open_store("sqlite://"), TOY)


def face(seed: int) -> np.ndarray:
    return attacks.face_like_template(TOY, np.random.default_rng(seed))


def near(t: np.ndarray, seed: int, spread: int) -> np.ndarray:
    return np.clip(t + np.random.default_rng(seed).integers(-spread, spread + 1, t.shape), -128, 128)


def run(client, server, probe):
    challenge, session = server.auth_start(AuthStart.from_bytes(client.auth_start(probe).to_bytes()))
    finish = client.auth_finish(AuthChallenge.from_bytes(challenge.to_bytes()))
    return server.auth_finish(session, AuthFinish.from_bytes(finish.to_bytes()))


def test_decisions_and_scores_equal_plaintext(client, server):
    enrolled = face(1)
    server.enrol(EnrolRequest.from_bytes(client.enrol(enrolled).to_bytes()))
    probes = [enrolled, near(enrolled, 2, 3), near(enrolled, 3, 9), face(4), -enrolled]
    for probe in probes:
        result, d = run(client, server, probe)
        sed = int(((probe - enrolled) ** 2).sum())
        assert d.score == sed and d.in_range
        assert result.accepted == (sed < TOY.tau)
    assert [run(client, server, p)[0].accepted for p in probes[:2]] == [True, True]
    assert run(client, server, probes[3])[0].accepted is False


def test_largest_distance_does_not_wrap(client, server):
    hi, lo = np.full(128, 128), np.full(128, -128)
    server.enrol(client.enrol(hi))
    _, d = run(client, server, lo)
    assert d.score == TOY.max_sed == 2**23 and d.in_range and not d.accepted


@given(st.integers(0, 2**23), st.data())
@settings(max_examples=50, deadline=None)
def test_unblind_inverts_the_blinding(s, data):
    k = 136
    rnd = Randomizers.draw(k)
    assert rnd.r0 % 2 == 1 and 0 <= rnd.r1 < 2**k
    assert unblind((rnd.r0**2 * s + rnd.r1) % 2**k, rnd, k) == s


def test_out_of_range_score_is_a_failed_attempt():
    d = decide(TOY.max_sed + 1, tau=TOY.max_sed, max_sed=TOY.max_sed)
    assert not d.in_range and not d.accepted
    assert decide(5, 6, TOY.max_sed).accepted


def test_blinded_challenge_hides_the_score(client, server):
    enrolled = face(5)
    server.enrol(client.enrol(enrolled))
    blinded = set()
    for _ in range(3):
        challenge, _ = server.auth_start(client.auth_start(enrolled))
        blinded.add(client.auth_finish(challenge).blinded_score)
    assert len(blinded) == 3 and 0 not in blinded  # s = 0 each time, s* = r1 fresh each time


def _register_request(client, template=None):
    return client.enrol(face(7) if template is None else template)


@pytest.mark.parametrize("mutate, match", [
    (lambda r: dataclasses.replace(r, c_a=r.c_a[:-1]), "128 entries"),
    (lambda r: dataclasses.replace(r, c_a=[r.c_a[0] + 2**r.pk_k] + r.c_a[1:]), "message space"),
    (lambda r: dataclasses.replace(r, c_beta=[0] + r.c_beta[1:]), "invalid ciphertext"),
    (lambda r: dataclasses.replace(r, c_beta=[r.pk_n] + r.c_beta[1:]), "invalid ciphertext"),
    (lambda r: dataclasses.replace(r, c_beta=[_non_jacobi(r.pk_n)] + r.c_beta[1:]),
     "invalid ciphertext"),
    (lambda r: dataclasses.replace(r, pk_k=30), "only public keys with a 512-bit N and k = 48"),
    (lambda r: dataclasses.replace(r, pk_n=r.pk_n + 2), "invalid public key|invalid ciphertext"),
    (lambda r: dataclasses.replace(r, subject_id="../etc"), "subject id"),
])
def test_bad_registration_is_refused_and_stores_nothing(client, server, mutate, match):
    with pytest.raises(ProtocolError, match=match):
        server.enrol(mutate(_register_request(client)))
    assert server.store.ids("im2020") == []


def _non_jacobi(n: int) -> int:
    import gmpy2

    x = 2
    while gmpy2.jacobi(x, n) != -1:
        x += 1
    return x


def test_real_size_keys_are_required_without_the_test_switch(client):
    strict = Server(open_store("sqlite://"), Im2020Params())
    with pytest.raises(ProtocolError, match="only public keys with a 2048-bit N and k = 136"):
        strict.enrol(_register_request(client))


def test_bad_probe_is_refused(client, server):
    server.enrol(_register_request(client))
    good = client.auth_start(face(7))
    with pytest.raises(ProtocolError, match="128 entries"):
        server.auth_start(dataclasses.replace(good, c_beta=good.c_beta[:5]))
    with pytest.raises(ProtocolError, match="invalid ciphertext"):
        server.auth_start(dataclasses.replace(good, c_beta=[1 << 600] + good.c_beta[1:]))
    # in range but outside the ciphertext group: caught by the checks that run inside BlindESED
    n, p = int(client.pk.n), int(client._sk.p)
    minus = next(c for c in range(2, 1000) if gmpy2.jacobi(c, n) == -1)
    for bad, match in ((minus, "entry 70: .*Jacobi symbol −1"), (3 * p, "entry 70: .*not a unit")):
        with pytest.raises(ProtocolError, match=match):
            server.auth_start(dataclasses.replace(good, c_beta=good.c_beta[:70] + [bad] + good.c_beta[71:]))
    with pytest.raises(UnknownSubjectError):
        server.auth_start(dataclasses.replace(good, subject_id="bob"))
    challenge, session = server.auth_start(good)
    with pytest.raises(ProtocolError, match="message space"):
        server.auth_finish(session, AuthFinish(2**session.k))


def test_client_refuses_bad_templates_and_challenges(client):
    with pytest.raises(ProtocolError):
        client.auth_start(np.zeros(127, dtype=np.int64))
    with pytest.raises(ProtocolError):
        client.auth_start(np.full(128, 129))
    with pytest.raises(ProtocolError):
        client.auth_start(np.zeros(128))  # floats are not a quantized template
    with pytest.raises(ProtocolError, match="columns"):
        client.auth_finish(AuthChallenge(3, [3]))


# ---------------------------------------------------------------- §VII trusted party


def test_tp_signed_registration(client):
    tp = TrustedParty(TOY)
    server = Server(open_store("sqlite://"), TOY, tp_public_key=tp.public_key)
    enrolled = face(8)
    signed = client.enrol_signed(tp.enrol(client.tp_request(enrolled)))
    assert server.enrol(SignedEnrolRequest.from_bytes(signed.to_bytes())) == EnrolResponse("alice", False)
    assert run(client, server, near(enrolled, 9, 2))[0].accepted
    # a forged C (another valid encryption), a missing σ, a foreign TP's σ, another ID, another serial or
    # expiry, an unsigned request: all refused
    other = client.enrol(enrolled)
    forged = [dataclasses.replace(signed, c_a=other.c_a, c_beta=other.c_beta),
              dataclasses.replace(signed, signature=b""),
              client.enrol_signed(TrustedParty(TOY).enrol(client.tp_request(enrolled))),
              dataclasses.replace(signed, subject_id="mallory"),
              dataclasses.replace(signed, serial=signed.serial + 1),
              dataclasses.replace(signed, expires=signed.expires + 3600),
              other]
    before = server.store.get("im2020", "alice")
    for req in forged:
        with pytest.raises(ProtocolError, match="signature|signed"):
            server.enrol(req, replace=True)
    assert server.store.get("im2020", "alice") == before and server.store.ids("im2020") == ["alice"]
    with pytest.raises(ProtocolError, match="no trusted-party key"):  # a server without a TP cannot check σ
        Server(open_store("sqlite://"), TOY).enrol(signed)


def test_tp_refuses_non_face_templates(client):
    tp = TrustedParty(TOY)
    for bad in (np.zeros(128, dtype=np.int64), np.full(128, 128), np.full(128, 1)):
        with pytest.raises(ProtocolError, match="face"):
            tp.enrol(client.tp_request(bad))
    req = client.tp_request(face(3))
    with pytest.raises(ProtocolError):
        tp.enrol(dataclasses.replace(req, template=req.template[:10]))


# ---------------------------------------------------------------- the ProtocolService


@pytest.fixture
def service():
    return Im2020Service(open_store("sqlite://"), params=TOY)


def test_service_flow(client, service):
    assert service.name == "im2020" and service.steps == ("enrol", "auth/start", "auth/finish", "revoke/start",
                                                        "revoke/finish", "revoke")
    enrolled = face(10)
    out = service.handle("enrol", client.enrol(enrolled).to_bytes(), None)
    assert out.state is None and EnrolResponse.from_bytes(out.body).replaced is False
    for probe, expect in ((near(enrolled, 11, 3), True), (face(12), False)):
        start = service.handle("auth/start", client.auth_start(probe).to_bytes(), None)
        assert start.state is not None
        finish = client.auth_finish(AuthChallenge.from_bytes(start.body))
        done = service.handle("auth/finish", finish.to_bytes(), start.state)
        assert done.state is None and AuthResult.from_bytes(done.body).accepted is expect
    service.handle("revoke", RevokeRequest("alice").to_bytes(), None)
    with pytest.raises(NotEnrolledError):
        service.handle("auth/start", client.auth_start(enrolled).to_bytes(), None)
    with pytest.raises(NotEnrolledError):
        service.handle("revoke", RevokeRequest("alice").to_bytes(), None)


def test_service_refuses_bad_input_without_state_change(client, service):
    enrolled = face(13)
    service.handle("enrol", client.enrol(enrolled).to_bytes(), None)
    store = service.server.store
    before = store.get("im2020", "alice")
    good = client.enrol(face(14)).to_bytes()
    start_bytes = client.auth_start(enrolled).to_bytes()
    bad = [("enrol", good[:-1]), ("enrol", good + b"\x00"), ("enrol", b""),
           ("enrol", start_bytes), ("enrol", b"\xff" * 64),
           ("auth/start", start_bytes[:100]), ("revoke", RevokeRequest("alice").to_bytes()[:-2]),
           ("auth/start", AuthStart("alice", TOY.backend, [0], [1]).to_bytes()),
           ("enrol", good + b"\x00" * (4 * 2**20)),  # oversized: over the wire maximum
           ("auth/start", AuthStart("alice", TOY.backend, [1] * 1024, [1] * 1024).to_bytes())]  # too many entries
    for step, body in bad:
        with pytest.raises(MessageError):
            service.handle(step, body, None)
        assert store.ids("im2020") == ["alice"] and store.get("im2020", "alice") == before
    with pytest.raises(MessageError):
        service.handle("nope", b"", None)
    with pytest.raises(SessionError):
        service.handle("auth/finish", AuthFinish(1).to_bytes(), None)
    with pytest.raises(SessionError):
        service.handle("enrol", good, object())
    start = service.handle("auth/start", start_bytes, None)
    with pytest.raises(MessageError):
        service.handle("auth/finish", b"junk", start.state)
    with pytest.raises(MessageError):
        service.handle("auth/finish", AuthFinish(2**60).to_bytes(), start.state)
    assert store.get("im2020", "alice") == before


def test_service_verifies_tp_signatures_from_pem(client):
    tp = TrustedParty(TOY)
    service = Im2020Service(open_store("sqlite://"), params=TOY, tp_public_key=tp.public_key_pem())
    with pytest.raises(MessageError, match="signed"):
        service.handle("enrol", client.enrol(face(15)).to_bytes(), None)
    signed = client.enrol_signed(tp.enrol(client.tp_request(face(15))))
    service.handle("enrol", signed.to_bytes(), None)
    assert service.server.store.ids("im2020") == ["alice"]


# ---------------------------------------------------------------- App. E experiments (few trials; bench runs more)


def test_attacks_are_rejected():
    out = attacks.run_all(TOY, trials=5000, he_trials=3, seed=1, hbcs_pairs=1)
    assert out["hbcs"]["equal"] is True
    rows = {r["attack"]: r for r in out["experiments"]}
    assert rows["forged_s_star"]["accepted"] == 0
    assert rows["forged_c_prime"]["accepted"] == 0
    rt = rows["random_templates"]
    assert rt["mismatches"] == 0 and rt["rate"] <= rt["c"] + 1 / rt["trials"]
    mc1 = rows["mc1_modified_s_star"]
    assert mc1["decisions_differ"] == 0 and mc1["accepted"] == 0
    assert 0.2 < mc1["s_c_top_quarter_fraction"] < 0.3  # s_c is spread uniformly over M


def test_catalogue_declares_threat_model_and_leakage():
    desc = next(d for d in catalogue() if d["name"] == "im2020")
    assert desc["modes"]["basic"]["leakage"]["server"][0].startswith("squared Euclidean distance")
    assert desc["modes"]["secure-comparison"]["leakage"]["server"] == ["decision r", "subject ID"]
    assert {lvl["security_bits"] for lvl in desc["security_levels"]} == {112, 128}
    assert desc["parameters"]["tau"] == DEFAULT_TAU
    json.dumps(desc)


def test_params_refuse_inconsistent_settings():
    with pytest.raises(ValueError):
        Im2020Params(tau=0)
    with pytest.raises(ValueError):
        Im2020Params.for_level(80)
    assert Im2020Params(tau=4000).tau == 4000 and Im2020Params.for_level(128).jl.bits == 3072


@pytest.mark.realsize
def test_real_size_run_112_bit():
    params = Im2020Params()
    client, server = Client("alice", params), Server(open_store("sqlite://"), params)
    enrolled = attacks.face_like_template(params, np.random.default_rng(20))
    server.enrol(EnrolRequest.from_bytes(client.enrol(enrolled).to_bytes()))
    probe = near(enrolled, 21, 4)
    result, d = run(client, server, probe)
    assert d.score == int(((probe - enrolled) ** 2).sum()) and result.accepted == (d.score < params.tau)
    assert client.pk.bits == 2048 and client.pk.k == 136


def test_tp_accepts_the_norms_of_real_dlib_embeddings(client):
    """ORL's dlib embeddings have norms 1.27–1.57; a template at either end passes the TP check."""
    tp = TrustedParty(TOY)
    rng = np.random.default_rng(30)
    for norm in (1.27, 1.57):
        v = rng.standard_normal(128)
        tp.check_face_template(np.floor(v / np.linalg.norm(v) * norm * 128).astype(np.int64))


def test_tp_embeds_the_face_image_itself(client, backend, tmp_path):
    """§VII with the image: the TP extracts Γ with dlib, the owner's altered photo then authenticates."""
    from PIL import Image

    from privface import demo_data
    from privface.protocols.im2020 import TPImageRequest
    from privface.templates import quantize

    tp = TrustedParty(TOY, embed=backend.embed)
    server = Server(open_store("sqlite://"), TOY, tp_public_key=tp.public_key)
    photo = demo_data.enrolled_photo().read_bytes()
    req = TPImageRequest.from_bytes(client.tp_image_request(photo).to_bytes())
    server.enrol(client.enrol_signed(tp.enrol_image(req)))
    probe = quantize(backend.embed(next(iter(demo_data.altered_copies(demo_data.enrolled_photo()).values()))))
    assert run(client, server, probe)[0].accepted
    impostor = quantize(backend.embed(demo_data.impostor_photos()["cameraman"]))
    assert not run(client, server, impostor)[0].accepted
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (120, 120), dtype=np.uint8)).save(noise)
    with pytest.raises(ProtocolError, match="no usable face"):
        tp.enrol_image(client.tp_image_request(noise.read_bytes()))
    with pytest.raises(ProtocolError, match="no face embedder"):
        TrustedParty(TOY).enrol_image(req)


def test_cached_enrolment_follows_the_store(client):
    """The server caches validated records by their stored bytes: a re-registration (here by a second
    server on the same store, as another process would) and a revocation take effect at once."""
    store = open_store("sqlite://")
    server, other = Server(store, TOY), Server(store, TOY)
    first, second = face(21), face(22)
    server.enrol(client.enrol(first))
    assert run(client, server, first)[0].accepted
    other.enrol(client.enrol(second), replace=True)
    assert not run(client, server, first)[0].accepted
    assert run(client, server, second)[0].accepted
    other.revoke(RevokeRequest("alice"))
    with pytest.raises(UnknownSubjectError):
        run(client, server, second)
