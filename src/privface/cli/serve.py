"""`privface serve`: the HTTP service for one or more protocols (privface.service)."""
from __future__ import annotations

import os
import sys

from ..errors import PrivfaceError
from ..faces.thresholds import squared_quantized
from ..templates.quantize import IM2020_SCALE
from .common import (
    DEFAULT_BACKEND,
    TAU_HELP,
    gsm_params,
    im2020_params,
    mode_args,
    per_backend,
)


def _im2020_service_options(a) -> dict:
    """im2020: the parameters and --tp-public-key (§VII)."""
    options = {"params": im2020_params(a)}
    if a.tp_public_key:
        try:
            with open(a.tp_public_key, "rb") as f:
                options["tp_public_key"] = f.read()
        except OSError as e:
            raise PrivfaceError(f"cannot read --tp-public-key {a.tp_public_key}: {e.strerror}") from None
    return options


def _gsm_signing_key_path(a) -> str | None:
    """--signing-key, else ``<dir of the SQLite file>/<its stem>.gsm-signing.key`` (outside the store, not
    matched by a ``privface.db*`` backup glob); an in-memory store gets a per-process key, PostgreSQL none."""
    if a.signing_key:
        return a.signing_key
    if a.db.startswith("sqlite:"):
        from ..store.sqlite import SQLiteStore

        db = SQLiteStore.path_of(a.db)
        return None if db is None else str(db.with_name(f"{db.stem}.gsm-signing.key"))
    raise PrivfaceError("a gsm provider on this store needs --signing-key PATH (its Ed25519 key file, created "
                        "mode 0600 if absent; never kept in the store)")


def _gsm_service_options(a) -> dict:
    """gsm: --role provider (--signing-key PATH, default next to a SQLite store) or terminal (--provider-key
    HEX, --capture IMAGE read, embedded and quantized to norm ζ at every match/start, or without --capture the
    kiosk page's camera; --allow-variant pi1)."""
    if a.role not in ("provider", "terminal"):
        raise PrivfaceError("--protocol gsm needs --role provider or --role terminal")
    options = {"role": a.role, "params": gsm_params(a), "backend": a.backend}
    if a.role == "provider":
        if a.allow_variant:
            raise PrivfaceError("--allow-variant applies to a gsm terminal")
        options["signing_key_path"] = _gsm_signing_key_path(a)
        return options
    if not a.provider_key:
        raise PrivfaceError("a gsm terminal needs --provider-key HEX (printed by the provider at start): it checks "
                            "the provider's signature on every first message")
    try:
        options["provider_key"] = bytes.fromhex(a.provider_key)
    except ValueError:
        raise PrivfaceError("--provider-key must be the provider's key as 64 hex digits") from None
    options["allow_pi1"] = "pi1" in (a.allow_variant or ())
    from ..faces.registry import make_backend
    from ..templates.fixed_norm import fixed_norm_template

    backend, m, path = make_backend(a.backend), options["params"].m, a.capture
    if path:
        options["capture"] = lambda: fixed_norm_template(backend.embed(path), m)
    else:  # the kiosk page's camera (/app/kiosk.html)
        from ..service.bindings.gsm_kiosk import Kiosk

        options["kiosk"] = Kiosk(lambda frame: fixed_norm_template(backend.embed(frame), m))
    return options


def _kolberg_service_options(a) -> dict:
    """kolberg: --role auth (key pairs in its own --db) or db (--auth-url of the auth server), --scheme."""
    if a.role not in ("db", "auth"):
        raise PrivfaceError("--protocol kolberg needs --role db or --role auth")
    if a.role == "db" and not a.auth_url:
        raise PrivfaceError("a kolberg DB server needs --auth-url (the auth server's base URL)")
    from ..protocols.kolberg.params import KolbergParams, default_thresholds

    scheme = a.scheme or "bfv"
    try:
        default_thresholds(a.backend)
        params = KolbergParams(scheme, backend=a.backend)
    except ValueError as e:
        raise PrivfaceError(str(e)) from None
    options = {"role": a.role, "scheme": scheme, "params": params, "auth_url": a.auth_url}
    if a.role == "db":
        from ..service.client import tls_context

        options["auth_api_key"] = a.auth_api_key or os.environ.get("PRIVFACE_AUTH_API_KEY") or None
        options["auth_tls"] = tls_context(a.auth_ca, a.auth_client_cert, a.auth_client_key)
    return options


