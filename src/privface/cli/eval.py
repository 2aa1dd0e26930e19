"""`privface eval`: accuracy of the plaintext baseline or of a protocol on a dataset (privface.eval)."""
from __future__ import annotations

import argparse
import sys

from ..errors import PrivfaceError
from .common import (
    EVAL_BACKEND,
    SHARED,
    TAU_HELP,
    backend_args,
    backend_spec,
    check_choice,
    gsm_params,
    im2020_params,
    mode_args,
    per_backend,
    print_result,
)


def _im2020_params(a):
    params = im2020_params(a)
    if params.mode != "basic" and a.pairs is None and not a.yes:
        raise PrivfaceError("--mode secure-comparison runs a garbled circuit per pair (hours for all ORL "
                            "pairs): pass --pairs N, or --pairs all (or --yes) to run them all")
    return params


def _gsm_params(a):
    if a.tau is not None:
        raise PrivfaceError("--tau applies to --protocol im2020 only (gsm: --cos-threshold)")
    return gsm_params(a)  # eval sets ℓ to the embedding dimension


def _kolberg_params(a):
    from ..protocols.kolberg import KolbergParams
    from ..protocols.kolberg.params import SCHEMES as KOLBERG_SCHEMES

    check_choice("--scheme", a.scheme, KOLBERG_SCHEMES)
    if a.tau is not None:
        raise PrivfaceError("--tau applies to --protocol im2020 only (kolberg uses the --backend's default threshold)")
    return KolbergParams(a.scheme or "ckks", backend=a.backend)


def _plain_params(a):
    if a.pairs is not None or a.tau is not None:
        raise PrivfaceError("--pairs applies to --protocol im2020, gsm or kolberg, --tau to im2020 only")
    return None


DEFAULT_PAIRS = {"im2020": 2000, "gsm": 2000, "kolberg": 2000}
"""Pairs run by default through a protocol: a seeded sample, half genuine. All 79 800 ORL pairs take about 5.5 h for
im2020 and 21 h for gsm Π1 on this shared 2-core machine, and kolberg CKKS 7 min quiet but about 3 h at load 20
(docs/cli.md). ``--pairs all`` runs every pair."""


def _pairs_arg(text: str) -> int | str:
    if text == "all":
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number of pairs ≥ 1 or 'all', got {text!r}")
    return n


def _pairs(a) -> int | None:
    """The pairs to sample (None: every pair): --pairs N, --pairs all (or --yes), else the protocol's default."""
    if a.pairs == "all" or (a.yes and a.pairs is None):
        return None
    return a.pairs if a.pairs is not None else DEFAULT_PAIRS.get(a.protocol)


#: 1:1 verification over every pair of the dataset: the protocol's parameters from the options.
PAIR_PARAMS = {"plain": _plain_params, "im2020": _im2020_params, "gsm": _gsm_params, "kolberg": _kolberg_params}


def _eval_pairs(a) -> int:
    """`eval --protocol plain|im2020|gsm|kolberg`: verification accuracy over the dataset's pairs (eval.run)."""
    from ..eval.datasets import load
    from ..eval.run import evaluate

    if a.beta is not None or a.centring is not None or a.probes is not None or a.lift is not None:
        raise PrivfaceError("--beta, --centring, --lift and --probes apply to --protocol idface or hers only")
    params = PAIR_PARAMS[a.protocol](a)  # before loading the dataset: a bad option is a usage error
    if a.protocol != "kolberg" and a.scheme:
        raise PrivfaceError("--scheme applies to --protocol kolberg or idface only")
    if a.scheme == "paillier":
        raise PrivfaceError("--scheme paillier applies to --protocol idface only")
    if a.protocol != "im2020" and (a.mode != "basic" or a.checkpoint):
        raise PrivfaceError("--mode and --checkpoint apply to --protocol im2020 only")
    if a.protocol != "gsm" and (a.variant or a.cos_threshold is not None or a.m is not None or a.device):
        raise PrivfaceError("--variant, --cos-threshold, --m and --device apply to --protocol gsm only")
    if a.device == "browser" and (a.variant or "pi1") == "pi1":
        raise PrivfaceError("--device browser runs --variant pi2 or pi3")
    ds = load(a.dataset, a.data_root)
    checkpoint = None if a.no_checkpoint else (a.checkpoint or "auto")
    out = evaluate(ds, backend_spec(a), protocol=a.protocol, cache=not a.no_cache, workers=a.workers,
                   progress=not a.json, report=a.report, pairs=_pairs(a), protocol_params=params,
                   checkpoint=checkpoint, variant=a.variant or "pi1", device=a.device or "python")
    print_result(out, a.json)
    return 0


