"""Issue 36: enrolments, probes and key files name their face backend, and templates of two backends never meet —
an sface client at a dlib-resnet128 server (or the reverse), a probe against an enrolment of another backend, a key
file of another backend: HTTP 409 naming both, nothing stored or compared. Over real loopback HTTP (uvicorn), toy
keys, templates drawn at random (the backend check needs no face model)."""
import contextlib

import httpx
import numpy as np
import pytest

from privface.cli import main
from privface.errors import BackendMismatchError
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import Client, Im2020Params
from privface.protocols.im2020.messages import LegacyClientKey, LegacyEnrolRequest
from privface.protocols.kolberg import KolbergParams
from privface.protocols.kolberg.messages import StoredReference
from privface.protocols.kolberg.parties import PROTOCOL as KOLBERG
from privface.service.app import create_app
from privface.service.bindings.im2020 import Im2020Service
from privface.service.bindings.kolberg import KolbergService
from privface.service.client import RemoteBackendMismatchError
from privface.service.clients import im2020 as remote
from privface.service.clients.kolberg import KolbergClient
from privface.service.launch import serve_in_thread
from privface.store import open_store
from privface.store.sqlite import SQLiteStore

DLIB, SFACE = "dlib-resnet128", "sface"
OTHER = {DLIB: SFACE, SFACE: DLIB}


def toy(backend: str) -> Im2020Params:
    return Im2020Params.toy(backend=backend)


def template(seed: int) -> np.ndarray:
    return attacks.face_like_template(toy(DLIB), np.random.default_rng(seed))


@contextlib.contextmanager
def im2020_server(backend: str, store=None):
    store = store or open_store("sqlite://")
    with serve_in_thread(create_app(store, [Im2020Service(store, params=toy(backend))])) as url:
        yield url, store


def _refused_naming_both(e: RemoteBackendMismatchError, server: str, client: str) -> None:
    assert e.status == 409 and e.server_backend == server and e.client_backend == client
    assert server in str(e) and client in str(e) and isinstance(e, BackendMismatchError)


@pytest.mark.parametrize("server", [DLIB, SFACE])
def test_im2020_enrolment_of_another_backend_is_409_and_stores_nothing(server):
    client_backend = OTHER[server]
    with im2020_server(server) as (url, store), remote.service_client(url) as http:
        alice = Client("alice", toy(client_backend), workers=1)
        with pytest.raises(RemoteBackendMismatchError) as e:
            remote.enrol(http, alice, template(1))
        _refused_naming_both(e.value, server, client_backend)
        assert store.get("im2020", "alice") is None
        r = httpx.post(f"{url}/v1/im2020/enrol", content=alice.enrol(template(1)).to_bytes(),
                       headers={"content-type": "application/octet-stream"})
        assert r.status_code == 409
        assert r.json() == {"error": r.json()["error"], "type": "BackendMismatchError",
                            "server_backend": server, "client_backend": client_backend}
        same = Client("alice", toy(server), workers=1)  # the server's own backend enrols and verifies
        assert remote.enrol(http, same, template(1))[0].replaced is False
        assert remote.verify(http, same, template(1))["accepted"] is True


@pytest.mark.parametrize("server", [DLIB, SFACE])
def test_im2020_probe_of_another_backend_is_409_before_any_computation(server):
    with im2020_server(server) as (url, store), remote.service_client(url) as http:
        alice = Client("alice", toy(server), workers=1)
        remote.enrol(http, alice, template(2))
        liar = Client("alice", toy(OTHER[server]), keypair=(alice.pk, alice._sk), workers=1)
        with pytest.raises(RemoteBackendMismatchError) as e:
            remote.verify(http, liar, template(2))
        _refused_naming_both(e.value, server, OTHER[server])
        assert http.stats[-1].step == "auth/start"  # refused at the start: no S* was computed or sent


def test_im2020_enrolment_stored_before_backends_were_recorded_is_dlibs(tmp_path):
    """A record of a privface before issue 36 (no backend) reads as dlib-resnet128: a dlib server verifies it; an
    sface server refuses its verification (409 naming the enrolment's dlib-resnet128), and stores nothing."""
    alice = Client("alice", toy(DLIB), workers=1)
    new = alice.enrol(template(3))
    old = LegacyEnrolRequest(new.subject_id, new.pk_n, new.pk_y, new.pk_k, new.c_a, new.c_beta).to_bytes()
    db = tmp_path / "old.db"
    with open_store(f"sqlite:///{db}") as store:
        store.put("im2020", "alice", old)
    with open_store(f"sqlite:///{db}") as store, im2020_server(DLIB, store) as (url, _), \
            remote.service_client(url) as http:
        assert remote.verify(http, alice, template(3))["accepted"] is True
    with open_store(f"sqlite:///{db}") as store, im2020_server(SFACE, store) as (url, _), \
            remote.service_client(url) as http:
        with pytest.raises(RemoteBackendMismatchError) as e:
            remote.verify(http, Client("alice", toy(SFACE), keypair=(alice.pk, alice._sk), workers=1), template(3))
        _refused_naming_both(e.value, SFACE, DLIB)
        assert "enrolled with the face backend dlib-resnet128" in str(e.value)
        assert store.get("im2020", "alice") == old
        r = httpx.post(f"{url}/v1/im2020/enrol", content=old, headers={"content-type": "application/octet-stream"})
        assert r.status_code == 400 and "does not name its face backend" in r.json()["error"]


