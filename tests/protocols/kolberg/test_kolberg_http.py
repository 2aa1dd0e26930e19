"""kolberg over real loopback HTTP (issue 6): an auth server and a DB server as two uvicorn servers, a client;
enrol, verify genuine/impostor, identify, revoke, key rotation via ``privface rotate-keys``; malformed and
oversized bodies get 4xx and change no state. Real 128-bit parameters, real dlib embeddings."""
import contextlib
import threading
import types
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from privface.cli import main
from privface.protocols.kolberg import KolbergParams, plaintext_distance, protect
from privface.protocols.kolberg.messages import EnrolRequest, EnrolResponse, KeyRequest, RevokeRequest, StoredReference
from privface.protocols.kolberg.parties import AUTH_STORE, PROTOCOL
from privface.service.app import create_app
from privface.service.bindings.kolberg import KolbergService
from privface.service.client import RemoteMessageError, RemoteNotEnrolledError, ServiceError
from privface.service.clients.kolberg import KolbergClient
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore

DLIB = "dlib-resnet128"  # the demo_faces fixture is dlib's: servers and clients of these tests name it (issue 36)


@pytest.fixture(scope="module", params=["bfv", "ntru"])
def servers(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"kolberg-{request.param}")
    auth_store, db_store = SQLiteStore(root / "auth.db"), SQLiteStore(root / "db.db")
    auth = KolbergService(auth_store, role="auth", params=KolbergParams(request.param, backend=DLIB))
    with serve_in_thread(create_app(auth_store, [auth])) as auth_url:
        db = KolbergService(db_store, role="db", params=KolbergParams(request.param, backend=DLIB), auth_url=auth_url)
        with serve_in_thread(create_app(db_store, [db])) as db_url:
            yield request.param, auth_url, db_url, root, db_store, auth_store


def _post(url, step, body, ctype="application/octet-stream"):
    return httpx.post(f"{url}/v1/kolberg/{step}", content=body, headers={"content-type": ctype}, timeout=60)


def _state(db_store, auth_store):
    return ({s: db_store.get(PROTOCOL, s) for s in db_store.ids(PROTOCOL)},
            {k: auth_store.get(AUTH_STORE, k) for k in auth_store.ids(AUTH_STORE)})


def test_three_parties_over_http(servers, demo_faces):
    scheme, auth_url, db_url, root, db_store, auth_store = servers
    params = KolbergParams(scheme, backend=DLIB)
    grace, (copy,) = demo_faces["grace"][0], demo_faces["grace"][1]
    with KolbergClient(db_url, params) as client:
        for name, (ref, _) in demo_faces.items():
            assert client.enrol(name, ref).replaced is False
        assert db_store.ids(PROTOCOL) == sorted(demo_faces)
        plain = {name: plaintext_distance(params, protect(params, ref), protect(params, copy)) <= params.tau
                 for name, (ref, _) in demo_faces.items()}
        assert plain == {name: name == "grace" for name in demo_faces}
        for name in demo_faces:  # genuine accepted, impostors rejected, as in plaintext
            assert client.verify(name, copy) is plain[name]
        assert client.identify(copy) == "grace"
        # key rotation with the servers running: the admin command talks to the auth server over HTTP
        old = client.client
        assert main(["rotate-keys", "--protocol", "kolberg", "--db", f"sqlite:///{root / 'db.db'}",
                     "--auth-url", auth_url, "--json"]) == 0
        with pytest.raises(RemoteMessageError, match="retired key"):
            client.verify("grace", copy)  # probes under the retired key are refused …
        client.refresh_key()
        assert client.client is not old
        assert [client.verify(name, copy) for name in demo_faces] == [plain[name] for name in demo_faces]
        assert client.identify(copy) == "grace"
        assert client.revoke("grace") is True and client.revoke("grace") is False
        with pytest.raises(RemoteNotEnrolledError):
            client.verify("grace", copy)
        assert client.identify(copy) is None
        assert client.enrol("grace", grace).replaced is False