def _ident_service_options(a) -> dict:
    """ident (seed 003 §3.2): --role key (--db = the gallery's key store, sk) or local (--gallery, default
    --db; --key-url of the key server, --key-api-key of scope internal), --gallery-name."""
    if a.role not in ("key", "local"):
        raise PrivfaceError("--protocol ident needs --role key or --role local")
    options = {"role": a.role, "gallery_name": a.gallery_name}
    if a.role == "key":
        from ..scale.key_pool import key_workers

        options.update(insecure_test_params=a.insecure_test_params, key_workers=key_workers(a.key_workers))
        return options
    if a.ray:  # issue 38: the gallery's blocks resident in K Ray actors (scale.resident)
        options.update(ray="auto" if a.ray == "local" else a.ray, shards=a.shards)
    if not a.key_url:
        raise PrivfaceError("an ident local server needs --key-url (the key server's base URL)")
    from ..service.client import tls_context

    options.update(gallery_url=a.gallery or a.db, key_url=a.key_url,
                   key_api_key=a.key_api_key or os.environ.get("PRIVFACE_KEY_API_KEY") or None,
                   key_tls=tls_context(a.auth_ca, a.auth_client_cert, a.auth_client_key))
    return options


def _cryptomask_service_options(a) -> dict:
    """cryptomask (seed 001): --role cs over the persisted gallery (--gallery, default --db; --gallery-name); the
    CS holds pk and k_sw, never sk or sk_v (the verifier is the client: identify --protocol cryptomask); with
    --key-url (and --key-api-key, scope internal) of the key generator its admin steps erase (gallery/remove).
    --role kg: the key generator (--db = the gallery's key store, sk), steps erase/attach and erase/refresh."""
    if a.role == "kg":
        return {"role": "kg", "gallery_name": a.gallery_name, "insecure_test_params": a.insecure_test_params}
    if a.role != "cs":
        raise PrivfaceError("--protocol cryptomask needs --role cs or kg (the verifier is `privface identify "
                            "--protocol cryptomask --server URL --key-store URL`)")
    options = {"role": "cs", "gallery_url": a.gallery or a.db, "gallery_name": a.gallery_name,
               "memory": a.memory_budget, "pool_memory": a.ot_pool_memory}
    if a.key_url:  # the key generator, for gallery/remove (bindings.cryptomask_kg)
        from ..service.client import tls_context

        options.update(kg_url=a.key_url, kg_api_key=a.key_api_key or os.environ.get("PRIVFACE_KEY_API_KEY") or None,
                       kg_tls=tls_context(a.auth_ca, a.auth_client_cert, a.auth_client_key))
    if a.ray:  # issue 38: the gallery's blocks resident in K Ray actors (scale.resident_cs)
        options.update(ray="auto" if a.ray == "local" else a.ray, shards=a.shards)
    return options


# protocol name -> its `privface serve` options; a protocol with none (e.g. hers' in-process demo) gets {}
SERVICE_OPTIONS = {
    "im2020": _im2020_service_options,
    "gsm": _gsm_service_options,
    "kolberg": _kolberg_service_options,
    "ident": _ident_service_options,
    "cryptomask": _cryptomask_service_options,
}


def _service_options(a, name: str) -> dict:
    """Protocol options of `privface serve` for the protocol `name`."""
    if (a.ray or a.shards is not None) and (name, a.role) not in (("ident", "local"), ("cryptomask", "cs")):
        raise PrivfaceError("--ray and --shards apply to --protocol ident --role local and --protocol cryptomask "
                            "--role cs (the gallery's shards)")
    if a.shards is not None and (not a.ray or a.shards < 1):
        raise PrivfaceError("--shards K needs --ray and K ≥ 1")
    if a.key_workers is not None and not (name == "ident" and a.role == "key"):
        raise PrivfaceError("--key-workers applies to --protocol ident --role key (its decryption processes)")
    options = SERVICE_OPTIONS.get(name)
    return options(a) if options else {}