@pytest.mark.parametrize("server", [DLIB, SFACE])
def test_a_key_file_of_another_backend_is_refused(tmp_path, server, capsys):
    """The key file records the backend it enrolled with: loaded, its client names it and the server refuses it
    (409); `privface verify` refuses a --backend other than the key's before embedding anything."""
    key = tmp_path / "alice.key"
    with im2020_server(server) as (url, store):
        made = Client("alice", toy(OTHER[server]), workers=1)
        remote.PendingKey(key, remote.key_record(made, url)).commit()
        client, record = remote.load_client(key)
        assert record.backend == client.params.backend == OTHER[server]
        with remote.service_client(url) as http, pytest.raises(RemoteBackendMismatchError) as e:
            remote.verify(http, client, template(4))
        _refused_naming_both(e.value, server, OTHER[server])
    code = main(["verify", "--server", url, "--id", "alice", "--key", str(key), "--backend", server,
                 str(tmp_path / "unused.jpg")])  # refused before the photo is read
    err = capsys.readouterr().err
    assert code == 2 and f"was made with the face backend {OTHER[server]}" in err and "--backend" in err


def test_a_key_file_from_before_backends_were_recorded_is_dlibs(tmp_path):
    alice = Client("alice", toy(DLIB), workers=1)
    sk = alice._sk
    key = tmp_path / "old.key"
    key.write_bytes(LegacyClientKey("alice", "http://127.0.0.1:1", int(sk.p), int(sk.q), int(alice.pk.y),
                                    int(alice.pk.k), True).to_bytes())
    key.chmod(0o600)
    client, record = remote.load_client(key)
    assert record.backend == client.params.backend == DLIB and int(client.pk.n) == int(alice.pk.n)


# ---------------------------------------------------------------- kolberg (DB server + auth server, NTRU)


@contextlib.contextmanager
def kolberg(root, backend: str):
    auth_store, db_store = SQLiteStore(root / f"auth-{backend}.db"), SQLiteStore(root / f"db-{backend}.db")
    params = KolbergParams("ntru", backend=backend)
    auth = KolbergService(auth_store, role="auth", params=params)
    with serve_in_thread(create_app(auth_store, [auth])) as auth_url:
        db = KolbergService(db_store, role="db", params=params, auth_url=auth_url)
        with serve_in_thread(create_app(db_store, [db])) as db_url:
            yield db_url, db_store
    auth_store.close()
    db_store.close()


@pytest.mark.parametrize("server", [DLIB, SFACE])
def test_kolberg_enrolment_and_probes_of_another_backend_are_409(tmp_path, server):
    x = np.random.default_rng(5).normal(0.0, 0.09, 128)
    x /= np.linalg.norm(x)
    with kolberg(tmp_path, server) as (url, store):
        with KolbergClient(url, KolbergParams("ntru", backend=OTHER[server])) as liar:
            with pytest.raises(RemoteBackendMismatchError) as e:
                liar.enrol("grace", x)
            _refused_naming_both(e.value, server, OTHER[server])
            assert store.ids(KOLBERG) == []
        with KolbergClient(url, KolbergParams("ntru", backend=server)) as honest:
            assert honest.enrol("grace", x).replaced is False
            assert StoredReference.from_bytes(store.get(KOLBERG, "grace")).backend == server
            assert honest.verify("grace", x) is True and honest.identify(x) == "grace"
        with KolbergClient(url, KolbergParams("ntru", backend=OTHER[server])) as liar:
            for probe in (lambda: liar.verify("grace", x), lambda: liar.identify(x)):
                with pytest.raises(RemoteBackendMismatchError) as e:
                    probe()
                _refused_naming_both(e.value, server, OTHER[server])


@pytest.mark.parametrize("backend", [None, DLIB])
def test_app_params_name_the_servers_backend(backend):
    """/app/params.json says which backend the page must embed with and name (sface unless --backend)."""
    params = Im2020Params.toy() if backend is None else toy(backend)
    store = open_store("sqlite://")
    with serve_in_thread(create_app(store, [Im2020Service(store, params=params)])) as url:
        answer = httpx.get(f"{url}/app/params.json").json()
    assert answer["backend"] == (backend or SFACE) and answer["tau"] == params.tau
