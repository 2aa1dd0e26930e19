"""`privface gallery`: encrypted 1:N galleries (privface.scale)."""
from __future__ import annotations

import sys

from ..errors import PrivfaceError
from .common import (
    backend_args,
    backend_spec,
    print_result,
)

GALLERY_SCHEMES = ("idface-ckks", "hers", "idface-paillier")

GALLERY_SCHEMES += ("cryptomask",)  # seed 001: 1-bit answer (scale.cryptomask_gallery)


def cmd_gallery_enrol(a) -> int:
    from ..faces.registry import make_backend
    from ..scale import enrol
    from ..scale.gallery import cost_note, deployment_defaults

    if a.insecure_test_params:
        print("privface: WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only",
              file=sys.stderr)
    source = _source(a, lambda: make_backend(**backend_spec(a)))
    centring, lift = a.centring, a.lift
    if a.scheme != "cryptomask":  # idface: centred and, for d = 128, lifted (accuracy: docs)
        centring, lift = deployment_defaults(a.scheme, source.dim, centring, lift)
    report = enrol(a.gallery, source, a.scheme, key_store_url=a.key_store, beta=a.beta, tau=a.tau,
                   insecure_test_params=a.insecure_test_params, progress=not a.json, name=a.name,
                   centring=centring or "none", backend=backend_spec(a)["name"],
                   lift=lift or None)
    note = cost_note(report) if hasattr(report, "lift") else None
    if note:
        print(f"privface: {note}", file=sys.stderr)
    report.photos = getattr(source, "report", None)
    out = report.to_dict()
    photos = out.pop("photos")
    if a.json and photos is not None:
        out["photos"] = photos
    print_result(out, a.json)
    if not a.json and photos:
        _print_photos(photos)
    return 0


def _source(a, backend_factory):
    """The enrolment's templates: ``.npy`` rows or one photo per identity (``open_source``), or several photos per
    identity fused into one template (``--fuse`` folders, ``--photo ID=PATH``)."""
    from ..scale.sources import FusedImageSource, identity_folders, open_source, photo_pairs

    if a.photo and (a.inputs or a.fuse):
        raise PrivfaceError("give --photo ID=PATH pairs or input folders, not both")
    if a.photo:
        return FusedImageSource(photo_pairs(a.photo), backend_factory())
    if not a.inputs:
        raise PrivfaceError("give inputs (.npy files, images, folders) or --photo ID=PATH")
    if a.fuse:
        return FusedImageSource(identity_folders(a.inputs), backend_factory())
    return open_source(a.inputs, backend_factory)


def _print_photos(photos: dict) -> None:
    """Per identity: photos used, and each refused one with the reason."""
    width = max(len(i) for i in photos)
    for ident, r in photos.items():
        print(f"{ident:<{width}}  {r['used']} used" + (f", {len(r['refused'])} refused" if r["refused"] else ""))
        for f in r["refused"]:
            print(f"{'':<{width}}    refused {f['photo']}: {f['reason']}")


def cmd_gallery_info(a) -> int:
    from ..scale.lifecycle import info

    print_result(info(a.gallery, a.name, a.key_store), a.json)
    return 0


def cmd_gallery_list(a) -> int:
    import json

    from ..scale.lifecycle import list_ids

    ids = list_ids(a.gallery, a.name)
    print(json.dumps(ids) if a.json else "\n".join(ids))
    return 0


