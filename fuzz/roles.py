"""Every service role of ``privface.service.registry``, served over real loopback HTTP (uvicorn on a free port,
the app ``privface serve`` builds: ``create_app`` with API keys), with one real protocol run through the
parties' HTTP clients. The request bodies of that run are recorded (``ServiceClient.step`` is observed, not
replaced) and become the fuzzers' seeds: valid messages of every step, and the flows that open a session.

``roles(root)`` yields ``Role`` records; toy key sizes (``insecure_test_params``) keep a run short — the
decoders and the service checks are the same at every size.
"""
from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from privface.service import client as client_module
from privface.service.app import create_app
from privface.service.auth import SCOPES, ApiKeys
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore

ROLES = ("im2020", "im2020-secure-comparison", "gsm-provider", "gsm-terminal", "kolberg-auth", "kolberg-db",
         "ident-key", "ident-local", "ident-paillier-key", "ident-paillier-local", "cryptomask-cs")


@dataclass
class Role:
    """A served role: its URL, an API key with every scope, and the recorded seeds."""

    name: str
    protocol: str
    url: str
    api_key: str
    first_steps: tuple[str, ...] = ()
    seeds: dict[str, list[bytes]] = field(default_factory=lambda: defaultdict(list))  # step → bodies
    flows: list[list[tuple[str, bytes]]] = field(default_factory=list)  # session flows, in order
    responses: list[bytes] = field(default_factory=list)  # every successful answer
    service: object = None  # the ProtocolService behind ``url``


class _Recorder:
    """Observes ``ServiceClient.step`` (every protocol client sends through it) and files each body under the
    role whose URL it went to; a step sent without a session starts a new flow."""

    def __init__(self) -> None:
        self.by_url: dict[str, Role] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        original, original_exchange = client_module.ServiceClient.step, client_module.ServiceClient.exchange

        def record(client, name: str, body: bytes) -> Role | None:
            role = self.by_url.get(client.base_url)
            if role is not None:
                role.seeds[name].append(bytes(body))
                if client.session is None:
                    role.flows.append([])
                role.flows[-1].append((name, bytes(body)))
            return role

        def step(client, name: str, body: bytes) -> bytes:
            role = record(client, name, body)
            answer = original(client, name, body)
            if role is not None:
                role.responses.append(answer)
            return answer

        def exchange(client, name: str, body, length=None):
            """A streamed exchange (cryptomask): its request body recorded whole (a frame stream)."""
            body = bytes(body) if isinstance(body, (bytes, bytearray)) else b"".join(body)
            record(client, name, body)
            return original_exchange(client, name, body)

        client_module.ServiceClient.step = step
        client_module.ServiceClient.exchange = exchange
        try:
            yield
        finally:
            client_module.ServiceClient.step = original
            client_module.ServiceClient.exchange = original_exchange


@contextlib.contextmanager
def _serve(root, name: str, make_service, recorder: _Recorder) -> Iterator[tuple[Role, SQLiteStore, object]]:
    with SQLiteStore(root / f"{name}.db") as store:
        keys = ApiKeys(store)
        _, secret = keys.create(",".join(SCOPES), name="fuzz")
        svc = make_service(store)
        with serve_in_thread(create_app(store, [svc], keys=keys)) as url:
            role = Role(name, svc.name, url, secret, tuple(svc.first_steps), service=svc)
            recorder.by_url[url] = role
            yield role, store, svc


@contextlib.contextmanager
def _im2020(root, rec, mode: str) -> Iterator[list[Role]]:
    from privface.eval.im2020_attacks import face_like_template
    from privface.protocols.im2020 import Client, Im2020Params
    from privface.service.bindings.im2020 import Im2020Service
    from privface.service.clients import im2020 as remote

    params = Im2020Params.toy(mode=mode)
    name = "im2020" if mode == "basic" else "im2020-secure-comparison"
    with _serve(root, name, lambda s: Im2020Service(s, params=params), rec) as (role, _, _):
        rng = np.random.default_rng(1)
        ref = face_like_template(params, rng)
        with remote.service_client(role.url, api_key=role.api_key) as http:
            alice = Client("alice", params)
            remote.enrol(http, alice, ref)  # stays enrolled: the auth/start seeds stay valid
            remote.verify(http, alice, np.clip(ref + rng.integers(-3, 4, params.dims), -params.max_abs, params.max_abs))
            remote.verify(http, alice, face_like_template(params, rng))
            bob = Client("bob", params)
            remote.enrol(http, bob, ref)
            remote.revoke(http, bob)  # by proof of key possession (revoke/start, revoke/finish)
            remote.enrol(http, bob, ref)
            remote.admin_revoke(http, "bob")
        yield [role]


