"""im2020 service security (issue 17) over real loopback HTTP with API keys on: registration creates only
(finding 3), only the configured (N, k) sizes are accepted (finding 7), trusted-party registrations carry a
serial and an expiry and cannot be replayed (finding 2)."""
import dataclasses
import threading
import time

import numpy as np
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from privface.crypto.joye_libert import JLParams
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import Client, Im2020Params, RevokeRequest, TrustedParty
from privface.protocols.im2020.parties import MAX_CLOCK_SKEW, TP_VALIDITY
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.im2020 import Im2020Service
from privface.service.client import RemoteAlreadyEnrolledError, RemoteMessageError, RemoteNotEnrolledError
from privface.service.clients import im2020 as remote
from privface.service.launch import serve_in_thread as serving
from privface.store import open_store

TOY = Im2020Params.toy(backend="dlib-resnet128")  # face_like_template is dlib-like (norm 1.4)


def face(seed, params=TOY):
    return attacks.face_like_template(params, np.random.default_rng(seed))


def near(t, seed, spread=3):
    return np.clip(t + np.random.default_rng(seed).integers(-spread, spread + 1, t.shape), -128, 128)


class Served:
    """An im2020 service over loopback HTTP with an ``enrol``+``verify`` key and an ``enrol``+``admin`` key."""

    def __init__(self, store, url, enrol, admin):
        self.store, self.url, self.enrol, self.admin = store, url, enrol, admin

    def http(self, admin: bool = False):
        return remote.service_client(self.url, api_key=self.admin if admin else self.enrol)


@pytest.fixture
def served(tmp_path, request):
    options = getattr(request, "param", {"params": TOY})
    with open_store(f"sqlite:///{tmp_path / 'im2020.db'}") as store:
        keys = ApiKeys(store, pepper=b"pepper")
        enrol = keys.create("enrol, verify")[1]
        admin = keys.create("enrol, verify, admin")[1]
        with serving(create_app(store, [Im2020Service(store, **options)], keys=keys)) as url:
            yield Served(store, url, enrol, admin)


# ---------------------------------------------------------------- finding 3: registration creates only


def test_reregistration_is_409_for_an_enrol_key_and_a_replacement_for_an_admin_key(served):
    alice, mallory, renewed = (Client("alice", TOY, workers=1) for _ in range(3))
    enrolled = face(1)
    with served.http() as http:
        assert remote.enrol(http, alice, enrolled)[0].replaced is False
        before = served.store.get("im2020", "alice")
        with pytest.raises(RemoteAlreadyEnrolledError, match="already enrolled") as e:
            remote.enrol(http, mallory, face(2))
        assert e.value.status == 409 and served.store.get("im2020", "alice") == before
        assert remote.verify(http, alice, near(enrolled, 3))["accepted"] is True
        with pytest.raises(RemoteMessageError):  # C′ under mallory's key is not valid under alice's
            remote.verify(http, mallory, face(2))
    with served.http(admin=True) as http:
        assert remote.enrol(http, renewed, face(4))[0].replaced is True
        assert remote.verify(http, renewed, near(face(4), 5))["accepted"] is True
        with pytest.raises(RemoteMessageError):  # the replaced key no longer forms a valid C′
            remote.verify(http, alice, near(enrolled, 3))


