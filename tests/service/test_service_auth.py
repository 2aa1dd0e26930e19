"""Who may call what (issue 8): API keys with scopes over real loopback HTTP (uvicorn + httpx).

The route test enumerates every registered protocol and role and every step it serves: no key → 401,
a key without the step's scope → 403, both changing neither the store nor the sessions; a key with the
scope gets past authentication (so the refusals are not a server that refuses everything)."""
import json
import logging
import re
import sqlite3

import httpx
import numpy as np
import pytest
from test_service import Counter

from privface.errors import PrivfaceError
from privface.protocols.gsm.params import GsmParams
from privface.protocols.im2020 import Client, Im2020Params, RevokeRequest
from privface.service.app import create_app
from privface.service.auth import KEY_NAMESPACE, SCOPES, ApiKeys, AuthError, parse_scopes, required_scopes
from privface.service.bindings.cryptomask import CryptoMaskService
from privface.service.bindings.gsm import GsmService
from privface.service.bindings.hers import IdentService
from privface.service.bindings.im2020 import Im2020Service
from privface.service.bindings.kolberg import KolbergService
from privface.service.client import ServiceClient, ServiceError
from privface.service.launch import serve_in_thread
from privface.service.registry import PROTOCOLS
from privface.store.sqlite import SQLiteStore

OCTETS = {"content-type": "application/octet-stream"}


class ScopedCounter(Counter):
    """The test protocol with scopes declared for all steps but ``boom`` (which must then be refused)."""

    scopes = {"register": "enrol", "count/start": "verify", "count/next": "verify", "count/finish": "verify"}


def _dump(path) -> list[str]:
    """Every row of an SQLite store, for 'nothing changed' checks."""
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


# ---------------------------------------------------------------- the key table


def test_keys_create_authenticate_list_revoke(tmp_path):
    with SQLiteStore(tmp_path / "k.db") as store:
        keys = ApiKeys(store, pepper=b"pepper-1")
        key, secret = keys.create("enrol, verify", name="kiosk 1")
        assert secret.startswith(f"pfk_{key.key_id}_") and key.scopes == {"enrol", "verify"}
        assert keys.authenticate(secret) == key
        record = store.get(KEY_NAMESPACE, key.key_id)
        assert secret.split("_", 2)[2].encode() not in record and b"kiosk 1" in record  # only a MAC is kept
        for wrong in (None, "", secret[:-1] + ("A" if secret[-1] != "A" else "B"), secret + "x",
                      f"pfk_{'0' * 12}_{secret.split('_', 2)[2]}", "Bearer " + secret):
            with pytest.raises(AuthError):
                keys.authenticate(wrong)
        with pytest.raises(AuthError):  # another pepper: the stored MAC no longer matches
            ApiKeys(store, pepper=b"pepper-2").authenticate(secret)
        other, _ = keys.create(["admin"])
        assert {k.key_id for k in keys.list()} == {key.key_id, other.key_id}
        assert keys.revoke(key.key_id) and not keys.revoke(key.key_id)
        with pytest.raises(AuthError):
            keys.authenticate(secret)
        for bad in ("", "root", "verify,root", ","):
            with pytest.raises(PrivfaceError):
                parse_scopes(bad)
        with pytest.raises(PrivfaceError):
            keys.create("verify", name="x" * 65)


# ---------------------------------------------------------------- one service, every refusal


@pytest.fixture
def counter(tmp_path):
    with SQLiteStore(tmp_path / "c.db") as store:
        keys = ApiKeys(store)
        secrets = {name: keys.create(scopes)[1] for name, scopes in
                   (("enrol", "enrol"), ("verify", "verify"), ("all", ",".join(SCOPES)))}
        app = create_app(store, [ScopedCounter(store)], keys=keys)
        with serve_in_thread(app) as url:
            yield url, store, keys, secrets, app, tmp_path / "c.db"


