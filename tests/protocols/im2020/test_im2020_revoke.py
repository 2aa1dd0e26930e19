"""Revocation by proof of key possession (issue 35 B3), over real loopback HTTP (uvicorn): revoke/start answers
c = Enc(ρ) and a commitment, revoke/finish takes ρ = Dec(c); without the proof only an admin key revokes, and a
server without API keys (nobody is an admin) accepts only the proof."""
import dataclasses

import numpy as np
import pytest

from privface.cli import main
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import Client, Im2020Params, RevokeRequest
from privface.protocols.im2020 import messages as m
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.im2020 import Im2020Service
from privface.service.client import ServiceClient, ServiceError
from privface.service.clients import im2020 as remote
from privface.service.launch import serve_in_thread
from privface.store import open_store

TOY = Im2020Params.toy(backend="dlib-resnet128")  # face_like_template is dlib-like (norm 1.4)


def face(seed):
    return attacks.face_like_template(TOY, np.random.default_rng(seed))


@pytest.fixture
def open_server(tmp_path):
    """A server without API keys (`privface serve --no-auth`)."""
    with open_store(f"sqlite:///{tmp_path / 'open.db'}") as store, \
            serve_in_thread(create_app(store, [Im2020Service(store, params=TOY)])) as url:
        yield url, store


@pytest.fixture
def keyed_server(tmp_path):
    """A server with API keys: (url, store, {name: secret}) for an enrol+verify user, a verify-only key and an admin."""
    with open_store(f"sqlite:///{tmp_path / 'keys.db'}") as store:
        keys = ApiKeys(store)
        made = {name: keys.create(scopes)[1] for name, scopes in
                (("user", "enrol,verify"), ("other", "enrol,verify"), ("verifier", "verify"),
                 ("admin", "enrol,verify,admin"))}
        with serve_in_thread(create_app(store, [Im2020Service(store, params=TOY)], keys=keys)) as url:
            yield url, store, made


def _enrol(url, client, api_key=None):
    with remote.service_client(url, api_key=api_key) as http:
        remote.enrol(http, client, face(1))


def test_without_api_keys_a_revocation_without_the_keys_proof_is_refused(open_server):
    """f27799f: anyone could revoke anyone on a --no-auth server (the page did, for another user's ID)."""
    url, store = open_server
    _enrol(url, Client("alice", TOY, workers=1))
    before = store.get("im2020", "alice")
    with ServiceClient(url, "im2020") as c, pytest.raises(ServiceError) as e:
        c.step("revoke", RevokeRequest("alice").to_bytes())
    assert e.value.status == 403 and "prove possession" in str(e.value)
    assert store.get("im2020", "alice") == before


def test_without_api_keys_the_key_holder_revokes_and_a_wrong_proof_changes_nothing(open_server):
    url, store = open_server
    alice = Client("alice", TOY, workers=1)
    _enrol(url, alice)
    before = store.get("im2020", "alice")
    with ServiceClient(url, "im2020") as c:
        challenge = m.RevokeChallenge.from_bytes(c.step("revoke/start", m.RevokeStart("alice").to_bytes()))
        session = c.session
        right = alice.revoke_proof(challenge)
        for wrong in (dataclasses.replace(right, plaintext=right.plaintext ^ 1),  # a guess of ρ
                      dataclasses.replace(right, subject_id="bob")):  # the proof for another ID
            c.session = session
            with pytest.raises(ServiceError) as e:
                c.step("revoke/finish", wrong.to_bytes())
            assert e.value.status in (400, 409) and store.get("im2020", "alice") == before
        c.session = session  # one try per challenge: the right answer comes too late
        with pytest.raises(ServiceError) as e:
            c.step("revoke/finish", right.to_bytes())
        assert e.value.status == 409 and store.get("im2020", "alice") == before
        c.session = None
        with pytest.raises(ServiceError) as e:  # no session: no proof
            c.step("revoke/finish", right.to_bytes())
        assert e.value.status == 409 and store.get("im2020", "alice") == before
    with remote.service_client(url) as http:
        resp, st = remote.revoke(http, alice)
    assert resp.revoked and store.get("im2020", "alice") is None
    assert [s.step for s in http.stats] == ["revoke/start", "revoke/finish"]


def test_another_key_cannot_answer_and_a_forged_challenge_gets_no_decryption(open_server):
    """Mallory's own key for the ID decrypts c to something else: its client sends nothing. A challenge whose
    ciphertext is one β_i of the stored C (a server fishing for a decryption) is refused by the client too."""
    url, store = open_server
    alice = Client("alice", TOY, workers=1)
    _enrol(url, alice)
    with remote.service_client(url) as http, pytest.raises(Exception, match="nothing was sent"):
        remote.revoke(http, Client("alice", TOY, workers=1))
    assert store.get("im2020", "alice") is not None
    stored = m.EnrolRequest.from_bytes(store.get("im2020", "alice"))
    with ServiceClient(url, "im2020") as c:
        honest = m.RevokeChallenge.from_bytes(c.step("revoke/start", m.RevokeStart("alice").to_bytes()))
    fishing = dataclasses.replace(honest, ciphertext=stored.c_beta[0])
    with pytest.raises(Exception, match="nothing was sent"):
        alice.revoke_proof(fishing)
    with pytest.raises(Exception, match="SHA-256"):
        alice.revoke_proof(dataclasses.replace(honest, commitment=b"\x00" * 31))


