"""1:1 verification clients over HTTP: enrol, verify, revoke (im2020, kolberg)."""
from __future__ import annotations

from .common import (
    DEFAULT_BACKEND,
    MODES,
    backend_args,
    face_args,
    http_args,
    http_kw,
    http_stats,
    im2020_params,
    one_face,
    print_result,
)


def _key_path(a):
    from pathlib import Path

    from ..service.clients.im2020 import default_key_path

    return Path(a.key).expanduser() if a.key else default_key_path(a.server, a.id)


def _face_template(a, params):
    """C1: detect, align, embed (default backend, the face --face picks) and quantize ×scale; (Γ, ms, which face)."""
    import time

    from ..templates import quantize

    t0 = time.perf_counter()
    face, _ = one_face(a, a.image)
    template = quantize(face.embedding, params.scale)
    return template, round((time.perf_counter() - t0) * 1000, 3), face.describe()


ENROL = ("enrol", "enroll")  # the command and its alias (argparse stores the name typed)


def cmd_enrol(a) -> int:
    if getattr(a, "protocol", "im2020") == "kolberg":
        return cmd_kolberg_client(a)
    import time

    from ..protocols.common import check_subject_id
    from ..protocols.im2020 import Client
    from ..protocols.im2020.parties import PROTOCOL
    from ..service.clients import im2020 as remote

    t0 = time.perf_counter()
    check_subject_id(PROTOCOL, a.id)
    params, path = im2020_params(a), _key_path(a)
    if path.exists() and not a.force:
        raise remote.KeyFileError(f"key file {path} exists; pass --force to replace it")
    template, c1_ms, used = _face_template(a, params)
    t = time.perf_counter()
    client = Client(a.id, params)
    keygen_ms = round((time.perf_counter() - t) * 1000, 3)
    pending = remote.PendingKey(path, remote.key_record(client, a.server), force=a.force)
    try:
        with remote.service_client(a.server, **http_kw(a)) as http:
            resp, st = remote.enrol(http, client, template)
    except BaseException:
        pending.discard()
        raise
    out = {"id": a.id, "server": a.server, "key_file": str(pending.commit()), "replaced": resp.replaced,
           "face": used, "c1_face_ms": c1_ms, "keygen_ms": keygen_ms, "c2_encrypt_ms": st["c2_encrypt_ms"],
           "network_ms": st["network_ms"], "total_ms": round((time.perf_counter() - t0) * 1000, 3),
           "bytes_sent": st["bytes_sent"], "bytes_received": st["bytes_received"]}
    print_result(out, a.json)
    return 0


def cmd_verify(a) -> int:
    if getattr(a, "protocol", "im2020") == "kolberg":
        return cmd_kolberg_client(a)
    import time

    from ..service.clients import im2020 as remote

    t0 = time.perf_counter()
    client, record = remote.load_client(_key_path(a), workers=a.workers)
    if record.subject_id != a.id:
        raise remote.KeyFileError(f"the key file is for {record.subject_id!r}, not {a.id!r}")
    if a.backend is None:  # the face backend the key enrolled with (issue 36)
        a.backend = record.backend
    elif a.backend != record.backend:
        raise remote.KeyFileError(f"the key file of {a.id!r} was made with the face backend {record.backend}: a probe "
                                  f"of --backend {a.backend} cannot be compared with its enrolment (leave --backend "
                                  f"out to use {record.backend}, or enrol again)")
    template, c1_ms, used = _face_template(a, client.params)
    with remote.service_client(a.server, **http_kw(a)) as http:
        r = remote.verify(http, client, template, mode=a.mode)
    out = {"id": a.id, "decision": r["decision"], "accepted": r["accepted"], "face": used, "c1_face_ms": c1_ms,
           "c2_encrypt_ms": r["c2_encrypt_ms"], "c3_decrypt_ms": r["c3_decrypt_ms"],
           "network_ms": r["network_ms"], "total_ms": round((time.perf_counter() - t0) * 1000, 3),
           "bytes_sent": r["bytes_sent"], "bytes_received": r["bytes_received"]}
    out.update({k: r[k] for k in ("mode", "compare_bits", "s3_compare_ms", "compare_bytes") if k in r})
    print_result(out, a.json)
    return 0 if r["accepted"] else 1


def cmd_revoke(a) -> int:
    if getattr(a, "protocol", "im2020") == "kolberg":
        return cmd_kolberg_client(a)
    from ..protocols.common import check_subject_id
    from ..protocols.im2020.parties import PROTOCOL
    from ..service.clients import im2020 as remote

    check_subject_id(PROTOCOL, a.id)
    if a.admin:  # no key needed, none touched: an admin revokes someone else's enrolment
        with remote.service_client(a.server, **http_kw(a)) as http:
            resp, st = remote.admin_revoke(http, a.id)
        removed, note = None, f"revoked {a.id} at {a.server} as an admin (no key file was used or deleted)"
    else:
        path = _key_path(a)
        if not path.exists():
            raise remote.KeyFileError(f"no key file at {path}: revoking proves possession of {a.id}'s key, so pass "
                                      f"--key FILE (or, with an admin API key, --admin to revoke without it)")
        client, record = remote.load_client(path)
        if record.subject_id != a.id:
            raise remote.KeyFileError(f"the key file is for {record.subject_id!r}, not {a.id!r}")
        with remote.service_client(a.server, **http_kw(a)) as http:
            resp, st = remote.revoke(http, client)
        path.unlink(missing_ok=True)
        removed, note = str(path), f"revoked {a.id} at {a.server} and deleted its key file {path}"
    out = {"id": a.id, "revoked": resp.revoked, "key_file_removed": removed,
           "bytes_sent": st["bytes_sent"], "bytes_received": st["bytes_received"]}
    print_result(out, a.json)
    if not a.json:
        print(note[0].upper() + note[1:] + ".")
    return 0