def _eval_identification(a) -> int:
    """`eval --protocol idface|hers`: 1:N identification, encrypted vs plaintext (eval.identify_eval)."""
    from ..eval.datasets import load_identification
    from ..eval.identify_eval import evaluate_identification

    if a.pairs is not None or a.tau is not None or a.mode != "basic" or a.checkpoint or a.variant or a.report:
        raise PrivfaceError("--pairs, --tau, --mode, --checkpoint, --variant and --report do not apply to "
                            "--protocol idface or hers")
    if a.protocol == "hers" and (a.beta is not None or a.centring is not None or a.lift is not None):
        raise PrivfaceError("--beta, --centring and --lift apply to --protocol idface only")
    scheme = a.scheme or "ckks"
    if scheme not in ("ckks", "paillier") or (a.protocol == "hers" and scheme != "ckks"):
        raise PrivfaceError("--scheme: idface runs over ckks or paillier, hers over ckks")
    if a.insecure_test_params:
        print("privface: WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only",
              file=sys.stderr)
    ds = load_identification(a.dataset, a.data_root)
    out = evaluate_identification(ds, backend_spec(a), protocol=a.protocol, scheme=scheme, beta=a.beta,
                                  centring=a.centring or "shipped", lift=a.lift, cache=not a.no_cache,
                                  workers=a.workers,
                                  probes=a.probes, progress=not a.json,
                                  insecure_test_params=a.insecure_test_params)
    print_result(out, a.json)
    return 0


def _eval_cryptomask(a) -> int:
    """`eval --protocol cryptomask`: the verifier's 1-bit answer vs plaintext (eval.cryptomask_eval)."""
    from ..eval.cryptomask_eval import evaluate_cryptomask
    from ..eval.datasets import load_identification

    if (a.pairs is not None or a.tau is not None or a.mode != "basic" or a.checkpoint or a.variant or a.report
            or a.scheme or a.beta is not None or a.centring is not None or a.lift is not None or a.m is not None):
        raise PrivfaceError("--protocol cryptomask takes --probes and --cos-threshold (τ) only")
    if a.cos_threshold is not None and not -1.0 < a.cos_threshold < 1.0:
        raise PrivfaceError("--cos-threshold must be a cosine in (−1, 1)")
    if a.insecure_test_params:
        print("privface: WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only",
              file=sys.stderr)
    ds = load_identification(a.dataset, a.data_root)
    out = evaluate_cryptomask(ds, backend_spec(a), tau=a.cos_threshold, cache=not a.no_cache, workers=a.workers,
                              probes=a.probes, progress=not a.json, insecure_test_params=a.insecure_test_params)
    print_result(out, a.json)
    return 0


def _eval_gallery_photos(a) -> int:
    """`eval --gallery-photos K --protocol hers|idface|cryptomask`: K photos fused per identity, at τ(N)
    (eval.gallery_photos)."""
    from ..eval.gallery_photos import evaluate

    if (a.pairs is not None or a.tau is not None or a.mode != "basic" or a.checkpoint or a.variant or a.report
            or a.beta is not None or a.centring is not None or a.lift is not None or a.cos_threshold is not None):
        raise PrivfaceError("--gallery-photos takes --protocol hers|idface|cryptomask, --scheme (idface), "
                            "--probes (the encrypted sample) and --nonmated; τ is the gallery default τ(N)")
    if a.protocol not in ("hers", "idface", "cryptomask"):
        raise PrivfaceError("--gallery-photos goes with --protocol hers, idface or cryptomask")
    scheme = a.scheme or "ckks"
    if (a.protocol == "idface" and scheme not in ("ckks", "paillier")) or (a.protocol != "idface" and a.scheme):
        raise PrivfaceError("--scheme: idface runs over ckks or paillier; hers and cryptomask take none")
    if a.insecure_test_params:
        print("privface: WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only",
              file=sys.stderr)
    out = evaluate(a.dataset, backend_spec(a), protocol=a.protocol, scheme=scheme, photos=a.gallery_photos,
                   nonmated=a.nonmated or 3000, encrypted_probes=a.probes, data_root=a.data_root, cache=not a.no_cache,
                   workers=a.workers, progress=not a.json, insecure_test_params=a.insecure_test_params)
    print_result(out, a.json)
    return 0


#: eval --protocol: how each protocol is evaluated.
EVALS = {**dict.fromkeys(PAIR_PARAMS, _eval_pairs), "idface": _eval_identification, "hers": _eval_identification,
         "cryptomask": _eval_cryptomask}