def test_concurrent_registrations_of_one_new_subject_store_exactly_one(served):
    clients = [Client("bob", TOY, workers=1) for _ in range(6)]
    bodies = [c.enrol(face(10 + i)).to_bytes() for i, c in enumerate(clients)]
    outcomes, go = [], threading.Barrier(len(bodies))

    def register(body):
        with served.http() as http:
            go.wait()
            try:
                http.step("enrol", body)
                outcomes.append(body)
            except RemoteAlreadyEnrolledError as e:
                outcomes.append(e.status)

    threads = [threading.Thread(target=register, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [o for o in outcomes if isinstance(o, bytes)]
    assert len(won) == 1 and sorted(o for o in outcomes if not isinstance(o, bytes)) == [409] * 5
    assert served.store.get("im2020", "bob") == won[0]


# ---------------------------------------------------------------- finding 7: only the configured (N, k)

L128 = {"params": Im2020Params.for_level(128)}


@pytest.mark.parametrize("served", [L128], indirect=True)
@pytest.mark.parametrize("jl", [JLParams(bits=4096, k=752), JLParams(bits=3072, k=200)], ids=["4096-bit N", "k=200"])
def test_other_modulus_or_k_sizes_are_refused_with_400(served, jl):
    params = Im2020Params(jl=jl)
    with served.http() as http:
        with pytest.raises(RemoteMessageError, match=r"only public keys with a 3072-bit N and k = 152") as e:
            remote.enrol(http, Client("carol", params, workers=1), face(20, params))
    assert e.value.status == 400 and served.store.get("im2020", "carol") is None


# ---------------------------------------------------------------- finding 2: TP registrations do not replay

TP_KEY = ec.generate_private_key(ec.SECP256R1())
TP = TrustedParty(TOY, signing_key=TP_KEY)
WITH_TP = {"params": TOY, "tp_public_key": TP.public_key_pem()}


def signed(client, seed, tp=TP):
    """The registration the TP signs for ``client``'s key and a face template, as the client sends it."""
    return client.enrol_signed(tp.enrol(client.tp_request(face(seed)))).to_bytes()


def register(served, body, admin=False):
    with served.http(admin) as http:
        return http.step("enrol", body)


def revoke(served, subject_id):
    with served.http(admin=True) as http:
        http.step("revoke", RevokeRequest(subject_id).to_bytes())


@pytest.mark.parametrize("served", [WITH_TP], indirect=True)
def test_tp_registration_replayed_after_revocation_is_refused(served):
    alice = Client("alice", TOY, workers=1)
    first = signed(alice, 30)
    register(served, first)
    revoke(served, "alice")
    tombstone = served.store.get("im2020", "alice")
    for admin in (False, True):
        with pytest.raises(RemoteMessageError, match="replayed or outdated") as e:
            register(served, first, admin)
        assert e.value.status == 400 and served.store.get("im2020", "alice") == tombstone
    with served.http() as http, pytest.raises(RemoteNotEnrolledError):
        remote.verify(http, alice, near(face(30), 31))
    register(served, signed(alice, 30))  # a new signature from the TP enrols again
    with served.http() as http:
        assert remote.verify(http, alice, near(face(30), 31))["accepted"] is True


@pytest.mark.parametrize("served", [WITH_TP], indirect=True)
def test_older_tp_registration_replayed_after_reenrolment_is_refused(served):
    old, new, newer = (Client("bob", TOY, workers=1) for _ in range(3))
    first, second, third = signed(old, 32), signed(new, 33), signed(newer, 34)
    register(served, first)
    revoke(served, "bob")
    register(served, second)  # re-enrolment after a revocation
    with pytest.raises(RemoteMessageError, match="replayed or outdated"):
        register(served, first, admin=True)  # even a caller who may replace cannot roll back
    assert served.store.get("im2020", "bob") == second
    register(served, third, admin=True)  # re-enrolment by replacement
    for stale in (first, second):
        with pytest.raises(RemoteMessageError, match="replayed or outdated"):
            register(served, stale, admin=True)
    assert served.store.get("im2020", "bob") == third
    with served.http() as http:
        assert remote.verify(http, newer, near(face(34), 35))["accepted"] is True


@pytest.mark.parametrize("served", [WITH_TP], indirect=True)
def test_expired_tp_registration_is_refused(served):
    carol = Client("carol", TOY, workers=1)
    late = TrustedParty(TOY, signing_key=TP_KEY, clock=lambda: time.time() - TP_VALIDITY - MAX_CLOCK_SKEW - 5)
    with pytest.raises(RemoteMessageError, match="expired") as e:
        register(served, signed(carol, 36, late))
    assert e.value.status == 400 and served.store.get("im2020", "carol") is None
    skewed = TrustedParty(TOY, signing_key=TP_KEY, clock=lambda: time.time() - TP_VALIDITY - MAX_CLOCK_SKEW / 2)
    register(served, signed(carol, 36, skewed))  # expired by less than the clock-skew allowance
    assert served.store.get("im2020", "carol") is not None


@pytest.mark.parametrize("served", [WITH_TP], indirect=True)
def test_first_version_tp_signatures_without_serial_are_refused(served):
    """A registration signed by the TP over ID‖C‖pk only (before serials) is refused, with a clear message."""
    erin = Client("erin", TOY, workers=1)
    req = erin.enrol(face(37))
    v1 = b"privface/im2020/tp-registration/v1\x00" + req.to_bytes()
    old = dataclasses.replace(req, signature=TP_KEY.sign(v1, ec.ECDSA(hashes.SHA256())))
    with pytest.raises(RemoteMessageError, match="without a serial and an expiry"):
        register(served, old.to_bytes())
    assert served.store.get("im2020", "erin") is None
