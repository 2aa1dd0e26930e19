"""Keys and certificates: API keys of the service, development certificates, kolberg key rotation."""
from __future__ import annotations

import json
import sys

from ..errors import PrivfaceError
from .common import (
    http_args,
    http_kw,
    print_result,
)


def cmd_keys(a) -> int:
    """API keys of `privface serve` in the store --db: create (prints the secret once), list, revoke."""
    from ..service.auth import ApiKeys
    from ..store import open_store

    with open_store(a.db) as store:
        keys = ApiKeys(store)
        if a.action == "create":
            key, secret = keys.create(a.scopes, a.name)
            if a.json:
                print(json.dumps({**key.to_dict(), "api_key": secret}))
            else:
                print_result({**key.to_dict(), "api_key": secret}, False)
                print("privface: the api_key is shown only now: keep it secret (PRIVFACE_API_KEY)", file=sys.stderr)
            return 0
        if a.action == "list":
            rows = [k.to_dict() for k in keys.list()]
            if a.json:
                print(json.dumps(rows))
            else:
                for r in rows:
                    print(f"{r['key_id']}  {','.join(r['scopes']):<28} {r['created']}  {r['name'] or ''}")
            return 0
        if not a.key_id:
            raise PrivfaceError("privface keys revoke needs the key id (privface keys list)")
        revoked = keys.revoke(a.key_id)
        print_result({"key_id": a.key_id, "revoked": revoked}, a.json)
        return 0 if revoked else 1


def cmd_certs(a) -> int:
    from ..service.certs import make_dev_certs

    files = make_dev_certs(a.out, a.hosts.split(","), days=a.days)
    print_result(files, a.json)
    return 0


def cmd_rotate_keys(a) -> int:
    """Admin: re-encrypt every kolberg reference in --db under a fresh key of the auth server (resumable)."""
    if a.protocol != "kolberg":
        raise PrivfaceError("rotate-keys supports --protocol kolberg only")
    from ..protocols.kolberg import KolbergParams
    from ..protocols.kolberg.rotation import rotate_keys
    from ..service.clients.kolberg import HttpAuth
    from ..store import open_store

    with open_store(a.db) as store, HttpAuth(a.auth_url, **http_kw(a)) as auth:
        scheme = a.scheme or auth.keys().scheme
        report = rotate_keys(KolbergParams(scheme), store, auth)
    print_result(report.to_dict(), a.json)
    return 0


def register(sub) -> None:
    """keys, certs."""
    s = sub.add_parser("keys", help="API keys of privface serve: create (secret shown once), list, revoke")
    s.add_argument("action", choices=["create", "list", "revoke"])
    s.add_argument("key_id", nargs="?", help="revoke: the key id (from list)")
    s.add_argument("--db", required=True, help="the service's template store URL (keys live there, hashed)")
    s.add_argument("--scopes", default="verify",
                   help="create: comma-separated subset of enrol,verify,admin,internal,metrics")
    s.add_argument("--name", help="create: the party's name (shown by list)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_keys)

    s = sub.add_parser("certs", help="development only: a local CA, a server and a client certificate (P-256)")
    s.add_argument("--out", required=True, help="directory to write ca/server/client .pem and .key into")
    s.add_argument("--hosts", default="localhost,127.0.0.1", help="server certificate names (DNS names, IPs)")
    s.add_argument("--days", type=int, default=365, help="validity (default 365)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_certs)


def register_rotate_keys(sub) -> None:
    """rotate-keys."""
    s = sub.add_parser("rotate-keys", help="admin: re-encrypt every stored reference under a fresh auth key "
                                           "(blind re-encryption, resumable; kolberg)")
    s.add_argument("--protocol", required=True, choices=["kolberg"])
    s.add_argument("--db", required=True, help="the DB server's template store URL")
    s.add_argument("--auth-url", required=True, help="the auth server's base URL")
    s.add_argument("--scheme", choices=["ckks", "bfv", "ntru"], help="default: the auth server's")
    s.add_argument("--json", action="store_true")
    http_args(s)
    s.set_defaults(func=cmd_rotate_keys)