def page_url(scheme: str, host: str, port: int) -> str:
    """The URL of the browser page (``/app/``) a person on this machine opens: a wildcard address as loopback."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}/app/"


class _Shutdown(Exception):
    """SIGINT/SIGTERM reached `privface serve` (after uvicorn finished its graceful shutdown)."""


def _shutdown(signum, frame):
    raise _Shutdown


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000**2, "mb": 1000**2, "mib": 1 << 20,
          "g": 1000**3, "gb": 1000**3, "gib": 1 << 30}


def size(text: str) -> int:
    """A byte count: a whole number with an optional unit (B, kB, KiB, MB, MiB, GB, GiB), e.g. 4GiB."""
    t = str(text).strip().lower().replace(" ", "")
    number = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    if not number.isdigit() or t[len(number):] not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(number) * _UNITS[t[len(number):]]


def _serve_ops_args(s) -> None:
    """Limits and operations of `privface serve` (issue 8 §2, §6; docs/operations.md "Running the service")."""
    s.add_argument("--config", metavar="TOML", help="read serve options from this TOML file (keys: option names); "
                   "$PRIVFACE_<OPTION> overrides it, the command line overrides both")
    s.add_argument("--log-format", default="json", choices=["json", "text"], help="stderr log lines (default json)")
    s.add_argument("--audit-log", metavar="PATH", help="append the audit trail to this file as JSON lines (created "
                   "0600); default: stderr with the log. Kept at every --log-level")
    s.add_argument("--max-sessions", type=int, default=10_000, help="open multi-round sessions at most (default 10000)")
    s.add_argument("--max-sessions-per-caller", type=int, default=None,
                   help="open sessions one API key (or client address without keys) may hold; beyond: 429 "
                   "(default 1%% of --max-sessions)")
    s.add_argument("--rate-limit", type=float, default=100.0,
                   help="requests per second per API key (or client address without keys); 0: off (default 100)")
    s.add_argument("--rate-burst", type=int, default=200, help="requests a client may send at once (default 200)")
    s.add_argument("--lockout-failures", type=int, default=5,
                   help="rejected verifications in a row before a subject ID is locked out; 0: off (default 5)")
    s.add_argument("--lockout-backoff", type=float, default=30.0,
                   help="first lockout in seconds, doubling with every further rejection (default 30)")
    s.add_argument("--lockout-max", type=float, default=3600.0, help="longest lockout in seconds (default 3600)")
    s.add_argument("--body-timeout", type=float, default=300.0, metavar="SECONDS",
                   help="seconds a request body may take to arrive, from when the service starts reading it; then "
                   "408 and the connection closed (default 300)")
    s.add_argument("--body-min-rate", type=size, default=16384, metavar="BYTES",
                   help="bytes per second a request body must bring in every --body-rate-window, the first window "
                   "being its grace period; slower (a slow-loris upload): 408 and the connection closed; 0: off "
                   "(default 16384, 16 KiB/s)")
    s.add_argument("--body-rate-window", type=float, default=10.0, metavar="SECONDS",
                   help="seconds over which --body-min-rate is measured (default 10)")
    s.add_argument("--max-requests-per-caller", type=int, default=32, metavar="N",
                   help="requests one API key (or client address without keys) may have in flight; beyond: 429 "
                   "before the body is read; keys with the internal or admin scope are not limited (default 32)")
    s.add_argument("--max-body-bytes-per-caller", type=size, default=64 << 20, metavar="BYTES",
                   help="request-body bytes one API key (or address) may have in flight together; beyond: 429 (a "
                   "caller's only body may still reach its step's cap; default 64MiB)")
    s.add_argument("--max-connections", type=int, default=1024, metavar="N",
                   help="open connections and requests the whole server serves at once; beyond: 503 (uvicorn's "
                   "limit_concurrency); 0: no limit (default 1024)")
    s.add_argument("--backlog", type=int, default=2048, metavar="N",
                   help="connections the kernel queues before the server accepts them (default 2048)")
    s.add_argument("--memory-budget", type=size, default=None, metavar="BYTES",
                   help="cryptomask cs: bytes the identifications' Alg. 3 exchanges may hold together (each round's "
                   "body from its head on, and its answer), beside the loaded gallery; sets how many "
                   "identifications run at once (at most 8: 4 at 2^20 with the default) and refuses uploads past it "
                   "(default 4GiB)")
    s.add_argument("--ot-pool-memory", type=size, default=None, metavar="BYTES",
                   help="cryptomask cs: bytes the verifiers' Ferret pools may hold together, beside --memory-budget "
                   "(8 B per resident correlated OT, 16 B per LPN output: ≈ 0.46 GiB per pool at 2^20); sets how many "
                   "pools stay resident (at least one, at most 16; default 4GiB)")


def _serve_limits(a, store) -> dict:
    from ..service.limits import BodyLimits, InFlight, Lockout, RateLimiter

    if a.max_connections < 0 or a.backlog < 1:
        raise PrivfaceError("--max-connections must be ≥ 0 and --backlog ≥ 1")
    try:
        return {"rate_limit": RateLimiter(a.rate_limit, a.rate_burst) if a.rate_limit > 0 else None,
                "lockout": Lockout(store, a.lockout_failures, a.lockout_backoff, a.lockout_max)
                if a.lockout_failures > 0 else None,
                "body_limits": BodyLimits(a.body_timeout, a.body_min_rate, a.body_rate_window),
                "in_flight": InFlight(a.max_requests_per_caller, a.max_body_bytes_per_caller)}
    except ValueError as e:
        raise PrivfaceError(str(e)) from None


def cmd_serve(a) -> int:
    import logging
    import logging.config
    import signal

    import uvicorn

    from ..service.app import create_app
    from ..service.auth import ApiKeys
    from ..service.observe import log_config
    from ..service.registry import load_service
    from ..store import open_store
    from ..store.base import redact

    try:
        logging.config.dictConfig(log_config(a.log_level, a.log_format, a.audit_log))
    except ValueError as e:  # dictConfig wraps the handler's OSError
        cause = e.__cause__
        raise PrivfaceError(f"cannot open --audit-log {a.audit_log}: "
                            f"{getattr(cause, 'strerror', None) or cause or e}") from None
    note = logging.getLogger("privface.serve")  # start and stop: logged at every --log-level
    if a.insecure_test_params:
        note.warning("WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only, "
                     "never for real faces")
    store = open_store(a.db)
    try:
        services = [load_service(name, store, **_service_options(a, name)) for name in dict.fromkeys(a.protocol)]
        if (a.tls_cert is None) != (a.tls_key is None):
            raise PrivfaceError("give both --tls-cert and --tls-key, or neither")
        if a.tls_client_ca and not a.tls_cert:
            raise PrivfaceError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
        keys = None
        if a.no_auth:
            note.warning("WARNING: --no-auth: ANYONE WHO CAN REACH THIS PORT MAY ENROL, VERIFY, REVOKE AND "
                         "ROTATE KEYS — development only")
        else:
            keys = ApiKeys(store)
            if not keys.list():
                note.warning("no API keys in this store yet, every step is refused until one is "
                             "created: privface keys create --db … --scopes …")
        limits = _serve_limits(a, store)
        if a.max_sessions < 1 or a.session_ttl <= 0 or (a.max_sessions_per_caller or 1) < 1:
            raise PrivfaceError("--max-sessions, --max-sessions-per-caller and --session-ttl must be positive")
        app = create_app(store, services, session_ttl=a.session_ttl, max_sessions=a.max_sessions,
                         max_sessions_per_caller=a.max_sessions_per_caller, keys=keys,
                         allow_origins=a.allow_origin or (), **limits)
        for svc in services:
            if svc.name == "gsm" and svc.role == "provider":  # public: terminals are configured with it
                from ..service.bindings.gsm import provider_key_bytes

                note.info(f"gsm provider key {provider_key_bytes(svc.provider.public_key).hex()}")
            if svc.name == "cryptomask" and svc.role == "cs":
                cs = svc.party
                note.info(f"cryptomask: memory budget {cs.memory} bytes: {cs.max_sessions} identifications at once, "
                          f"{cs.max_per_caller} per caller")
            if svc.name == "gsm" and svc.role == "terminal" and svc.allow_pi1:
                note.warning("WARNING: --allow-variant pi1: this terminal serves Π1, whose result is the device's "
                             "own claim (answered as such, not counted, audited as pi1-claimed-…)")
        scheme = "https" if a.tls_cert else "http"
        note.info(f"serving {', '.join(s.name for s in services)} on {scheme}://{a.host}:{a.port} "
                  f"(store {redact(a.db)}; API keys {'off' if a.no_auth else 'required'}"
                  f"{'; mutual TLS' if a.tls_client_ca else ''}; rate limit "
                  f"{f'{a.rate_limit:g}/s burst {a.rate_burst}' if limits['rate_limit'] else 'off'}; lockout "
                  f"{f'after {a.lockout_failures} rejections' if limits['lockout'] else 'off'})")
        if any(s.name == "im2020" for s in services):
            note.info(f"browser page: {page_url(scheme, a.host, a.port)}")
        for svc in services:
            if svc.name == "gsm" and getattr(svc, "kiosk", None) is not None:  # a credential: stderr, not the log
                print(f"kiosk page (open it on the terminal's screen; the token sets what the camera sees): "
                      f"{page_url(scheme, a.host, a.port)}kiosk.html#token={svc.kiosk.token}", file=sys.stderr)
        tls = {}
        if a.tls_cert:
            import ssl

            tls = {"ssl_certfile": a.tls_cert, "ssl_keyfile": a.tls_key}
            if a.tls_client_ca:
                tls.update(ssl_ca_certs=a.tls_client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
        # uvicorn catches SIGINT/SIGTERM, stops accepting, lets running requests finish, then
        # re-raises the signal to the handlers found before it started: ours end the run here.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _shutdown)
        uvicorn.Server(uvicorn.Config(app, host=a.host, port=a.port, log_config=None, log_level=a.log_level,
                                      access_log=False, timeout_graceful_shutdown=30, backlog=a.backlog,
                                      limit_concurrency=a.max_connections or None, **tls)).run()
    except _Shutdown:
        pass
    finally:
        store.close()
    note.info("stopped; store closed")
    return 0


def register(sub) -> None:
    """serve."""
    s = sub.add_parser("serve", help="run the HTTP service for one or more protocols",
                       description="Run the HTTP service for one or more protocols. With --protocol im2020 it also "
                                   "serves the browser page at /app/ (`/` leads there): e.g. `privface serve "
                                   "--protocol im2020 --no-auth`, then open http://127.0.0.1:8000/app/. API docs at "
                                   "/docs, liveness at /healthz. Decision thresholds default to the face backend's "
                                   "shared one (--backend; the distance `privface compare` uses, faces.thresholds): "
                                   "im2020 τ and kolberg bfv ⌊(t·128)²⌋ (squared distance ×128: "
                                   + per_backend(lambda p: squared_quantized(p.distance, IM2020_SCALE))
                                   + "), kolberg ckks t² (squared distance: "
                                   + per_backend(lambda p: f"{p.distance ** 2:g}")
                                   + "), gsm T′ (cosine: " + per_backend(lambda p: f"{p.cosine:g}")
                                   + "); kolberg ntru a Hamming threshold of its own ("
                                   + per_backend(lambda p: p.ntru) + ").")
    s.add_argument("--protocol", action="append", required=True, metavar="NAME",
                   help="protocol to mount, e.g. im2020 (repeat for several)")
    s.add_argument("--backend", default=DEFAULT_BACKEND, choices=["dlib-resnet128", "sface"],
                   help=f"face backend of the templates this server decides on (default {DEFAULT_BACKEND}): its "
                        "default thresholds (faces.thresholds) are im2020's τ, gsm's T′ and kolberg's; a gsm "
                        "terminal embeds --capture with it")
    s.add_argument("--db", default="sqlite:///privface.db",
                   help="template store URL: sqlite:///path.db (default sqlite:///privface.db) or postgresql://…")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every interface, "
                        "put TLS in front or use --tls-cert)")
    s.add_argument("--port", type=int, default=8000, help="TCP port to listen on (default 8000)")
    s.add_argument("--session-ttl", type=float, default=120.0, help="seconds a flow's session lives (default 120)")
    s.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    s.add_argument("--security-bits", type=int, default=112, choices=[112, 128],
                   help="im2020: security level of client keys; only its N size and k are accepted (default 112)")
    s.add_argument("--tau", type=int, help=TAU_HELP)
    s.add_argument("--tp-public-key", metavar="PEM",
                   help="im2020: accept only registrations signed by this trusted party (§VII)")
    s.add_argument("--insecure-test-params", action="store_true",
                   help="im2020, gsm, ident key server: accept toy key sizes — tests only, INSECURE")
    s.add_argument("--role", choices=["provider", "terminal", "db", "auth", "key", "local", "cs", "kg"],
                   help="gsm: serve the service provider (enrolment Π_en) or a terminal (Π1/Π2/Π3 matching); "
                        "kolberg: the DB server (encrypted references) or the auth server (secret key); "
                        "ident: the key server (sk; --db is the gallery's key store) or the local server "
                        "(encrypted gallery); cryptomask: cs, the Cloud Server over --gallery (pk, k_sw), or kg, the "
                        "key generator (sk; --db is the gallery's key store) the CS erases with")
    s.add_argument("--auth-url", help="kolberg DB server: the auth server's base URL")
    s.add_argument("--gallery", metavar="URL", help="ident local server, cryptomask cs: the gallery store "
                                                    "(default: --db)")
    s.add_argument("--gallery-name", default="default", help="ident, cryptomask: which gallery of the store "
                                                             "(default default)")
    s.add_argument("--key-url", help="ident local server: the key server's base URL; cryptomask cs: the key "
                                     "generator's (--role kg), for gallery/remove")
    s.add_argument("--ray", metavar="ADDRESS|local",
                   help="ident local server, cryptomask cs: keep the gallery's blocks resident in Ray actors of "
                        "the cluster at "
                        "ADDRESS (or a local Ray), restarted elsewhere when a node is lost; the gallery store should "
                        "then be PostgreSQL, which every node reads")
    s.add_argument("--shards", type=int, metavar="K",
                   help="ident local server, cryptomask cs, with --ray: gallery shards, one CPU each, spread over "
                        "the nodes "
                        "(default: one per CPU of the cluster)")
    s.add_argument("--key-workers", type=int, metavar="W",
                   help="ident key server: decryption processes of its own, the secret key never leaves the "
                        "machine (default: $PRIVFACE_KEY_WORKERS, else one per core)")
    s.add_argument("--key-api-key", help="ident local server / cryptomask cs: API key (scope internal) for the "
                                         "key server / key generator "
                                         "(default: $PRIVFACE_KEY_API_KEY)")
    s.add_argument("--scheme", choices=["ckks", "bfv", "ntru"], help="kolberg: HE scheme (default bfv)")
    s.add_argument("--signing-key", metavar="PATH",
                   help="gsm provider: Ed25519 signing key file (PKCS#8 PEM, mode 0600; created if absent, a key "
                        "an older privface kept in the store is moved into it). Default: <db dir>/<db "
                        "name>.gsm-signing.key next to a SQLite store; required with PostgreSQL")
    s.add_argument("--allow-variant", action="append", choices=["pi1"],
                   help="gsm terminal: also serve Π1, whose decision is the device's own claim (semi-honest "
                        "device, seed 004 §5): answered as a claim, never counted nor audited as accepted. "
                        "Default: Π2, Π3 only")
    s.add_argument("--provider-key", metavar="HEX",
                   help="gsm terminal: the provider's Ed25519 key (64 hex digits, printed by the provider at start)")
    s.add_argument("--capture", metavar="IMAGE",
                   help="gsm terminal: image file holding the camera's latest frame (default: the kiosk page "
                   "/app/kiosk.html posts its camera's frames)")
    s.add_argument("--allow-origin", action="append", metavar="ORIGIN",
                   help="another origin of this deployment, scheme://host[:port] (repeatable): this server's /v1/ "
                        "steps answer CORS for it and its page may connect to it (gsm: a phone's installed app on "
                        "the provider's origin presenting to a terminal on another origin)")
    s.add_argument("--no-auth", action="store_true",
                   help="serve without API keys — development only, INSECURE (default: every step needs a key "
                        "with its scope, see privface keys)")
    s.add_argument("--tls-cert", metavar="PEM", help="serve https with this certificate (chain)")
    s.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    s.add_argument("--tls-client-ca", metavar="PEM", help="require client certificates issued by this CA (mutual TLS)")
    s.add_argument("--auth-api-key", help="kolberg DB server: API key (scope internal) for the auth server "
                                          "(default: $PRIVFACE_AUTH_API_KEY)")
    s.add_argument("--auth-ca", metavar="PEM", help="kolberg DB server / ident local server: CA certificate of "
                                                    "an https auth / key server")
    s.add_argument("--auth-client-cert", metavar="PEM", help="kolberg DB server / ident local server: client "
                                                             "certificate (mutual TLS)")
    s.add_argument("--auth-client-key", metavar="PEM", help="kolberg DB server / ident local server: its private key")
    mode_args(s)
    _serve_ops_args(s)
    s.set_defaults(func=cmd_serve)