@contextlib.contextmanager
def _gsm(root, rec) -> Iterator[list[Role]]:
    from privface.protocols.gsm import Device, GsmParams
    from privface.service.bindings.gsm import GsmService, provider_key_bytes
    from privface.service.clients.gsm import DeviceClient, fetch_provider_key
    from privface.templates.fixed_norm import fixed_norm_template

    p = GsmParams.toy(ell=16, m=8, cos_threshold=0.6)
    rng = np.random.default_rng(2)
    u = fixed_norm_template(rng.normal(size=p.ell), p.m)
    w = [fixed_norm_template(u + rng.normal(size=p.ell) * 0.1 * p.zeta, p.m),
         fixed_norm_template(rng.normal(size=p.ell), p.m)]
    capture = [w[0]]
    with _serve(root, "gsm-provider", lambda s: GsmService(s, role="provider", params=p), rec) as (sp, _, _):
        vk = fetch_provider_key(sp.url, api_key=sp.api_key)
        client = DeviceClient(Device("hana", p, provider_key=vk), api_key=sp.api_key)
        client.enrol(sp.url, u)
        with _serve(root, "gsm-terminal", lambda s: GsmService(s, role="terminal", params=p,
                                                             provider_key=provider_key_bytes(vk),
                                                             capture=lambda: capture[0], allow_pi1=True),
                    rec) as (terminal, _, _):
            client = DeviceClient(client.device, api_key=terminal.api_key)
            for variant in ("pi1", "pi2", "pi3"):
                client.present(terminal.url, variant)
                for probe in w:
                    capture[0] = probe
                    client.match(terminal.url, variant)
            yield [sp, terminal]


@contextlib.contextmanager
def _kolberg(root, rec) -> Iterator[list[Role]]:
    from privface.protocols.kolberg import KolbergParams
    from privface.protocols.kolberg.rotation import rotate_keys
    from privface.service.bindings.kolberg import KolbergService
    from privface.service.clients.kolberg import HttpAuth, KolbergClient

    params = KolbergParams("ntru")
    rng = np.random.default_rng(3)
    faces = {f"s{i}": rng.normal(size=params.dims) for i in range(3)}
    with _serve(root, "kolberg-auth", lambda s: KolbergService(s, role="auth", scheme="ntru"), rec) as (auth, _, _):
        def db_service(s):
            return KolbergService(s, role="db", scheme="ntru", auth_url=auth.url, auth_api_key=auth.api_key)

        with _serve(root, "kolberg-db", db_service, rec) as (db, db_store, _):
            with KolbergClient(db.url, params, api_key=db.api_key) as c:
                for name, x in faces.items():
                    c.enrol(name, x)
                c.verify("s0", faces["s0"] + rng.normal(size=params.dims) * 0.05)
                c.verify("s1", faces["s0"])
                c.identify(faces["s2"])
                with HttpAuth(auth.url, api_key=auth.api_key) as http_auth:
                    rotate_keys(params, db_store, http_auth)  # the rotation steps as seeds
                c.refresh_key()
                c.enrol("s3", rng.normal(size=params.dims))
                c.revoke("s3")
            yield [auth, db]


@contextlib.contextmanager
def _ident(root, rec, wanted) -> Iterator[list[Role]]:
    """The ident key and local servers (``ident-``: a toy hers gallery of 3 blocks, one ScoreChunk per block;
    ``ident-paillier-``: a toy idface-paillier gallery of 2 blocks, Paillier ciphertexts in the chunks), each
    seeded with identifications that match and one that is rejected."""
    with contextlib.ExitStack() as stack:
        out: list[Role] = []
        if wanted & {"ident-key", "ident-local"}:
            out += stack.enter_context(_ident_pair(root, rec, "ident-", "hers", 2100, 32))
        if wanted & {"ident-paillier-key", "ident-paillier-local"}:
            out += stack.enter_context(_ident_pair(root, rec, "ident-paillier-", "idface-paillier", 200, 128))
        yield out