def _kolberg_embedding(a):
    """The face's embedding for the kolberg commands (default backend, the face --face picks); (embedding, ms,
    which face)."""
    face, ms = one_face(a, a.image)
    return face.embedding, ms, face.describe()


def _kolberg_client(a):
    from ..protocols.kolberg import KolbergParams
    from ..service.clients.kolberg import KolbergClient

    backend = getattr(a, "backend", None) or DEFAULT_BACKEND  # revoke sends no template: any
    return KolbergClient(a.server, KolbergParams(a.scheme or "bfv", backend=backend), **http_kw(a))


def cmd_kolberg_client(a) -> int:
    """enrol / verify / identify / revoke against a kolberg DB server (no client key file: the auth
    server's public key is fetched from the DB server)."""
    from ..protocols.common import check_subject_id
    from ..protocols.kolberg.parties import PROTOCOL

    if a.cmd != "identify":
        check_subject_id(PROTOCOL, a.id)
    if getattr(a, "backend", "") is None:
        a.backend = DEFAULT_BACKEND
    x, face_ms, used = _kolberg_embedding(a) if a.cmd != "revoke" else (None, None, None)
    with _kolberg_client(a) as http:
        out = {"protocol": "kolberg", "scheme": http.params.scheme}
        if a.cmd in ENROL:
            out.update(id=a.id, replaced=http.enrol(a.id, x).replaced)
        elif a.cmd == "verify":
            out.update(id=a.id, accepted=http.verify(a.id, x))
        elif a.cmd == "identify":
            out.update(id=http.identify(x))
            out["accepted"] = out["id"] is not None
        else:
            out.update(id=a.id, revoked=http.revoke(a.id))
        out.update(http_stats(http))
    if face_ms is not None:
        out.update(face=used, face_ms=face_ms)
    print_result(out, a.json)
    return 1 if out.get("accepted") is False else 0


def client_args(s, image: bool = True, backend_default: str | None = DEFAULT_BACKEND) -> None:
    s.add_argument("--server", required=True, help="service base URL, e.g. http://127.0.0.1:8000")
    s.add_argument("--id", required=True, help="the subject ID")
    if image:
        s.add_argument("image", help="face photo")
        backend_args(s, backend_default)
        face_args(s)
    s.add_argument("--key", metavar="FILE",
                   help="client key file (default ~/.config/privface/keys/<server host>/<id>.key)")
    s.add_argument("--json", action="store_true")
    http_args(s)


def kolberg_args(s) -> None:
    s.add_argument("--protocol", choices=["im2020", "kolberg"], default="im2020",
                   help="im2020 (default) or kolberg (a kolberg DB server: privface serve --role db)")
    s.add_argument("--scheme", choices=["ckks", "bfv", "ntru"], help="kolberg: the server's scheme (default bfv)")


def register(sub) -> None:
    """enrol (alias enroll), verify, revoke."""
    s = sub.add_parser("enrol", aliases=["enroll"],
                       help="over HTTP: embed the face and enrol it encrypted (im2020: make a key pair, send "
                            "C = Enc(Γ); kolberg: under the auth server's public key)")
    client_args(s)
    kolberg_args(s)
    s.add_argument("--force", action="store_true", help="replace an existing key file")
    s.add_argument("--security-bits", type=int, default=112, choices=[112, 128], help="key size level")
    s.add_argument("--insecure-test-params", action="store_true", help="toy key sizes — tests only, INSECURE")
    s.set_defaults(func=cmd_enrol)

    s = sub.add_parser("verify", help="over HTTP: authenticate ID with a face photo (exit 0 accept, 1 reject)")
    client_args(s, backend_default=None)  # im2020: the key file's backend; kolberg: DEFAULT_BACKEND
    kolberg_args(s)
    s.add_argument("--workers", type=int, help="threads for the level-2 decryption (default: one per core)")
    s.add_argument("--mode", choices=MODES,
                   help="insist on this im2020 mode (default: follow the server); refused before s* or the "
                        "comparison is sent if the server runs another")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("revoke", help="over HTTP: delete ID's enrolment (im2020: by proving possession of its key "
                                      "file, then deleting that file)")
    client_args(s, image=False)
    kolberg_args(s)
    s.add_argument("--admin", action="store_true",
                   help="im2020: revoke without the ID's key (needs an admin API key; keeps any key file)")
    s.set_defaults(func=cmd_revoke)
