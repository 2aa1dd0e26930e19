"""`privface bench`: one function per benchmark, dispatched through BENCHES (privface.bench)."""
from __future__ import annotations

import json
import os

from ..errors import PrivfaceError
from .common import (
    TAU_HELP,
    backend_args,
    backend_spec,
    check_choice,
    human,
    human_row,
    im2020_params,
    mode_args,
    print_result,
)


def _people(rows):
    """A bench's row (or rows) with its numbers as people read them (``human``) for its ``format_table``."""
    return human_row(rows) if isinstance(rows, dict) else [human_row(r) for r in rows]


def _faces(a) -> int:
    from ..bench.faces import bench_faces

    dataset = a.dataset or ("orl" if (a.data_root or os.environ.get("PRIVFACE_DATA")) else "demo")
    out = bench_faces(backend_spec(a), dataset=dataset, images=a.images, data_root=a.data_root,
                      repeat=a.repeat or 3)
    print_result(out, a.json)
    return 0


def _im2020(a) -> int:
    from ..bench import im2020 as bench_im2020

    levels = (a.security_bits,) if a.security_bits else (112, 128)
    rows = bench_im2020.bench_im2020(levels, repeat=a.repeat or 10, workers=a.workers, face=not a.no_face,
                                     insecure_test_params=a.insecure_test_params, transport=a.transport,
                                     mode=a.mode, compare_bits=64 if a.compare_bits == "64" else None,
                                     pool=not a.no_pool)
    print(json.dumps(rows) if a.json else bench_im2020.format_table(_people(rows)))
    return 0


def _im2020_attacks(a) -> int:
    from ..eval.im2020_attacks import run_all

    if a.mode != "basic":
        raise PrivfaceError("im2020-attacks runs the basic mode's App. E experiments; "
                            "--mode applies to bench im2020")
    if a.hbcs_pairs is not None and a.hbcs_pairs < 1:
        raise PrivfaceError("--hbcs-pairs must be at least 1")
    out = run_all(im2020_params(a), trials=a.trials, he_trials=a.he_trials, hbcs_pairs=a.hbcs_pairs)
    if a.json:
        print(json.dumps(out))
    else:
        for row in out.pop("experiments"):
            print("  ".join(f"{k}={human(k, v)}" for k, v in row.items()))
        print("hbcs  " + "  ".join(f"{k}={human(k, v)}" for k, v in out.pop("hbcs").items()))
        print_result(out, False)
    return 0


def _gsm(a) -> int:
    from ..bench import gsm as bench_gsm

    if (a.ell is None) != (a.m is None):
        raise PrivfaceError("give both --ell and --m (one row) or neither (the Fig. 7/8 grid)")
    grid = [(a.ell, a.m)] if a.ell is not None else bench_gsm.GRID
    try:
        rows = bench_gsm.bench_gsm(grid, paillier_bits=a.paillier_bits, repeat=a.repeat or 5,
                                   insecure_test_params=a.insecure_test_params, pi3=not a.no_pi3)
    except ValueError as e:
        raise PrivfaceError(str(e)) from None
    if a.ell is not None:
        print(json.dumps(rows[0]) if a.json else bench_gsm.format_table(_people(rows)))
    else:
        print(json.dumps(rows) if a.json else bench_gsm.format_table(_people(rows)))
    return 0


def _crypto(a) -> int:
    from ..bench import crypto as bench_crypto

    rows = bench_crypto.bench_crypto(repeat=a.repeat or 15, workers=a.workers,
                                     insecure_test_params=a.insecure_test_params)
    print(json.dumps(rows) if a.json else bench_crypto.format_table(rows))
    return 0


def _lattice(a) -> int:
    from ..bench import lattice as bench_lattice

    rows = bench_lattice.bench_lattice(repeat=a.repeat or 15)
    print(json.dumps(rows) if a.json else bench_lattice.format_table(_people(rows)))
    return 0