def test_bad_requests_get_4xx_and_change_nothing(servers, demo_faces):
    scheme, auth_url, db_url, root, db_store, auth_store = servers
    with KolbergClient(db_url, KolbergParams(scheme, backend=DLIB)) as client:
        client.enrol("grace", demo_faces["grace"][0])
        good = client.client.enrol("grace", demo_faces["grace"][0]).to_bytes()
        probe = client.client.verify("grace", demo_faces["grace"][0]).probe
    before = _state(db_store, auth_store)
    cases = [
        (db_url, "enrol", good[:-5], 400),
        (db_url, "enrol", EnrolRequest("grace", DLIB, b"junk").to_bytes(), 400),
        (db_url, "enrol", b"\0" * (3 * 1024 * 1024), 413),
        (db_url, "verify/challenge", RevokeRequest("grace").to_bytes(), 400),  # a revocation is no challenge request
        (db_url, "verify", good, 409),  # verify continues the session of verify/challenge
        (db_url, "revoke", RevokeRequest("grace").to_bytes() + b"x", 400),
        (db_url, "public-key", b"", 400),
        (db_url, "auth/decide", b"", 404),  # the DB server is not the auth server
        (auth_url, "enrol", good, 404),  # nor the other way round
        (auth_url, "auth/decide", b"junk", 400),
        (auth_url, "auth/rotate/reencrypt", b"junk", 400),
        (auth_url, "auth/rotate/activate", KeyRequest(99).to_bytes(), 400),
        (auth_url, "auth/rotate/retire", KeyRequest(99).to_bytes(), 400),
        (auth_url, "auth/keys", b"\0" * 4096, 413),
    ]
    if scheme != "ntru":  # NTRU probes and templates are the same kind of ciphertext
        cases.append((db_url, "enrol", EnrolRequest("grace", DLIB, probe).to_bytes(), 400))
    for url, step, body, status in cases:
        r = _post(url, step, body)
        assert r.status_code == status, (step, r.text)
        assert set(r.json()) == {"error", "type"}
    assert _post(db_url, "enrol", good, ctype="application/json").status_code == 415
    assert _state(db_store, auth_store) == before


def test_privface_serve_kolberg_refuses_incomplete_options(tmp_path):
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert main(["serve", "--protocol", "kolberg", "--db", db]) != 0  # no role
    assert main(["serve", "--protocol", "kolberg", "--role", "db", "--db", db]) != 0  # no --auth-url


def test_privface_serve_both_roles(tmp_path, demo_faces):
    """`privface serve --protocol kolberg --role auth|db` as child processes, a client over HTTP."""
    from privface.service.launch import serve_subprocess

    auth_db, db_db = f"sqlite:///{tmp_path / 'auth.db'}", f"sqlite:///{tmp_path / 'db.db'}"
    with serve_subprocess("kolberg", auth_db, ["--role", "auth", "--scheme", "ntru", "--backend", DLIB]) as auth_url, \
            serve_subprocess("kolberg", db_db, ["--role", "db", "--scheme", "ntru", "--auth-url", auth_url,
                                                "--backend", DLIB]) as db_url, \
            KolbergClient(db_url, KolbergParams("ntru", backend=DLIB)) as client:
        ref, (copy,) = demo_faces["grace"]
        client.enrol("grace", ref)
        assert client.verify("grace", copy) is True
        assert client.verify("grace", demo_faces["cameraman"][0]) is False
    assert SQLiteStore(tmp_path / "auth.db").ids(AUTH_STORE) == ["current", "key.1"]  # the key stays with auth
    assert SQLiteStore(tmp_path / "db.db").ids(AUTH_STORE) == []
    assert oct((tmp_path / "auth.db").stat().st_mode & 0o777) == "0o600"


@pytest.mark.slow
def test_privface_serve_both_roles_and_cli_commands(tmp_path, demo_faces, capsys):
    """`privface serve --protocol kolberg --role auth|db` as child processes; `privface enroll/verify/identify/
    revoke --protocol kolberg` against them (exit codes: 0 accept/found, 1 reject/nobody)."""
    import json

    from privface import demo_data
    from privface.service.launch import serve_subprocess

    auth_db, db_db = f"sqlite:///{tmp_path / 'auth.db'}", f"sqlite:///{tmp_path / 'db.db'}"
    with serve_subprocess("kolberg", auth_db, ["--role", "auth", "--scheme", "ntru"]) as auth_url, \
            serve_subprocess("kolberg", db_db, ["--role", "db", "--scheme", "ntru", "--auth-url", auth_url]) as db_url:
        common = ["--protocol", "kolberg", "--scheme", "ntru", "--server", db_url, "--json"]
        photo, impostor = str(demo_data.enrolled_photo()), str(demo_data.impostor_photos()["cameraman"])
        assert main(["enroll", *common, "--id", "grace", photo]) == 0
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["replaced"] is False
        assert main(["verify", *common, "--id", "grace", photo]) == 0
        assert main(["verify", *common, "--id", "grace", impostor]) == 1
        assert main(["identify", "--scheme", "ntru", "--server", db_url, "--json", photo]) == 0
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["id"] == "grace"
        assert main(["revoke", *common, "--id", "grace"]) == 0
        assert main(["identify", "--scheme", "ntru", "--server", db_url, impostor]) == 2  # nobody enrolled: 404
    assert SQLiteStore(tmp_path / "auth.db").ids(AUTH_STORE) == ["current", "key.1"]  # the key stays with auth
    assert SQLiteStore(tmp_path / "db.db").ids(AUTH_STORE) == []
    assert oct((tmp_path / "auth.db").stat().st_mode & 0o777) == "0o600"