def _refresh_key(a):
    """S_key's refresh for erasure (hers; cryptomask: the key generator's sk): the secret key from --key-store
    (default next to a sqlite:///g.db gallery), in this process; None with --withdraw-only or for a scheme that
    cannot erase."""
    from ..scale.gallery import Gallery, key_server
    from ..scale.layout import GalleryError, default_key_store, stored_scheme
    from ..scale.schemes import GALLERY_SCHEMES
    from ..store.sqlite import SQLiteStore

    scheme = stored_scheme(a.gallery, a.name)
    cryptomask = scheme in GALLERY_SCHEMES and GALLERY_SCHEMES[scheme].own_layout
    if a.withdraw_only or scheme not in GALLERY_SCHEMES or not (GALLERY_SCHEMES[scheme].erasable or cryptomask):
        return None
    try:
        url = a.key_store or default_key_store(a.gallery)
        if url.startswith("sqlite:") and not SQLiteStore.path_of(url).exists():  # never create an empty key store
            raise GalleryError(f"no key store at {url}")
        if cryptomask:  # the key generator's sk (protocols.cryptomask.erase)
            from ..scale.cryptomask_erase import erase_key

            return erase_key(a.gallery, a.name, url)
        return key_server(Gallery(a.gallery, a.name), url).secret
    except GalleryError as e:
        raise GalleryError(f"erasing needs S_key's secret key ({e}); give --key-store, or --withdraw-only to only "
                           "take the identities out of the answers") from None


def _not_erased(report: dict) -> None:
    if not report.get("erased", True):
        print("privface: withdrawn from the answers, NOT erased: the packed block ciphertexts still hold the old "
              "template(s); docs/operations.md, \"Changing a gallery\"", file=sys.stderr)


def cmd_gallery_remove(a) -> int:
    from ..scale.lifecycle import withdraw

    report = withdraw(a.gallery, a.ids, a.name, key=_refresh_key(a))
    _not_erased(report)
    print_result(report, a.json)
    return 0


def cmd_gallery_erase_withdrawn(a) -> int:
    from ..scale.lifecycle import erase_withdrawn

    print_result(erase_withdrawn(a.gallery, a.name, key=_refresh_key(a)), a.json)
    return 0


def cmd_gallery_add(a, replace: bool = False) -> int:
    from ..faces.registry import make_backend
    from ..scale.lifecycle import add, update

    source = _source(a, lambda: make_backend(**backend_spec(a)))
    report = (update(a.gallery, source, a.name, key=_refresh_key(a)) if replace
              else add(a.gallery, source, a.name, key_store_url=a.key_store, progress=not a.json))
    if replace:
        _not_erased(report)
    report["photos"] = getattr(source, "report", None)
    photos = report.pop("photos")
    if a.json and photos is not None:
        report["photos"] = photos
    print_result(report, a.json)
    if not a.json and photos:
        _print_photos(photos)
    return 0


def cmd_gallery_update(a) -> int:
    return cmd_gallery_add(a, replace=True)


def _input_args(p) -> None:
    p.add_argument("inputs", nargs="*", help=".npy embedding files (ids <stem>.<row>) or images / directories "
                                             "(ids: file stems); with --fuse, folders of photos, one per identity")
    p.add_argument("--fuse", action="store_true",
                   help="several photos per identity: each input folder is one identity (id = folder name; a folder "
                        "of folders: one identity per subfolder), its photos fused into one template (normalised "
                        "mean of the unit embeddings); photos without a usable face are refused and listed")
    p.add_argument("--photo", action="append", metavar="ID=PATH",
                   help="a photo of identity ID (repeat: several photos of one identity are fused as with --fuse)")


def _store_args(p, key_store: bool = False) -> None:
    p.add_argument("--gallery", required=True, help="store URL of S_local's encrypted blocks, e.g. sqlite:///g.db")
    if key_store:
        p.add_argument("--key-store", help="store URL of S_key's secret key (for τ; default for sqlite:///g.db: "
                                           "sqlite:///g.keys.db)")
    p.add_argument("--name", default="default", help="the gallery's name in the store")
    p.add_argument("--json", action="store_true")


def _erase_args(p) -> None:
    p.add_argument("--withdraw-only", action="store_true",
                   help="hers / idface: only take the old templates out of the answers, without S_key (NOT "
                        "erasure: the block ciphertexts keep them)")