def _kolberg(a) -> int:
    from ..bench import kolberg as bench_kolberg

    check_choice("--scheme", a.scheme, bench_kolberg.SCHEMES)
    rows = bench_kolberg.bench_kolberg(dims=(a.dim,) if a.dim else bench_kolberg.DIMS,
                                       schemes=(a.scheme,) if a.scheme else bench_kolberg.SCHEMES,
                                       repeat=a.repeat or 20)
    print(json.dumps(rows) if a.json else bench_kolberg.format_table(_people(rows)))
    return 0


def _kolberg_unlinkability(a) -> int:
    from ..bench import kolberg_unlinkability

    check_choice("--scheme", a.scheme, kolberg_unlinkability.SCHEMES)
    rows = kolberg_unlinkability.linkage_auc_rows(
        schemes=(a.scheme,) if a.scheme else kolberg_unlinkability.SCHEMES, dim=a.dim or 128,
        subjects=a.subjects)
    print(json.dumps(rows) if a.json else kolberg_unlinkability.format_table(rows))
    return 0


def _gsm_enrol(a) -> int:
    from ..bench import gsm_zk as bench_gsm_zk

    out = bench_gsm_zk.bench_gsm_enrol(a.ell or 256, a.m or 16, 512 if a.insecure_test_params else 3072,
                                       repeat=a.repeat or 3, insecure_test_params=a.insecure_test_params,
                                       workers=a.workers)
    print(json.dumps(out) if a.json else bench_gsm_zk.format_table(_people(out)))
    return 0


def _load(a) -> int:
    from ..bench import load as bench_load

    check_choice("--protocol", a.protocol, ("im2020",))
    for flag, value in (("--concurrency", a.concurrency), ("--seconds", a.seconds), ("--identities", a.identities)):
        if value is not None and not value > 0:
            raise PrivfaceError(f"{flag} must be positive, got {value}")
    row = bench_load.bench_load(a.protocol or "im2020", concurrency=a.concurrency, seconds=a.seconds,
                                identities=a.identities, security_bits=a.security_bits or 112,
                                insecure_test_params=a.insecure_test_params)
    print(json.dumps(row) if a.json else bench_load.format_table(_people(row)))
    return 0


def _identify(a) -> int:
    from ..bench import identify as bench_identify

    schemes = bench_identify.parse_schemes(a.scheme or "idface-ckks")
    if a.ray or a.shards:  # issue 38: resident Ray shards beside the in-process local server
        from ..bench import sharded

        if schemes != ["hers"] or not (a.ray and a.shards):
            raise PrivfaceError("--ray and --shards go together, with --scheme hers")
        rows = sharded.bench_sharded(a.n, a.dim or 512, sharded.parse_shards(a.shards),
                                     address="auto" if a.ray == "local" else a.ray, repeat=a.repeat or 5,
                                     insecure_test_params=a.insecure_test_params, runs=a.runs or 1)
        print(json.dumps(rows) if a.json else bench_identify.format_table(rows))
        return 0
    if a.variant != "w" and "cryptomask" not in schemes:
        raise PrivfaceError("--variant wo goes with --scheme cryptomask")
    if a.ot is not None and "cryptomask" not in schemes:
        raise PrivfaceError("--ot goes with --scheme cryptomask")
    options = dict(beta=a.beta, repeat=a.repeat or 5, insecure_test_params=a.insecure_test_params,
                   seal_adds=a.seal_adds, threads=a.threads, variant=a.variant, ot=a.ot or "ferret")
    if len(schemes) == 1:  # one object, in this process
        out = bench_identify.bench_identify(schemes[0], a.n, a.dim or 512, **options)
    else:  # a list, one child process per scheme
        out = bench_identify.bench_schemes(schemes, a.n, a.dim or 512, **options)
    print(json.dumps(out) if a.json else bench_identify.format_table(_people(out)))
    return 0