# ---------------------------------------------------------------- issue 17: create-only enrolment, 1:N lockout,
# expiring open requests, fresh verifications (DB server with API keys, auth server over HTTP, NTRU)

class _Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


@contextlib.contextmanager
def _deployment(root, lockout=None, **auth_options):
    """An auth server and a DB server over loopback HTTP; the DB server with API keys (``keys``: one per
    scope set) and, when given, ``lockout(store)`` as its failure counter."""
    from privface.service.auth import ApiKeys

    auth_store, db_store = SQLiteStore(root / "auth.db"), SQLiteStore(root / "db.db")
    auth = KolbergService(auth_store, role="auth", params=KolbergParams("ntru", backend=DLIB), **auth_options)
    with serve_in_thread(create_app(auth_store, [auth])) as auth_url:
        db = KolbergService(db_store, role="db", params=KolbergParams("ntru", backend=DLIB), auth_url=auth_url)
        api = ApiKeys(db_store)
        keys = {s: api.create(s)[1] for s in ("enrol", "verify", "enrol,admin")}
        keys["other"] = api.create("verify")[1]
        app = create_app(db_store, [db], keys=api, lockout=None if lockout is None else lockout(db_store))
        with serve_in_thread(app) as db_url:
            yield types.SimpleNamespace(auth_url=auth_url, db_url=db_url, db_store=db_store, keys=keys,
                                        params=KolbergParams("ntru", backend=DLIB))
    auth_store.close()
    db_store.close()


def _client(d, scope):
    return KolbergClient(d.db_url, d.params, api_key=d.keys[scope])


def test_reenrolment_is_refused_unless_admin(tmp_path, demo_faces):
    """Finding 3: an ``enrol`` key cannot overwrite an enrolled subject (409, record unchanged, the old template
    still verifies); an ``admin`` key may replace it."""
    grace, (copy,) = demo_faces["grace"]
    impostor = demo_faces["cameraman"][0]
    with _deployment(tmp_path) as d:
        with _client(d, "enrol") as c:
            assert c.enrol("grace", grace).replaced is False
            before = d.db_store.get(PROTOCOL, "grace")
            with pytest.raises(ServiceError) as e:
                c.enrol("grace", impostor)
        assert e.value.status == 409 and type(e.value).__name__ == "RemoteAlreadyEnrolledError"
        assert "already enrolled" in str(e.value)
        assert d.db_store.get(PROTOCOL, "grace") == before
        with _client(d, "verify") as c:
            assert c.verify("grace", copy) is True
            assert c.verify("grace", impostor) is False
        with _client(d, "enrol,admin") as c:
            assert c.enrol("grace", impostor).replaced is True
        with _client(d, "verify") as c:
            assert c.verify("grace", impostor) is True


def test_concurrent_enrolments_of_one_subject_one_wins(tmp_path, demo_faces):
    """Finding 3: the check and the write are one compare-and-swap: of concurrent enrolments, exactly one."""
    faces = [ref for ref, _ in demo_faces.values()]
    with _deployment(tmp_path) as d:
        with _client(d, "enrol") as c:
            bodies = [c.client.enrol("dave", x) for x in faces]
        barrier = threading.Barrier(len(faces))

        def send(body):
            barrier.wait()
            return httpx.post(f"{d.db_url}/v1/kolberg/enrol", content=body.to_bytes(), timeout=60, headers={
                "content-type": "application/octet-stream", "authorization": f"Bearer {d.keys['enrol']}"})

        with ThreadPoolExecutor(len(faces)) as pool:
            answers = list(pool.map(send, bodies))
        assert sorted(r.status_code for r in answers) == [200] + [409] * (len(faces) - 1)
        assert EnrolResponse.from_bytes(next(r.content for r in answers if r.status_code == 200)).replaced is False
        assert d.db_store.get(PROTOCOL, "dave") in {
            StoredReference("dave", b.backend, [1], [b.template]).to_bytes() for b in bodies}