def register(sub) -> None:
    """gallery enrol | info | list | remove."""
    s = sub.add_parser("gallery", help="encrypted 1:N galleries (hers, idface-ckks, idface-paillier; seed 003; "
                                       "cryptomask: seed 001)")
    gsub = s.add_subparsers(dest="gallery_cmd", required=True)
    g = gsub.add_parser("enrol", help="encrypt embeddings (.npy) or face images into a gallery, block by block; "
                                      "re-running resumes an interrupted enrolment")
    g.add_argument("--scheme", required=True, choices=list(GALLERY_SCHEMES))
    g.add_argument("--gallery", required=True, help="store URL for S_local's encrypted blocks, e.g. sqlite:///g.db")
    g.add_argument("--key-store", help="store URL for S_key's secret key (default for sqlite:///g.db: "
                                       "sqlite:///g.keys.db)")
    g.add_argument("--beta", type=int, help="idface: query parameter β (default 63 for d = 512, 15 for 128, "
                                            "α for a lift)")
    g.add_argument("--centring", choices=["none", "shipped"],
                   help="idface: subtract the --backend's shipped mean before T_α (recorded in the gallery, "
                        "applied to every probe; default shipped)")
    g.add_argument("--lift", type=int, metavar="D",
                   help="idface: lift templates into D dimensions (1024 or 2048, tight frame, seed recorded) "
                        "before T_α; 0 = off; default 2048 for d = 128, else off")
    g.add_argument("--tau", type=float, help="the key server's threshold (hers, cryptomask: a cosine; idface: an "
                                             "integer score), fixed for the gallery's life; default: τ(N) for FPIR "
                                             "0.003 at the gallery's size N, from the --backend's per-comparison "
                                             "scores on held-out LFW identities, recomputed by add / remove / "
                                             "update (docs: idface, τ follows the gallery)")
    g.add_argument("--insecure-test-params", action="store_true",
                   help="toy keys (CKKS N = 2048, Paillier 512-bit, cryptomask BFV N = 2048): tests only")
    g.add_argument("--name", default="default", help="the gallery's name in the store (several may share one)")
    _input_args(g)
    backend_args(g)
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_gallery_enrol)

    i = gsub.add_parser("info", help="a gallery's scheme, settings, size, τ and stored bytes (reads no ciphertext)")
    _store_args(i, key_store=True)
    i.set_defaults(func=cmd_gallery_info)
    ls = gsub.add_parser("list", help="the identities a gallery answers with, one a line (withdrawn ones left out)")
    _store_args(ls)
    ls.set_defaults(func=cmd_gallery_list)
    r = gsub.add_parser("remove", help="remove identities from a gallery (crash-safe): erases them from the "
                                       "ciphertexts with S_key's masked refresh (hers; idface: with a garbled "
                                       "circuit per digit; cryptomask: with the key generator) — needs --key-store; "
                                       "a served hers / idface gallery: POST gallery/remove to its local server, "
                                       "which erases with its key server")
    _store_args(r, key_store=True)
    _erase_args(r)
    r.add_argument("ids", nargs="+", help="gallery ids to withdraw (as `privface gallery list` prints them)")
    r.set_defaults(func=cmd_gallery_remove)
    ew = gsub.add_parser("erase-withdrawn", help="hers: erase the templates that were only withdrawn (--withdraw-only, "
                                                 "or a gallery changed before erasure): every block with an empty "
                                                 "slot not yet erased is rewritten by S_key's masked refresh (needs "
                                                 "--key-store); the answers do not change")
    _store_args(ew, key_store=True)
    ew.set_defaults(func=cmd_gallery_erase_withdrawn, withdraw_only=False)
    ad = gsub.add_parser("add", help="add identities to a gallery without its secret key (hers / idface: fills the "
                                     "last block's free positions homomorphically, then new blocks; cryptomask: a "
                                     "new batch); online and crash-safe (one meta write)")
    _store_args(ad, key_store=True)
    _input_args(ad)
    backend_args(ad)
    ad.set_defaults(func=cmd_gallery_add)
    up = gsub.add_parser("update", help="replace identities' templates, the old ones erased as by remove (hers / "
                                        "idface: one meta write; cryptomask: an erasure, then a new batch)")
    _store_args(up, key_store=True)
    _erase_args(up)
    _input_args(up)
    backend_args(up)
    up.set_defaults(func=cmd_gallery_update)