def _cluster(a) -> int:
    from ..bench import cluster as bench_cluster

    store = a.store or os.environ.get("PRIVFACE_TEST_PG_URL")
    if not store:
        raise PrivfaceError("bench cluster needs --store URL (PostgreSQL: every node reads it; "
                            "default $PRIVFACE_TEST_PG_URL, as .ci/with-postgres sets)")
    try:
        shards = int(a.shards or 2)
    except ValueError:
        raise PrivfaceError("bench cluster: --shards takes one shard count") from None
    if a.spread:
        if (a.scheme or "hers") != "hers":
            raise PrivfaceError("bench cluster --spread runs --scheme hers")
        row = bench_cluster.bench_spread(a.n, store=store, dim=a.dim or 128, nodes=a.nodes, shards=shards,
                                         probes=a.probes, insecure_test_params=a.insecure_test_params, progress=True)
    else:
        row = bench_cluster.bench_cluster(a.scheme or "hers", a.n, store=store, dim=a.dim or 128, nodes=a.nodes,
                                          shards=shards, probes=a.probes, duration=a.duration, kill_at=a.kill_at,
                                          insecure_test_params=a.insecure_test_params, progress=True)
    print(json.dumps(row) if a.json else bench_cluster.format_table(row))
    return 0


def _web(a) -> int:
    from ..bench import web as bench_web

    if a.protocol == "gsm":
        from ..bench.gsm_web import bench_gsm_web

        out = bench_gsm_web(runs=a.repeat or 10, ell=a.ell or 256, m=a.m or 16,
                            insecure_test_params=bool(getattr(a, "insecure_test_params", False)))
        print_result(out, a.json)
        return 0
    if a.parity:
        out = bench_web.bench_parity(a.dataset or "orl", data_root=a.data_root, images=None,
                                     backend=_web_backend(a), landmarks=_web_landmarks(a))
    else:
        out = bench_web.bench_web(runs=a.repeat or 10, security_bits=a.security_bits or 112, arith=a.arith,
                                  workers=a.workers, face_threads=a.face_threads, backend=_web_backend(a),
                                  landmarks=_web_landmarks(a))
    print_result(out, a.json)
    return 0


def _web_backend(a) -> str:
    """web: the server's --backend, whose model the page runs (the page runs dlib-resnet128 and sface only)."""
    if a.backend not in ("dlib-resnet128", "sface"):
        raise PrivfaceError(f"bench web: the page runs dlib-resnet128 or sface, not {a.backend}")
    return str(a.backend)


def _web_landmarks(a) -> int | None:
    """web: the server's --landmarks (sface's alignment), which the page and the Python side both use; default for
    sface the alignment the page runs (faces.browser.PAGE_LANDMARKS)."""
    if a.backend != "sface":
        if a.landmarks is not None:
            raise PrivfaceError("bench web: --landmarks applies to --backend sface only")
        return None
    if a.landmarks is None:
        from ..faces.browser import PAGE_LANDMARKS

        return PAGE_LANDMARKS
    return int(a.landmarks)


def _gallery(a) -> int:
    from ..bench.gallery import bench_gallery

    out = bench_gallery(a.scheme or "hers", a.n, a.dim or 128, repeat=a.repeat or 3,
                        insecure_test_params=a.insecure_test_params, progress=not a.json, keep=a.keep)
    print_result(out, a.json)
    return 0


# `privface bench WHAT`, in the order of the help text; a new benchmark is one function and one row here
BENCHES = {
    "faces": _faces,
    "crypto": _crypto,
    "im2020": _im2020,
    "im2020-attacks": _im2020_attacks,
    "gsm": _gsm,
    "gsm-enrol": _gsm_enrol,
    "lattice": _lattice,
    "kolberg": _kolberg,
    "kolberg-unlinkability": _kolberg_unlinkability,
    "identify": _identify,
    "gallery": _gallery,
    "load": _load,
    "cluster": _cluster,
    "web": _web,
}


