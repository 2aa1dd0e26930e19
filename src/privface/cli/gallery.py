"""`privface gallery`: encrypted 1:N galleries (privface.scale)."""
from __future__ import annotations

import sys

from .common import (
    backend_args,
    backend_spec,
    print_result,
)

GALLERY_SCHEMES = ("idface-ckks", "hers", "idface-paillier")

GALLERY_SCHEMES += ("cryptomask",)  # seed 001: 1-bit answer (scale.cryptomask_gallery)


def cmd_gallery_enrol(a) -> int:
    from ..faces.registry import make_backend
    from ..scale import enrol, open_source

    if a.insecure_test_params:
        print("privface: WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only",
              file=sys.stderr)
    source = open_source(a.inputs, lambda: make_backend(**backend_spec(a)))
    centring, lift = a.centring, a.lift
    if a.scheme.startswith("idface"):  # the eval's defaults: centred and, for d = 128, lifted (accuracy: docs)
        from ..eval.identify_eval import DEFAULT_LIFT

        centring = centring or "shipped"
        lift = DEFAULT_LIFT.get(source.dim, 0) if lift is None else lift
    report = enrol(a.gallery, source, a.scheme, key_store_url=a.key_store, beta=a.beta, tau=a.tau,
                   insecure_test_params=a.insecure_test_params, progress=not a.json, name=a.name,
                   centring=centring or "none", backend=backend_spec(a).get("name", "dlib-resnet128"),
                   lift=lift or None)
    print_result(report.to_dict(), a.json)
    return 0


def register(sub) -> None:
    """gallery enrol."""
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
                                             "integer score); default: calibrated for the --backend and setting on "
                                             "held-out LFW identities for a gallery-wide FPIR, so stricter than the "
                                             "1:1 default of compare and the 1:1 protocols (dlib: cosine 0.9557 vs "
                                             "0.9272) (docs: idface, τ default thresholds)")
    g.add_argument("--insecure-test-params", action="store_true",
                   help="toy keys (CKKS N = 2048, Paillier 512-bit, cryptomask BFV N = 2048): tests only")
    g.add_argument("--name", default="default", help="the gallery's name in the store (several may share one)")
    g.add_argument("inputs", nargs="+", help=".npy embedding files (ids <stem>.<row>) or images / directories "
                                             "(ids: file stems)")
    backend_args(g)
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_gallery_enrol)