def test_keys_and_scopes_over_http(counter, caplog):
    url, store, keys, secrets, app, path = counter
    caplog.set_level(logging.DEBUG)
    before = _dump(path)
    r = httpx.post(f"{url}/v1/counter/register", content=b"jane:x", headers=OCTETS)
    assert r.status_code == 401 and r.json()["type"] == "AuthError" and r.headers["www-authenticate"] == "Bearer"
    for header in ("Bearer nonsense", "Basic abc", secrets["enrol"], f"Bearer {secrets['enrol']}x"):
        r = httpx.post(f"{url}/v1/counter/register", content=b"jane:x", headers={**OCTETS, "authorization": header})
        assert r.status_code == 401, header
    with ServiceClient(url, "counter", api_key=secrets["verify"]) as c, pytest.raises(ServiceError) as e:
        c.step("register", b"jane:x")
    assert e.value.status == 403 and "enrol scope" in str(e.value)
    assert _dump(path) == before and store.get("counter", "jane") is None
    with ServiceClient(url, "counter", api_key=secrets["enrol"]) as c:
        assert c.step("register", b"jane:x") == b"new"
    # a session survives a refused step: the refusal comes before the session is taken
    with ServiceClient(url, "counter", api_key=secrets["verify"]) as c:
        assert c.step("count/start", b"jane") == b"x"
        sid = c.session
        r = httpx.post(f"{url}/v1/counter/count/next", content=b"+",
                       headers={**OCTETS, "x-privface-session": sid, "authorization": f"Bearer {secrets['enrol']}"})
        assert r.status_code == 403 and len(app.state.sessions) == 1
        assert c.step("count/next", b"+") == b"1"
    # a step without a declared scope is refused even with every scope (fail closed), before it runs
    with ServiceClient(url, "counter", api_key=secrets["all"]) as c, pytest.raises(ServiceError) as e:
        c.step("boom", b"")
    assert e.value.status == 403 and "declares no scope" in str(e.value)
    # revocation takes effect at once
    key_id = secrets["enrol"].split("_")[1]
    assert keys.revoke(key_id)
    with ServiceClient(url, "counter", api_key=secrets["enrol"]) as c, pytest.raises(ServiceError) as e:
        c.step("register", b"joe:y")
    assert e.value.status == 401 and store.get("counter", "joe") is None
    # open: liveness and the API description
    assert httpx.get(f"{url}/healthz").status_code == 200
    spec = httpx.get(f"{url}/openapi.json").json()
    step_op = spec["paths"]["/v1/{protocol}/{step}"]["post"]
    assert {"401", "403"} <= set(step_op["responses"]) and step_op["security"] == [{"apiKey": []}]
    assert spec["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert "security" not in spec["paths"]["/healthz"]["get"]
    # /docs: Swagger UI whose every script, style sheet and icon comes from this server, not from a CDN
    page = httpx.get(f"{url}/docs")
    assert page.status_code == 200 and "swagger-ui-bundle.js" in page.text
    srcs = re.findall(r'(?:src|href)=["\']([^"\']+)', page.text)
    assert srcs and all(s.startswith("/") and not s.startswith("//") for s in srcs), srcs
    for s in srcs:
        r = httpx.get(f"{url}{s}")
        assert r.status_code == 200 and len(r.content) > (100 if s == "/docs/init.js" else 1000), s
    assert "SwaggerUIBundle" in httpx.get(f"{url}/docs/init.js").text  # started by a served file, not inline
    assert "cdn" not in page.text.lower() and httpx.get(f"{url}/redoc").status_code == 404
    logged = caplog.text
    assert all(s.split("_", 2)[2] not in logged for s in secrets.values())


# ---------------------------------------------------------------- every protocol, role and step


def _ident_key(root):
    """A toy hers gallery and its key server (the key store is the served store)."""
    from privface.scale import NpySource, enrol

    np.save(root / "ident.npy", np.random.default_rng(9).normal(size=(20, 16)))
    enrol(f"sqlite:///{root / 'ident-gallery.db'}", NpySource([root / "ident.npy"]), "hers",
          key_store_url=f"sqlite:///{root / 'ident-key.db'}", tau=0.5, insecure_test_params=True)
    store = SQLiteStore(root / "ident-key.db")
    return store, IdentService(store, role="key", insecure_test_params=True)


def _cryptomask_gallery(root) -> str:
    """A toy cryptomask gallery (the CS role serves it; its key store stays elsewhere)."""
    from privface.scale import NpySource, enrol

    np.save(root / "cm.npy", np.random.default_rng(9).normal(size=(20, 128)))
    url = f"sqlite:///{root / 'cm-gallery.db'}"
    enrol(url, NpySource([root / "cm.npy"]), "cryptomask", key_store_url=f"sqlite:///{root / 'cm-key.db'}",
          tau=0.5, insecure_test_params=True)
    return url


def _roles(root):
    """(label, store path, service) for every registered protocol and role."""
    gsm = GsmParams.toy()
    auth_store = SQLiteStore(root / "kolberg-auth.db")
    auth = KolbergService(auth_store, role="auth", scheme="ntru")
    key_store, key = _ident_key(root)
    made = [("kolberg auth", root / "kolberg-auth.db", auth_store, auth),
            ("ident key", root / "ident-key.db", key_store, key)]
    for label, build in (
            ("im2020 basic", lambda s: Im2020Service(s, params=Im2020Params.toy())),
            ("im2020 secure-comparison",
             lambda s: Im2020Service(s, params=Im2020Params.toy(mode="secure-comparison"))),
            ("gsm provider", lambda s: GsmService(s, role="provider", params=gsm)),
            ("gsm terminal", lambda s: GsmService(s, role="terminal", params=gsm, capture=lambda: None)),
            ("kolberg db", lambda s: KolbergService(s, role="db", scheme="ntru", auth=auth.party)),
            ("ident local", lambda s: IdentService(s, role="local",
                                                   gallery_url=f"sqlite:///{root / 'ident-gallery.db'}",
                                                   key=key.party)),
            ("cryptomask cs", lambda s: CryptoMaskService(s, gallery_url=_cryptomask_gallery(root)))):
        path = root / f"{label.replace(' ', '-')}.db"
        store = SQLiteStore(path)
        made.append((label, path, store, build(store)))
    return made


def test_every_step_of_every_role_refuses_without_key_or_scope(tmp_path):
    roles = _roles(tmp_path)
    assert {label.split()[0] for label, *_ in roles} == set(PROTOCOLS)  # a new protocol joins this test
    try:
        for label, path, store, svc in roles:
            keys = ApiKeys(store)
            assert set(svc.steps) <= set(svc.scopes), f"{label}: steps without a scope"
            by_scope = {s: keys.create(s)[1] for s in SCOPES}
            app = create_app(store, [svc], keys=keys)
            with serve_in_thread(app) as url:
                before = _dump(path)
                for step in svc.steps:
                    need = required_scopes(svc, step)
                    assert need and need <= set(SCOPES), (label, step)
                    post = lambda key, svc=svc, step=step: httpx.post(  # noqa: E731
                        f"{url}/v1/{svc.name}/{step}", content=b"\x00garbage",
                        headers={**OCTETS, **({"authorization": f"Bearer {key}"} if key else {})}, timeout=30)
                    assert post(None).status_code == 401, (label, step)
                    wrong = [s for s in SCOPES if s not in need]
                    for s in wrong:
                        assert post(by_scope[s]).status_code == 403, (label, step, s)
                    assert _dump(path) == before and len(app.state.sessions) == 0, (label, step)
                    right = post(by_scope[sorted(need)[0]])  # the scope's key gets past authentication
                    assert right.status_code not in (401, 403), (label, step, right.status_code)
                    before = _dump(path)
    finally:
        for _, _, store, _ in roles:
            store.close()


def test_revoke_with_a_valid_body_needs_admin(tmp_path):
    """The refusal holds for a well-formed request that would change state: im2020 revoke."""
    with SQLiteStore(tmp_path / "s.db") as store:
        svc, keys = Im2020Service(store, params=Im2020Params.toy()), ApiKeys(store)
        user, admin = keys.create("enrol,verify")[1], keys.create("admin")[1]
        client = Client("grace", Im2020Params.toy())
        svc.handle("enrol", client.enrol(np.arange(128) % 7).to_bytes(), None)
        body = RevokeRequest("grace").to_bytes()
        with serve_in_thread(create_app(store, [svc], keys=keys)) as url:
            before = _dump(tmp_path / "s.db")
            with ServiceClient(url, "im2020", api_key=user) as c, pytest.raises(ServiceError) as e:
                c.step("revoke", body)
            assert e.value.status == 403 and _dump(tmp_path / "s.db") == before
            with ServiceClient(url, "im2020", api_key=admin) as c:
                c.step("revoke", body)
            assert store.get("im2020", "grace") is None


def test_kolberg_db_calls_the_auth_server_with_an_internal_key(tmp_path, monkeypatch):
    """DB → auth with a key of scope internal (as `privface serve --role db --auth-api-key` /
    $PRIVFACE_AUTH_API_KEY); without it, or with a client's scopes, the DB server cannot start; the
    rotation steps need admin."""
    from privface.cli import build_parser
    from privface.cli.serve import _kolberg_service_options
    from privface.protocols.kolberg import KolbergParams
    from privface.protocols.kolberg.messages import KeyRequest
    from privface.service.clients.kolberg import HttpAuth, KolbergClient

    with SQLiteStore(tmp_path / "auth.db") as auth_store, SQLiteStore(tmp_path / "db.db") as db_store:
        auth_keys, db_keys = ApiKeys(auth_store), ApiKeys(db_store)
        internal, admin, user = (auth_keys.create(s)[1] for s in ("internal", "admin", "enrol,verify"))
        auth = KolbergService(auth_store, role="auth", scheme="ntru")
        with serve_in_thread(create_app(auth_store, [auth], keys=auth_keys)) as auth_url:
            for key, status in ((None, 401), (user, 403)):
                with pytest.raises(ServiceError) as e:
                    KolbergService(db_store, role="db", scheme="ntru", auth_url=auth_url, auth_api_key=key)
                assert e.value.status == status
            monkeypatch.setenv("PRIVFACE_AUTH_API_KEY", internal)
            args = build_parser().parse_args(["serve", "--protocol", "kolberg", "--role", "db", "--scheme", "ntru",
                                              "--auth-url", auth_url])
            db = KolbergService(db_store, **_kolberg_service_options(args))
            client_key = db_keys.create("enrol,verify")[1]
            with serve_in_thread(create_app(db_store, [db], keys=db_keys)) as db_url, \
                    KolbergClient(db_url, KolbergParams("ntru"), api_key=client_key) as client:
                x = np.random.default_rng(8).standard_normal(128)
                client.enrol("alice", x / np.linalg.norm(x))
                assert client.verify("alice", x / np.linalg.norm(x)) is True  # DB → auth/decide with the key
                with pytest.raises(ServiceError) as e:
                    client.revoke("alice")
                assert e.value.status == 403
            with HttpAuth(auth_url, api_key=internal) as link, pytest.raises(ServiceError) as e:
                link.rotate_begin(KeyRequest(0))
            assert e.value.status == 403
            with HttpAuth(auth_url, api_key=admin) as ops:
                assert ops.keys().scheme == "ntru"


def test_privface_keys_commands(tmp_path, capsys):
    from privface.cli import main

    db = f"sqlite:///{tmp_path / 'k.db'}"
    assert main(["keys", "create", "--db", db, "--scopes", "enrol,admin", "--name", "ops", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["scopes"] == ["admin", "enrol"] and made["api_key"].startswith(f"pfk_{made['key_id']}_")
    assert main(["keys", "list", "--db", db, "--json"]) == 0
    listed = capsys.readouterr().out
    assert json.loads(listed) == [{k: v for k, v in made.items() if k != "api_key"}]
    assert made["api_key"].split("_", 2)[2] not in listed
    assert main(["keys", "create", "--db", db, "--scopes", "root"]) == 2
    assert "enrol, verify, admin, internal" in capsys.readouterr().err
    assert main(["keys", "revoke", made["key_id"], "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["revoked"] is True
    assert main(["keys", "revoke", made["key_id"], "--db", db]) == 1 and "False" in capsys.readouterr().out
    assert main(["keys", "list", "--db", db, "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