def test_an_enrol_key_revokes_its_own_enrolment_with_the_proof(keyed_server):
    """f27799f: an enrol+verify key could not revoke its own enrolment ("needs the admin scope")."""
    url, store, keys = keyed_server
    alice = Client("alice", TOY, workers=1)
    _enrol(url, alice, keys["user"])
    for name in (None, "verifier"):  # no key: 401; a key that may not enrol: 403
        with remote.service_client(url, api_key=keys[name] if name else None) as http, \
                pytest.raises(ServiceError) as e:
            remote.revoke(http, alice)
        assert e.value.status == (403 if name else 401) and store.get("im2020", "alice") is not None
    with ServiceClient(url, "im2020", api_key=keys["user"]) as c, pytest.raises(ServiceError) as e:
        c.step("revoke", RevokeRequest("alice").to_bytes())  # without the proof: admin only
    assert e.value.status == 403 and store.get("im2020", "alice") is not None
    with remote.service_client(url, api_key=keys["user"]) as http:
        assert remote.revoke(http, alice)[0].revoked is True
    assert store.get("im2020", "alice") is None


def test_a_challenge_serves_only_its_caller_and_only_the_record_it_was_made_for(keyed_server):
    url, store, keys = keyed_server
    alice = Client("alice", TOY, workers=1)
    _enrol(url, alice, keys["user"])
    with ServiceClient(url, "im2020", api_key=keys["user"]) as c:
        challenge = m.RevokeChallenge.from_bytes(c.step("revoke/start", m.RevokeStart("alice").to_bytes()))
        session, proof = c.session, alice.revoke_proof(challenge)
    with ServiceClient(url, "im2020", api_key=keys["other"]) as c, pytest.raises(ServiceError) as e:
        c.session = session  # another key presenting the session id (and even the right ρ)
        c.step("revoke/finish", proof.to_bytes())
    assert e.value.status == 409 and store.get("im2020", "alice") is not None

    with ServiceClient(url, "im2020", api_key=keys["user"]) as c:
        challenge = m.RevokeChallenge.from_bytes(c.step("revoke/start", m.RevokeStart("alice").to_bytes()))
        session, proof = c.session, alice.revoke_proof(challenge)
        with ServiceClient(url, "im2020", api_key=keys["admin"]) as admin:  # meanwhile, re-enrolled (admin)
            admin.step("enrol", Client("alice", TOY, workers=1).enrol(face(2)).to_bytes())
        replaced = store.get("im2020", "alice")
        c.session = session
        with pytest.raises(ServiceError) as e:
            c.step("revoke/finish", proof.to_bytes())
    assert e.value.status == 400 and "enrolled again" in str(e.value) and store.get("im2020", "alice") == replaced


def test_admin_still_revokes_without_the_proof(keyed_server):
    url, store, keys = keyed_server
    _enrol(url, Client("alice", TOY, workers=1), keys["user"])
    with remote.service_client(url, api_key=keys["admin"]) as http:
        assert remote.admin_revoke(http, "alice")[0].revoked is True
    assert store.get("im2020", "alice") is None


def test_the_python_client_and_the_cli_delete_the_key_file(keyed_server, tmp_path, capsys, monkeypatch):
    """f27799f: `Im2020Client.revoke()` left me.key on disk."""
    import privface

    url, store, keys = keyed_server
    me = tmp_path / "me.key"
    with privface.Im2020Client(url, "alice", TOY, workers=1, api_key=keys["user"]) as client:
        client.enrol(np.asarray(face(1), dtype=float) / TOY.scale, key_file=me)
    with privface.Im2020Client.from_key_file(me, workers=1, api_key=keys["user"]) as again:
        assert again.revoke().revoked is True and again.report["key_file_removed"] == str(me)
    assert not me.exists() and store.get("im2020", "alice") is None

    cli = tmp_path / "bob.key"
    with privface.Im2020Client(url, "bob", TOY, workers=1, api_key=keys["user"]) as client:
        client.enrol(np.asarray(face(3), dtype=float) / TOY.scale, key_file=cli)
    monkeypatch.setenv("PRIVFACE_API_KEY", keys["user"])
    assert main(["revoke", "--server", url, "--id", "bob", "--key", str(cli)]) == 0
    out = capsys.readouterr().out
    assert f"Revoked bob at {url} and deleted its key file {cli}." in out
    assert not cli.exists() and store.get("im2020", "bob") is None
    assert main(["revoke", "--server", url, "--id", "bob", "--key", str(cli)]) == 2
    assert "no key file" in capsys.readouterr().err