@contextlib.contextmanager
def _ident_pair(root, rec, prefix: str, scheme: str, n: int, d: int) -> Iterator[list[Role]]:
    from privface.scale import NpySource, enrol
    from privface.service.bindings.hers import IdentService
    from privface.service.clients.hers import IdentClient

    rng = np.random.default_rng(4)
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(root / f"{prefix}faces.npy", x)
    gallery = f"sqlite:///{root / (prefix + 'gallery.db')}"
    enrol(gallery, NpySource([root / f"{prefix}faces.npy"]), scheme,
          key_store_url=f"sqlite:///{root / (prefix + 'key.db')}", tau=0.5 if scheme == "hers" else 3.0,
          insecure_test_params=True)
    key_role = lambda s: IdentService(s, role="key", insecure_test_params=True)  # noqa: E731
    with _serve(root, prefix + "key", key_role, rec) as (key, _, _):
        local_service = lambda s: IdentService(s, role="local", gallery_url=gallery, key_url=key.url,  # noqa: E731
                                               key_api_key=key.api_key, chunk=1)
        with _serve(root, prefix + "local", local_service, rec) as (local, _, _):
            with IdentClient(local.url, api_key=local.api_key) as c:
                for probe in (x[5] + 0.01 * rng.normal(size=d), x[n - 50], rng.normal(size=d)):
                    c.identify(probe)
            yield [key, local]


@contextlib.contextmanager
def _cryptomask(root, rec) -> Iterator[list[Role]]:
    """The cryptomask CS over a toy gallery of 40 templates (3 ciphertexts, one per DistanceChunk so that every
    frame but the query and the gallery info fits the corpus; Alg. 3 in one batch of 64), seeded by the verifier's
    identifications: one match, one not (the start and reveal bodies are frame streams)."""
    from privface.scale import NpySource, enrol
    from privface.service.bindings.cryptomask import CryptoMaskService
    from privface.service.clients.cryptomask import VerifierClient

    rng = np.random.default_rng(6)
    x = rng.normal(size=(40, 128))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(root / "cm-faces.npy", x)
    gallery, keys = f"sqlite:///{root / 'cm-gallery.db'}", f"sqlite:///{root / 'cm-key.db'}"
    enrol(gallery, NpySource([root / "cm-faces.npy"]), "cryptomask", key_store_url=keys, tau=0.5,
          insecure_test_params=True)
    make = lambda s: CryptoMaskService(s, gallery_url=gallery, chunk=1, batch=64)  # noqa: E731
    with _serve(root, "cryptomask-cs", make, rec) as (cs, _, _):
        with VerifierClient(cs.url, keys, api_key=cs.api_key) as v:
            for probe in (x[7], rng.normal(size=128)):
                v.identify(probe)
        yield [cs]


@contextlib.contextmanager
def roles(root, names=ROLES) -> Iterator[list[Role]]:
    """The named roles, served and seeded; stopped on exit."""
    logging.getLogger("privface.service").setLevel(logging.ERROR)
    rec = _Recorder()
    with contextlib.ExitStack() as stack:
        stack.enter_context(rec.installed())
        wanted = set(names)
        out: list[Role] = []
        makers = [("im2020", lambda: _im2020(root, rec, "basic")),
                  ("im2020-secure-comparison", lambda: _im2020(root, rec, "secure-comparison")),
                  ("gsm-", lambda: _gsm(root, rec)), ("kolberg-", lambda: _kolberg(root, rec)),
                  ("ident-", lambda: _ident(root, rec, wanted)), ("cryptomask-", lambda: _cryptomask(root, rec))]
        for prefix, make in makers:
            if not any(n == prefix or (prefix.endswith("-") and n.startswith(prefix)) for n in wanted):
                continue
            out.extend(r for r in stack.enter_context(make()) if r.name in wanted)
        yield out


__all__ = ["ROLES", "Role", "roles"]