def test_failed_identifications_lock_the_caller_out(tmp_path, demo_faces):
    """Finding 11: every identification that matches nobody counts in the failure counter, keyed by the caller
    (its API key); after ``failures`` of them the caller gets 429 like a locked-out verification, others don't."""
    from privface.service.limits import Lockout

    clock = _Clock()
    grace, (copy,) = demo_faces["grace"]
    stranger = demo_faces["cameraman"][0]
    with _deployment(tmp_path, lockout=lambda s: Lockout(s, failures=3, base=60, cap=3600, clock=clock)) as d:
        with _client(d, "enrol") as c:
            c.enrol("grace", grace)
        with _client(d, "verify") as c:
            assert c.identify(copy) == "grace"
            assert [c.identify(stranger) for _ in range(3)] == [None] * 3
            for probe in (stranger, copy):  # locked out: refused before any work, a genuine probe too
                with pytest.raises(ServiceError, match="too many rejected attempts") as e:
                    c.identify(probe)
                assert e.value.status == 429 and int(e.value.status) == 429
        with _client(d, "other") as c:  # another caller is not locked out
            assert c.identify(copy) == "grace"
        with _client(d, "verify") as c:
            assert c.verify("grace", copy) is True  # the subject's own counter is untouched
        clock.t += 61
        with _client(d, "verify") as c:
            assert c.identify(copy) == "grace"


def test_abandoned_open_requests_expire(tmp_path, demo_faces):
    """Finding 8: 1 024 multi-chunk requests left open at the auth server (here sent directly, as a DB server
    that died mid-request would leave them) block every multi-chunk identification only until they expire."""
    from privface.protocols.kolberg.messages import DistanceBatch
    from privface.protocols.kolberg.parties import CHUNK, MAX_PENDING

    clock = _Clock()
    grace, (copy,) = demo_faces["grace"]
    rng = np.random.default_rng(17)
    with _deployment(tmp_path, clock=clock) as d:
        with _client(d, "enrol") as c:
            c.enrol("grace", grace)
            for k in range(CHUNK):  # CHUNK + 1 references: an identification takes two batches
                x = rng.standard_normal(128)
                c.enrol(f"s{k}", x / np.linalg.norm(x))
            distance = c.client.enrol("x", grace).template  # an NTRU distance is a ciphertext of bits too
        with httpx.Client(base_url=d.auth_url, timeout=60) as http:
            for k in range(MAX_PENDING):
                body = DistanceBatch(k.to_bytes(16, "big"), 0, [distance], False).to_bytes()
                r = http.post("/v1/kolberg/auth/decide", content=body,
                              headers={"content-type": "application/octet-stream"})
                assert r.status_code == 200 and r.content == b""
        with _client(d, "verify") as c:
            with pytest.raises(ServiceError, match="too many open requests"):
                c.identify(copy)
            clock.t += 60
            with pytest.raises(ServiceError, match="too many open requests"):
                c.identify(copy)  # not yet expired
            clock.t += 61
            assert c.identify(copy) == "grace"
            assert c.identify(copy) == "grace"


def test_a_replayed_verification_is_refused(tmp_path, demo_faces):
    """Finding 6: a captured VerifyRequest (a genuine probe that was accepted) is not accepted again — not in its
    own spent session, not without one, not in a fresh session (another nonce), not by another caller."""
    from privface.protocols.kolberg.messages import Challenge, ChallengeRequest, Result
    from privface.service.client import ServiceClient
    from privface.service.sessions import SESSION_HEADER

    grace, (copy,) = demo_faces["grace"]
    with _deployment(tmp_path) as d:
        with _client(d, "enrol") as c:
            c.enrol("grace", grace)
            c.enrol("ann", demo_faces["cameraman"][0])
        with _client(d, "verify") as c:
            probe_client = c.client
        with ServiceClient(d.db_url, PROTOCOL, api_key=d.keys["verify"]) as s:
            challenge = Challenge.from_bytes(s.step("verify/challenge", ChallengeRequest("grace").to_bytes()))
            captured, sid = probe_client.verify("grace", copy, challenge).to_bytes(), s.session
            assert Result.from_bytes(s.step("verify", captured)).accepted is True

        def replay(session, key="verify"):
            headers = {"content-type": "application/octet-stream", "authorization": f"Bearer {d.keys[key]}"}
            if session:
                headers[SESSION_HEADER] = session
            return httpx.post(f"{d.db_url}/v1/kolberg/verify", content=captured, headers=headers, timeout=60)

        assert replay(sid).status_code == 409  # the challenge's session is spent
        assert replay(None).status_code == 409  # verify needs a challenge
        for claim, key in (("grace", "verify"), ("grace", "other"), ("ann", "verify")):
            with ServiceClient(d.db_url, PROTOCOL, api_key=d.keys[key]) as s:
                s.step("verify/challenge", ChallengeRequest(claim).to_bytes())
                r = replay(s.session, key)
            assert r.status_code == 400 and "challenge" in r.json()["error"], (claim, key, r.text)
        with _client(d, "verify") as c:  # a fresh verification still works
            assert c.verify("grace", copy) is True