def cmd_eval(a) -> int:
    if a.gallery_photos is not None:
        return _eval_gallery_photos(a)
    if a.nonmated is not None:
        raise PrivfaceError("--nonmated goes with --gallery-photos")
    return EVALS[a.protocol](a)


def register(sub) -> None:
    """eval."""
    s = sub.add_parser("eval", help="verification accuracy on a dataset")
    s.add_argument("--dataset", required=True, help="orl, lfw, or a folder with one sub-folder per identity")
    s.add_argument("--protocol", default="plain",
                   choices=list(EVALS),
                   help="plain: quantized templates in the clear; im2020, gsm, kolberg: every pair through the "
                        "encrypted protocol; idface, hers, cryptomask: 1:N identification (one image per identity "
                        "enrolled, the rest probed) encrypted vs plaintext (cryptomask: the verifier's 1 bit)")
    s.add_argument("--scheme", choices=["ckks", "bfv", "ntru", "paillier"],
                   help="kolberg: the HE scheme (default ckks); idface: ckks (default) or paillier")
    s.add_argument("--beta", type=int, help="idface: query parameter β (d = 128: 15, 31 or 85; default 85; "
                   "lifted to D = 2048: 1365, 1023 or 682, default 1365)")
    s.add_argument("--centring", choices=["shipped", "gallery", "none"],
                   help="idface: mean subtracted before T_α/T_β — the backend's shipped mean (default, from ORL), "
                        "the enrolled gallery's mean, or none")
    s.add_argument("--lift", type=int, metavar="D",
                   help="idface: lift the centred template into D dimensions (tight frame, seed fixed) before "
                        "T_α/T_β; default 2048 for d = 128, 0 = off")
    s.add_argument("--probes", type=int,
                   help="idface, hers, cryptomask: a seeded sample of at most N mated and N non-mated probes")
    s.add_argument("--gallery-photos", type=int, metavar="K",
                   help="hers, idface, cryptomask on orl or lfw: enrol K photos per identity (fused), probe the "
                        "others, LFW non-mated probes; figures at the gallery's default τ(N) (docs: τ follows the "
                        "gallery)")
    s.add_argument("--nonmated", type=int, help="--gallery-photos --dataset orl: LFW non-mated probes (default 3000)")
    s.add_argument("--variant", choices=["pi1", "pi2", "pi3"],
                   help="gsm: Π1 (§5), Π2 (§6) or Π3 (§7) (default pi1)")
    s.add_argument("--m", type=int, help="gsm: template bits m (default 16)")
    s.add_argument("--device", choices=["python", "browser"],
                   help="gsm: the device side in Python (default) or in the browser's TypeScript Device (web/src/gsm, "
                        "run by Node; needs the built web/), each pair checked against the Python Device")
    s.add_argument("--cos-threshold", type=float, help="gsm: cosine threshold T′ (default: "
                                                       f"{per_backend(lambda p: f'{p.cosine:g}')}: {SHARED}, "
                                                       "as a cosine); cryptomask: τ (default: the --backend's gallery "
                                                       "default, scale/default_tau.json, set on held-out LFW)")
    s.add_argument("--pairs", type=_pairs_arg, metavar="N|all",
                   help="im2020, gsm, kolberg: run a seeded sample of N pairs (half genuine), or all of them "
                        "(default: a sample of 2000; JSON pairs_sampled, pairs_run)")
    s.add_argument("--tau", type=int, help=TAU_HELP)
    s.add_argument("--security-bits", type=int, default=112, choices=[112, 128], help="im2020: security level")
    s.add_argument("--insecure-test-params", action="store_true",
                   help="im2020, idface, hers: toy key sizes, for a quick smoke test only (insecure)")
    s.add_argument("--data-root", help="datasets root (default: $PRIVFACE_DATA)")
    s.add_argument("--report", metavar="DIR", help="write ROC/DET/histogram PNGs and summary.md here")
    s.add_argument("--workers", type=int, help="embedding and im2020 protocol processes (default: one per core)")
    s.add_argument("--no-cache", action="store_true",
                   help="do not read or write the embedding cache (nor the default im2020 checkpoint)")
    mode_args(s)
    s.add_argument("--checkpoint", metavar="FILE",
                   help="im2020: resume from and append finished pairs to FILE (default: a file under the cache "
                        "directory named by dataset, backend, level, τ, mode and --pairs)")
    s.add_argument("--no-checkpoint", action="store_true", help="im2020: neither resume nor record progress")
    s.add_argument("--yes", action="store_true", help="im2020 secure-comparison: run every pair without --pairs")
    backend_args(s, default=EVAL_BACKEND)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_eval)
