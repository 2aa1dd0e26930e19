"""`privface identify`: 1:N over HTTP (kolberg, ident, cryptomask) or against a local encrypted gallery."""
from __future__ import annotations

import numpy as np

from ..errors import PrivfaceError
from .common import (
    backend_args,
    backend_name,
    face_args,
    http_args,
    http_kw,
    http_stats,
    human,
    one_face,
    print_result,
)
from .gallery import GALLERY_SCHEMES
from .verification import cmd_kolberg_client


def _identify_embedding(a, gallery_meta: dict | None = None):
    """(embedding, {"face": which face was used, "face_ms": ms}) from a face photo, or (embedding, {}) from a .npy
    file holding one embedding. With a local gallery's meta, a photo is embedded only with the gallery's backend
    (``scale.layout.check_backend``)."""
    if gallery_meta is not None and not a.image.endswith(".npy"):
        from ..scale.layout import check_backend

        check_backend(gallery_meta, backend_name(a))
    if a.image.endswith(".npy"):
        try:
            x = np.load(a.image, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise PrivfaceError(f"cannot read {a.image}: {e}") from None
        if x.size == 0 or x.ndim > 2 or (x.ndim == 2 and x.shape[0] != 1):
            raise PrivfaceError(f"{a.image}: expected one embedding, got shape {x.shape}")
        return x, {}
    face, ms = one_face(a, a.image)
    return face.embedding, {"face": face.describe(), "face_ms": ms}


def _ident_client(a) -> int:
    """identify --protocol ident --server URL: the hers / idface local server (seed 003 §3.2) over HTTP."""
    from ..service.clients.hers import IdentClient

    x, face = _identify_embedding(a)
    with IdentClient(a.server, **http_kw(a)) as http:
        found = http.identify(x)
        out = {"protocol": "ident", "id": found, "accepted": found is not None, **http_stats(http), **face}
    if a.json:
        print_result(out, True)
    else:
        print(found if found is not None else "no match")
        if face:
            print(f"face {face['face']}")
    return 0 if found is not None else 1


def _cryptomask_client(a) -> int:
    """identify --protocol cryptomask --server URL --key-store URL: the verifier (sk_v) against a CS (seed 001)."""
    from ..scale.cryptomask_identify import ANSWER
    from ..service.clients.cryptomask import VerifierClient

    if a.scheme not in (None, "cryptomask") or a.ray or a.workers:
        raise PrivfaceError("--protocol cryptomask takes --key-store and --name (no --scheme, --ray, --workers)")
    if a.variant != "w":
        raise PrivfaceError("--variant wo runs against a local cryptomask gallery (--gallery), not over HTTP")
    if not a.key_store:
        raise PrivfaceError("--protocol cryptomask needs --key-store URL (the verifier's sk_v and τ)")
    x, face = _identify_embedding(a)
    with VerifierClient(a.server, a.key_store, name=a.name or "default", **http_kw(a)) as http:
        out = http.identify(x)
        out = {**out, "answer": ANSWER, **http_stats(http)}
    _print_bit(out, face, a.json)
    return 0 if out["match"] else 1


def _print_bit(out: dict, face: dict, as_json: bool) -> None:
    """cryptomask's 1-bit answer (in process or over HTTP): JSON, or "match"/"no match" and the figures."""
    out = {"match": out["match"], "accepted": out["match"], **out, **face}
    if as_json:
        print_result(out, True)
        return
    print(("match" + (f" {out['id']}" if out.get("id") is not None else "")) if out["match"] else "no match")
    print("  ".join(f"{k} {human(k, v)}" for k, v in out.items()
                    if k not in ("match", "accepted", "id", "answer", "bytes_per_phase", "exchanges", "ot_exchanges")))
    print(out["answer"])


def _server_only(a) -> None:
    """kolberg and ident over HTTP take none of the local gallery's options."""
    if a.scheme in GALLERY_SCHEMES or a.key_store or a.ray or a.workers or a.name:
        raise PrivfaceError("--scheme idface-ckks|idface-paillier|hers, --key-store, --name, --ray and "
                            "--workers go with --gallery")


def _kolberg_client(a) -> int:
    """identify --server URL: a kolberg DB server (seed 002)."""
    _server_only(a)
    return cmd_kolberg_client(a)


def _ident_server(a) -> int:
    _server_only(a)
    if a.scheme is not None:
        raise PrivfaceError("--scheme does not go with --protocol ident: the local server's gallery has one")
    return _ident_client(a)


#: identify --server: the client of each protocol (--protocol).
SERVER_CLIENTS = {"kolberg": _kolberg_client, "ident": _ident_server, "cryptomask": _cryptomask_client}


def cmd_identify(a) -> int:
    """identify: over HTTP (--server, a client from SERVER_CLIENTS) or against a local encrypted gallery."""
    if a.server:
        return SERVER_CLIENTS[a.protocol](a)
    if a.protocol in ("ident", "cryptomask"):
        who = "the local server's" if a.protocol == "ident" else "the CS's"
        raise PrivfaceError(f"--protocol {a.protocol} goes with --server ({who} URL)")
    from ..scale.layout import stored_scheme

    if a.scheme is not None and a.scheme not in GALLERY_SCHEMES:
        raise PrivfaceError(f"--gallery galleries use --scheme {' or '.join(GALLERY_SCHEMES)}")
    if a.workers is not None and (a.ray is None or a.workers < 1):
        raise PrivfaceError("--workers needs --ray and a positive count")
    name = a.name or "default"
    if stored_scheme(a.gallery, name) == "cryptomask":
        return _identify_cryptomask(a, name)
    if a.variant != "w":
        raise PrivfaceError("--variant goes with a cryptomask gallery")
    return _identify_gallery(a, name)


def _identify_gallery(a, name: str) -> int:
    """identify --gallery with a hers / idface gallery (seed 003): the id found, or nobody."""
    from ..scale import Gallery, identify

    gallery = Gallery(a.gallery, name)
    gallery_scheme = gallery.settings.scheme
    if a.scheme is not None and a.scheme != gallery_scheme:
        raise PrivfaceError(f"the gallery was enrolled with {gallery_scheme}, not {a.scheme}")
    x, face = _identify_embedding(a, gallery.meta)
    out = identify(x, a.gallery, key_store_url=a.key_store, ray=a.ray, workers=a.workers, name=name)
    out = {"id": out["id"], "accepted": out["id"] is not None, **{k: v for k, v in out.items() if k != "id"}, **face}
    if a.json:
        print_result(out, True)
    else:
        print(out["id"] if out["accepted"] else "no match")
        print("  ".join(f"{k} {human(k, v)}" for k, v in out.items() if k not in ("id", "accepted")))
    return 0 if out["accepted"] else 1


def _identify_cryptomask(a, name: str) -> int:
    """identify --gallery with a cryptomask gallery (seed 001): the verifier's bit, no id (exit 0 match, 1 none)."""
    from ..scale import identify
    from ..scale.cryptomask_gallery import CMGallery

    if a.scheme is not None and a.scheme != "cryptomask":
        raise PrivfaceError(f"the gallery was enrolled with cryptomask, not {a.scheme}")
    x, face = _identify_embedding(a, CMGallery(a.gallery, name).meta)
    out = identify(x, a.gallery, key_store_url=a.key_store, ray=a.ray, workers=a.workers, name=name,
                   variant=a.variant)
    _print_bit(out, face, a.json)
    return 0 if out["match"] else 1


def register(sub) -> None:
    """identify."""
    s = sub.add_parser("identify", help="who is this face? kolberg over HTTP (--server) or a local encrypted "
                                        "gallery (--gallery; hers / idface-ckks / idface-paillier; cryptomask: match "
                                        "or not, no id) (exit 0 found, 1 nobody)")
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="the kolberg DB server's (or with --protocol ident, the hers/idface local "
                                        "server's) base URL")
    where.add_argument("--gallery", help="an encrypted gallery's store URL (made by `privface gallery enrol`)")
    s.add_argument("image", help="face photo (--gallery: or a .npy file holding one embedding)")
    backend_args(s)
    face_args(s)
    s.add_argument("--scheme", choices=["ckks", "bfv", "ntru", *GALLERY_SCHEMES],
                   help="--server: the server's scheme (default bfv); --gallery: checked against the gallery's")
    s.add_argument("--key-store", help="--gallery: the key server's store URL (default for sqlite:///g.db: "
                                       "sqlite:///g.keys.db); --protocol cryptomask --server: the verifier's")
    s.add_argument("--ray", metavar="auto|ADDRESS", help="--gallery: shard the blocks over Ray workers "
                                                         "(auto: a local Ray; else a cluster address)")
    s.add_argument("--workers", type=int, help="--ray: number of shards (default: the cluster's CPUs)")
    s.add_argument("--name", help="--gallery, --protocol cryptomask: which gallery (default: default)")
    s.add_argument("--protocol", choices=list(SERVER_CLIENTS), default="kolberg",
                   help="--server: kolberg DB server (default), ident local server (`serve --protocol ident "
                        "--role local`) or cryptomask CS (`serve --protocol cryptomask --role cs`; with --key-store, "
                        "the verifier's keys)")
    s.add_argument("--variant", choices=["w", "wo"], default="w",
                   help="a cryptomask --gallery: w (Alg. 2 + Alg. 3: match or not, no id; default) or wo "
                        "(CryptoMask-WO, seed 001 Fig. 2: the verifier decrypts every distance and names the best)")
    s.add_argument("--json", action="store_true")
    http_args(s)
    s.set_defaults(func=cmd_identify)