def cmd_bench(a) -> int:
    run = BENCHES.get(a.what)
    if run is None:
        raise PrivfaceError(f"unknown benchmark {a.what!r}")
    return run(a)


def register(sub) -> None:
    """bench."""
    s = sub.add_parser("bench", help="benchmarks (medians)")
    s.add_argument("what", choices=list(BENCHES))
    s.add_argument("--scheme", help="kolberg*: ckks|bfv|ntru (default: all three); identify: "
                   "plain|hers|idface-ckks|idface-paillier (seed 003) or cryptomask (seed 001) (default idface-ckks), "
                   "or a comma list run back to back on the same gallery (a JSON list, one child process each)")
    s.add_argument("--dim", type=int, choices=range(1, 4095), metavar="D",
                   help="kolberg: one template dimension (default: 512 and 128); kolberg-unlinkability: (default 128); "
                   "identify: template dimension d (idface: 128, 512, or a lift dimension 1024 / 2048; default 512)")
    s.add_argument("--subjects", type=int, default=100,
                   help="kolberg-unlinkability: subjects, five protected templates each (default 100)")
    s.add_argument("--n", type=int, default=1 << 13, help="identify, gallery: gallery size N (synthetic unit vectors; "
                                                          "gallery: add, remove and update on a persisted gallery)")
    s.add_argument("--variant", choices=["w", "wo", "w,wo"], default="w",
                   help="identify --scheme cryptomask: w (Alg. 2 + Alg. 3, the verifier learns one bit; default), "
                        "wo (CryptoMask-WO, seed 001 Fig. 2: the verifier decrypts the distances, no Alg. 3), or "
                        "w,wo (one row each, on one enrolled gallery)")
    s.add_argument("--ot", choices=["ferret", "softspoken", "iknp"],
                   help="identify --scheme cryptomask: Alg. 3's OTs — ferret (silent correlated OT, refilled between "
                        "identifications; default), softspoken (SoftSpokenOT k = 4) or iknp (OT extension)")
    s.add_argument("--beta", type=int, help="identify: IDFace query parameter β (default 63 for d = 512, 15 for 128)")
    s.add_argument("--threads", type=int,
                   help="identify: threads for BLAS, the crypto core and the native core (default: one per core; "
                        "1: the papers' single-threaded setting)")
    s.add_argument("--ray", metavar="local|ADDRESS",
                   help="identify --scheme hers: also run the gallery as resident Ray shards (a local Ray, or the "
                        "cluster at ADDRESS) beside the in-process local server; needs --shards")
    s.add_argument("--shards", metavar="K,…", help="identify --ray: shard counts to run, e.g. 1,2")
    s.add_argument("--runs", type=int, metavar="R",
                   help="identify --ray: run each shard count R times, fresh shards each (default 1)")
    s.add_argument("--nodes", type=int, default=3, help="cluster: raylets of one CPU each (default 3)")
    s.add_argument("--probes", type=int, default=200, help="cluster: probes answered in process and sharded "
                   "(default 200)")
    s.add_argument("--duration", type=float, default=300.0,
                   help="cluster: seconds of identifications and enrolments (default 300)")
    s.add_argument("--kill-at", type=float, default=60.0,
                   help="cluster: seconds into the loop when a node holding a shard is killed (default 60)")
    s.add_argument("--spread", action="store_true",
                   help="cluster: no kill and no in-process reference — each node's resident bytes and the answers "
                   "against plaintext (a gallery larger than one process holds, e.g. 2^21 on 3 nodes)")
    s.add_argument("--store", metavar="URL", help="cluster: the gallery store (PostgreSQL; default "
                   "$PRIVFACE_TEST_PG_URL)")
    s.add_argument("--keep", metavar="DIR", help="gallery: enrol into DIR once and reuse that gallery on later runs "
                   "with the same --scheme/--n/--dim (enrol_s null, reused true); delete DIR when done")
    s.add_argument("--seal-adds", action="store_true",
                   help="identify, idface-ckks: also time IP_DB's additions with SEAL add_inplace")
    s.add_argument("--ell", type=int, help="gsm: template length ℓ (with --m: one row instead of the grid); "
                   "gsm-enrol, web --protocol gsm: ℓ (default 256)")
    s.add_argument("--m", type=int, help="gsm: bits per template element; gsm-enrol: m (default 16)")
    s.add_argument("--paillier-bits", type=int, default=3072,
                   help="gsm: Paillier modulus bits (default 3072 as seed 004 §9; 2048 is the 112-bit minimum)")
    s.add_argument("--no-pi3", action="store_true", help="gsm: skip Π3 (its garbled circuit)")
    s.add_argument("--protocol", help="load: the protocol served (im2020); web: gsm runs the gsm Device in the page")
    s.add_argument("--concurrency", type=int, default=50, help="load: clients authenticating at once (default 50)")
    s.add_argument("--seconds", type=float, default=60.0, help="load: how long (default 60)")
    s.add_argument("--identities", type=int, default=None,
                   help="load: subjects enrolled first (default: one per client — the server's lockout caps the "
                        "attempts of one subject in flight at --lockout-failures)")
    s.add_argument("--images", type=int, default=40, help="how many images to time")
    s.add_argument("--repeat", type=int, help="faces: timed passes per image (default 3); "
                   "crypto, lattice: timings per fast operation (default 15); kolberg: (default 20)")
    s.add_argument("--workers", type=int,
                   help="crypto: threads for parallel level-2 decryption; gsm-enrol: threads for the "
                   "independent exponentiations of each party (default: one per core)")
    s.add_argument("--insecure-test-params", action="store_true",
                   help="crypto, im2020*, gsm, gsm-enrol, load: toy key sizes, for a quick smoke test only (insecure)")
    s.add_argument("--security-bits", type=int, choices=[112, 128],
                   help="im2020: one level only (default: 112 and 128); im2020-attacks, load: level (default 112)")
    s.add_argument("--no-face", action="store_true", help="im2020: synthetic templates, no C1 face timing")
    s.add_argument("--no-pool", action="store_true",
                   help="im2020: no precomputed encryption randomness (C2 does all its exponentiations on-line)")
    s.add_argument("--transport", default="http", choices=["in-process", "http"],
                   help="im2020: over loopback HTTP to a `privface serve` child process (default, as the issue's "
                        "Table I), or parties in one process")
    s.add_argument("--trials", type=int, default=1_000_000,
                   help="im2020-attacks: trials of the cheap experiments (forged s*, MC1, plaintext c)")
    s.add_argument("--he-trials", type=int, default=20,
                   help="im2020-attacks: trials of the experiments that run BlindESED and decryption")
    s.add_argument("--tau", type=int, help=TAU_HELP.replace("im2020:", "im2020-attacks:"))
    s.add_argument("--hbcs-pairs", type=int, help="im2020-attacks: (r0, r1) pairs of the HBCS transcript "
                   "enumeration (default: all 128)")
    s.add_argument("--arith", default="bigint", choices=["bigint", "gmp-wasm"],
                   help="web: the page's big-integer arithmetic (default native bigint, the faster measured)")
    s.add_argument("--face-threads", type=int, help="web: onnxruntime-web threads of the page's C1 (default 1)")
    s.add_argument("--parity", action="store_true",
                   help="web: embed every image of --dataset in the browser and in Python and compare")
    mode_args(s)
    s.add_argument("--dataset", help="orl, lfw, a folder, or demo (default: orl when a data root is set, else demo)")
    s.add_argument("--data-root", help="datasets root (default: $PRIVFACE_DATA)")
    backend_args(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_bench)
