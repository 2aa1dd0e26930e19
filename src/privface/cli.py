"""privface command line: thin — parses, calls the library, prints (tables for people, --json for scripts)."""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from .errors import PrivfaceError


def _backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="dlib-resnet128", choices=["dlib-resnet128", "pca", "onnx"],
                   help="face backend (default: dlib-resnet128)")
    p.add_argument("--model", help="model file for --backend pca or onnx")
    p.add_argument("--jitter", type=int, default=None, help="dlib-resnet128: jitter passes per face (slower, steadier)")
    p.add_argument("--flip", action="store_true", help="dlib-resnet128: average with the mirrored face")


def _spec(a) -> dict:
    spec = {"name": a.backend}
    if a.model:
        spec["model"] = a.model
    if a.backend == "dlib-resnet128":
        if a.jitter is not None:
            spec["jitter"] = a.jitter
        if a.flip:
            spec["flip"] = True
    elif a.jitter is not None or a.flip:
        raise PrivfaceError("--jitter and --flip apply to --backend dlib-resnet128 only")
    return spec


def _print(obj: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj, default=_jsonable))
        return
    width = max(len(k) for k in obj)
    for k, v in obj.items():
        if isinstance(v, float):
            v = f"{v:.6g}"
        elif isinstance(v, dict):
            v = "  ".join(f"{kk}: {vv:.4g}" if isinstance(vv, float) else f"{kk}: {vv}" for kk, vv in v.items())
        elif isinstance(v, list) and len(v) > 8:
            v = f"[{len(v)} values]"
        print(f"{k:<{width}}  {v}")


def _jsonable(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def cmd_embed(a) -> int:
    from .faces.registry import make_backend

    backend = make_backend(**_spec(a))
    faces = backend.faces(a.image, "all" if a.all else "largest")
    if not faces:
        raise PrivfaceError(f"no face found in {a.image}")
    rows = [{"box": list(f.box), "detector": f.detector, "landmarks": f.landmarks.round(1).tolist(),
             "embedding": [round(float(x), 6) for x in f.embedding]} for f in faces]
    out = {"image": a.image, "backend": backend.name, "dim": len(faces[0].embedding), "faces": rows}
    if a.json:
        print(json.dumps(out))
    else:
        for k, f in enumerate(rows):
            e = f["embedding"]
            print(f"face {k}: box={f['box']} detector={f['detector']} embedding[{len(e)}]="
                  f"[{', '.join(f'{x:.4f}' for x in e[:4])}, …]")
    return 0


def cmd_compare(a) -> int:
    import time

    from .faces.registry import make_backend

    backend = make_backend(**_spec(a))
    t0 = time.perf_counter()
    ea, eb = backend.embed(a.image_a), backend.embed(a.image_b)
    dist = float(backend.distance(ea, eb))
    thr = a.threshold if a.threshold is not None else backend.threshold
    out = {"backend": backend.name, "distance": round(dist, 6), "threshold": thr,
           "match": dist <= thr, "seconds": round(time.perf_counter() - t0, 3)}
    _print(out, a.json)
    return 0


def cmd_eval(a) -> int:
    from .eval.datasets import load
    from .eval.run import evaluate

    if a.protocol in ("idface", "hers"):
        return _eval_identification(a)
    if a.protocol == "cryptomask":
        return _eval_cryptomask(a)
    if a.beta is not None or a.centring is not None or a.probes is not None or a.lift is not None:
        raise PrivfaceError("--beta, --centring, --lift and --probes apply to --protocol idface or hers only")
    if a.protocol == "kolberg":  # before loading the dataset: a bad --scheme is a usage error, not a traceback
        from .protocols.kolberg.params import SCHEMES as KOLBERG_SCHEMES

        _check_choice("--scheme", a.scheme, KOLBERG_SCHEMES)
    ds = load(a.dataset, a.data_root)
    params = None
    if a.protocol == "im2020":
        params = _im2020_params(a)
        if params.mode != "basic" and a.pairs is None and not a.yes:
            raise PrivfaceError("--mode secure-comparison runs a garbled circuit per pair (hours for all ORL "
                                "pairs): pass --pairs N, or --yes to run them all")
    elif a.protocol == "gsm":
        if a.tau is not None:
            raise PrivfaceError("--tau applies to --protocol im2020 only (gsm: --cos-threshold)")
        params = _gsm_params(a)  # eval sets ℓ to the embedding dimension
    elif a.protocol == "kolberg":
        if a.tau is not None:
            raise PrivfaceError("--tau applies to --protocol im2020 only (kolberg uses the plaintext EER threshold)")
        from .protocols.kolberg import KolbergParams

        params = KolbergParams(a.scheme or "ckks")
    elif a.pairs is not None or a.tau is not None:
        raise PrivfaceError("--pairs applies to --protocol im2020, gsm or kolberg, --tau to im2020 only")
    if a.protocol != "kolberg" and a.scheme:
        raise PrivfaceError("--scheme applies to --protocol kolberg or idface only")
    if a.scheme == "paillier":
        raise PrivfaceError("--scheme paillier applies to --protocol idface only")
    if a.protocol != "im2020" and (a.mode != "basic" or a.checkpoint):
        raise PrivfaceError("--mode and --checkpoint apply to --protocol im2020 only")
    if a.protocol != "gsm" and (a.variant or a.cos_threshold is not None or a.m is not None):
        raise PrivfaceError("--variant, --cos-threshold and --m apply to --protocol gsm only")
    checkpoint = None if a.no_checkpoint else (a.checkpoint or "auto")
    out = evaluate(ds, _spec(a), protocol=a.protocol, cache=not a.no_cache, workers=a.workers,
                   progress=not a.json, report=a.report, pairs=a.pairs, protocol_params=params,
                   checkpoint=checkpoint, variant=a.variant or "pi1")
    _print(out, a.json)
    return 0


def _eval_identification(a) -> int:
    """`eval --protocol idface|hers`: 1:N identification, encrypted vs plaintext (eval.identify_eval)."""
    from .eval.datasets import load_identification
    from .eval.identify_eval import evaluate_identification

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
    out = evaluate_identification(ds, _spec(a), protocol=a.protocol, scheme=scheme, beta=a.beta,
                                  centring=a.centring or "shipped", lift=a.lift, cache=not a.no_cache,
                                  workers=a.workers,
                                  probes=a.probes, progress=not a.json,
                                  insecure_test_params=a.insecure_test_params)
    _print(out, a.json)
    return 0


def _eval_cryptomask(a) -> int:
    """`eval --protocol cryptomask`: the verifier's 1-bit answer vs plaintext (eval.cryptomask_eval)."""
    from .eval.cryptomask_eval import evaluate_cryptomask
    from .eval.datasets import load_identification

    if (a.pairs is not None or a.tau is not None or a.mode != "basic" or a.checkpoint or a.variant or a.report
            or a.scheme or a.beta is not None or a.centring is not None or a.lift is not None or a.m is not None):
        raise PrivfaceError("--protocol cryptomask takes --probes and --cos-threshold (τ) only")
    if a.cos_threshold is not None and not -1.0 < a.cos_threshold < 1.0:
        raise PrivfaceError("--cos-threshold must be a cosine in (−1, 1)")
    if a.insecure_test_params:
        print("privface: WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only",
              file=sys.stderr)
    ds = load_identification(a.dataset, a.data_root)
    out = evaluate_cryptomask(ds, _spec(a), tau=a.cos_threshold, cache=not a.no_cache, workers=a.workers,
                              probes=a.probes, progress=not a.json, insecure_test_params=a.insecure_test_params)
    _print(out, a.json)
    return 0


def _gsm_params(a, ell: int = 128):
    from .protocols.gsm import GsmParams

    kw = {"ell": ell}
    if getattr(a, "m", None) is not None:
        kw["m"] = a.m
    if getattr(a, "cos_threshold", None) is not None:
        kw["cos_threshold"] = a.cos_threshold
    try:
        if getattr(a, "insecure_test_params", False):
            return GsmParams.toy(**kw)
        return GsmParams(**kw)
    except ValueError as e:
        raise PrivfaceError(str(e)) from None


def _im2020_params(a):
    from .protocols.im2020 import DEFAULT_TAU, Im2020Params

    tau = DEFAULT_TAU if getattr(a, "tau", None) is None else a.tau
    kw = {"tau": tau, "mode": getattr(a, "mode", None) or "basic"}
    if getattr(a, "compare_bits", None) == "64":
        kw["compare_bits"] = 64
    try:
        if getattr(a, "insecure_test_params", False):
            return Im2020Params.toy(**kw)
        return Im2020Params.for_level(a.security_bits or 112, **kw)
    except ValueError as e:
        raise PrivfaceError(str(e)) from None


MODES = ("basic", "secure-comparison")


def _mode_args(s) -> None:
    s.add_argument("--mode", choices=MODES, default="basic",
                   help="im2020: basic (server learns the distance s) or secure-comparison (§VII Fig. 8 garbled "
                        "circuit: server learns only the decision)")
    s.add_argument("--compare-bits", choices=["k", "64"], default="k",
                   help="im2020 secure-comparison: circuit width, the full message space k (default; forgery "
                        "≤ τ/2^k) or 64 (~4× cheaper; forgery ≤ τ/2^64)")


def cmd_protocols(a) -> int:
    from .protocols import catalogue

    rows = catalogue()
    if a.json:
        print(json.dumps(rows))
        return 0
    for d in rows:
        print(f"{d['name']}: {d['paper']}")
        for who, what in d["threat_model"].items():
            print(f"  threat   {who}: {what}")
        for mode, m in d["modes"].items():
            leak = "; ".join(f"{who} learns {', '.join(x)}" for who, x in m["leakage"].items())
            print(f"  mode     {mode} [{m['status']}]: {leak}")
        for lvl in d["security_levels"]:
            print("  level    " + ", ".join(f"{k}={v}" for k, v in lvl.items()))
        for k, v in d["parameters"].items():
            print(f"  param    {k}: {v}")
    return 0


def _check_choice(flag: str, value, choices) -> None:
    if value is not None and value not in choices:
        raise PrivfaceError(f"{flag} must be one of {', '.join(choices)} here, got {value!r}")


def cmd_bench(a) -> int:
    if a.what == "im2020":
        from .bench import im2020 as bench_im2020

        levels = (a.security_bits,) if a.security_bits else (112, 128)
        rows = bench_im2020.bench_im2020(levels, repeat=a.repeat or 10, workers=a.workers, face=not a.no_face,
                                         insecure_test_params=a.insecure_test_params, transport=a.transport,
                                         mode=a.mode, compare_bits=64 if a.compare_bits == "64" else None,
                                         pool=not a.no_pool)
        print(json.dumps(rows) if a.json else bench_im2020.format_table(rows))
        return 0
    if a.what == "im2020-attacks":
        from .eval.im2020_attacks import run_all

        if a.mode != "basic":
            raise PrivfaceError("im2020-attacks runs the basic mode's App. E experiments; "
                                "--mode applies to bench im2020")
        if a.hbcs_pairs is not None and a.hbcs_pairs < 1:
            raise PrivfaceError("--hbcs-pairs must be at least 1")
        out = run_all(_im2020_params(a), trials=a.trials, he_trials=a.he_trials, hbcs_pairs=a.hbcs_pairs)
        if a.json:
            print(json.dumps(out))
        else:
            for row in out.pop("experiments"):
                print("  ".join(f"{k}={v}" for k, v in row.items()))
            print("hbcs  " + "  ".join(f"{k}={v}" for k, v in out.pop("hbcs").items()))
            _print(out, False)
        return 0
    if a.what == "gsm":
        from .bench import gsm as bench_gsm

        if (a.ell is None) != (a.m is None):
            raise PrivfaceError("give both --ell and --m (one row) or neither (the Fig. 7/8 grid)")
        grid = [(a.ell, a.m)] if a.ell is not None else bench_gsm.GRID
        try:
            rows = bench_gsm.bench_gsm(grid, paillier_bits=a.paillier_bits, repeat=a.repeat or 5,
                                       insecure_test_params=a.insecure_test_params, pi3=not a.no_pi3)
        except ValueError as e:
            raise PrivfaceError(str(e)) from None
        if a.ell is not None:
            print(json.dumps(rows[0]) if a.json else bench_gsm.format_table(rows))
        else:
            print(json.dumps(rows) if a.json else bench_gsm.format_table(rows))
        return 0
    if a.what == "crypto":
        from .bench import crypto as bench_crypto

        rows = bench_crypto.bench_crypto(repeat=a.repeat or 15, workers=a.workers,
                                         insecure_test_params=a.insecure_test_params)
        print(json.dumps(rows) if a.json else bench_crypto.format_table(rows))
        return 0
    if a.what == "lattice":
        from .bench import lattice as bench_lattice

        rows = bench_lattice.bench_lattice(repeat=a.repeat or 15)
        print(json.dumps(rows) if a.json else bench_lattice.format_table(rows))
        return 0
    if a.what == "kolberg":
        from .bench import kolberg as bench_kolberg

        _check_choice("--scheme", a.scheme, bench_kolberg.SCHEMES)
        rows = bench_kolberg.bench_kolberg(dims=(a.dim,) if a.dim else bench_kolberg.DIMS,
                                           schemes=(a.scheme,) if a.scheme else bench_kolberg.SCHEMES,
                                           repeat=a.repeat or 20)
        print(json.dumps(rows) if a.json else bench_kolberg.format_table(rows))
        return 0
    if a.what == "kolberg-unlinkability":
        from .bench import kolberg_unlinkability

        _check_choice("--scheme", a.scheme, kolberg_unlinkability.SCHEMES)
        rows = kolberg_unlinkability.linkage_auc_rows(
            schemes=(a.scheme,) if a.scheme else kolberg_unlinkability.SCHEMES, dim=a.dim or 128,
            subjects=a.subjects)
        print(json.dumps(rows) if a.json else kolberg_unlinkability.format_table(rows))
        return 0
    if a.what == "gsm-enrol":
        from .bench import gsm_zk as bench_gsm_zk

        out = bench_gsm_zk.bench_gsm_enrol(a.ell or 256, a.m or 16, 512 if a.insecure_test_params else 3072,
                                           repeat=a.repeat or 3, insecure_test_params=a.insecure_test_params,
                                           workers=a.workers)
        print(json.dumps(out) if a.json else bench_gsm_zk.format_table(out))
        return 0
    if a.what == "load":
        from .bench import load as bench_load

        _check_choice("--protocol", a.protocol, ("im2020",))
        for flag, value in (("--concurrency", a.concurrency), ("--seconds", a.seconds), ("--identities", a.identities)):
            if value is not None and not value > 0:
                raise PrivfaceError(f"{flag} must be positive, got {value}")
        row = bench_load.bench_load(a.protocol or "im2020", concurrency=a.concurrency, seconds=a.seconds,
                                    identities=a.identities, security_bits=a.security_bits or 112,
                                    insecure_test_params=a.insecure_test_params)
        print(json.dumps(row) if a.json else bench_load.format_table(row))
        return 0
    if a.what == "identify":
        from .bench import identify as bench_identify

        scheme = a.scheme or "idface-ckks"
        _check_choice("--scheme", scheme, bench_identify.SCHEMES)
        row = bench_identify.bench_identify(scheme, a.n, a.dim or 512, beta=a.beta, repeat=a.repeat or 5,
                                            insecure_test_params=a.insecure_test_params, seal_adds=a.seal_adds)
        print(json.dumps(row) if a.json else bench_identify.format_table(row))
        return 0
    from .bench import faces as bench

    if a.what == "faces":
        dataset = a.dataset or ("orl" if (a.data_root or os.environ.get("PRIVFACE_DATA")) else "demo")
        out = bench.bench_faces(_spec(a), dataset=dataset, images=a.images, data_root=a.data_root,
                                repeat=a.repeat or 3)
    else:
        raise PrivfaceError(f"unknown benchmark {a.what!r}")
    _print(out, a.json)
    return 0


def cmd_demo(a) -> int:
    from .demo import run_demo

    return run_demo(as_json=a.json)


def cmd_train_pca(a) -> int:
    from .eval.datasets import load
    from .faces.pca import PCABackend

    ds = load(a.dataset, a.data_root)
    backend = PCABackend.train(ds.paths, labels=ds.ids, k=a.k)
    backend.save(a.out)
    _print({"model": a.out, "k": a.k, "images": len(ds.paths)}, a.json)
    return 0


def _http_kw(a) -> dict:
    """ServiceClient options from --api-key (or $PRIVFACE_API_KEY), --ca, --client-cert, --client-key."""
    from .service.client import tls_context

    return {"api_key": a.api_key or os.environ.get("PRIVFACE_API_KEY") or None,
            "tls": tls_context(a.ca, a.client_cert, a.client_key)}


def _key_path(a):
    from pathlib import Path

    from .protocols.im2020.remote import default_key_path

    return Path(a.key).expanduser() if a.key else default_key_path(a.server, a.id)


def _face_template(a, params):
    """C1: detect, align, embed (default backend) and quantize ×scale; (Γ, ms)."""
    import time

    from .faces.registry import make_backend
    from .templates import quantize

    t0 = time.perf_counter()
    template = quantize(make_backend(**_spec(a)).embed(a.image), params.scale)
    return template, round((time.perf_counter() - t0) * 1000, 3)


def cmd_enroll(a) -> int:
    if getattr(a, "protocol", "im2020") == "kolberg":
        return cmd_kolberg_client(a)
    import time

    from .protocols.common import check_subject_id
    from .protocols.im2020 import Client, remote
    from .protocols.im2020.parties import PROTOCOL

    t0 = time.perf_counter()
    check_subject_id(PROTOCOL, a.id)
    params, path = _im2020_params(a), _key_path(a)
    if path.exists() and not a.force:
        raise remote.KeyFileError(f"key file {path} exists; pass --force to replace it")
    template, c1_ms = _face_template(a, params)
    t = time.perf_counter()
    client = Client(a.id, params)
    keygen_ms = round((time.perf_counter() - t) * 1000, 3)
    pending = remote.PendingKey(path, remote.key_record(client, a.server), force=a.force)
    try:
        with remote.service_client(a.server, **_http_kw(a)) as http:
            resp, st = remote.register(http, client, template)
    except BaseException:
        pending.discard()
        raise
    out = {"id": a.id, "server": a.server, "key_file": str(pending.commit()), "replaced": resp.replaced,
           "c1_face_ms": c1_ms, "keygen_ms": keygen_ms, "c2_encrypt_ms": st["c2_encrypt_ms"],
           "network_ms": st["network_ms"], "total_ms": round((time.perf_counter() - t0) * 1000, 3),
           "bytes_sent": st["bytes_sent"], "bytes_received": st["bytes_received"]}
    _print(out, a.json)
    return 0


def cmd_verify(a) -> int:
    if getattr(a, "protocol", "im2020") == "kolberg":
        return cmd_kolberg_client(a)
    import time

    from .protocols.im2020 import remote

    t0 = time.perf_counter()
    client, record = remote.load_client(_key_path(a), workers=a.workers)
    if record.subject_id != a.id:
        raise remote.KeyFileError(f"the key file is for {record.subject_id!r}, not {a.id!r}")
    template, c1_ms = _face_template(a, client.params)
    with remote.service_client(a.server, **_http_kw(a)) as http:
        r = remote.verify(http, client, template, mode=a.mode)
    out = {"id": a.id, "decision": r["decision"], "accepted": r["accepted"], "c1_face_ms": c1_ms,
           "c2_encrypt_ms": r["c2_encrypt_ms"], "c3_decrypt_ms": r["c3_decrypt_ms"],
           "network_ms": r["network_ms"], "total_ms": round((time.perf_counter() - t0) * 1000, 3),
           "bytes_sent": r["bytes_sent"], "bytes_received": r["bytes_received"]}
    out.update({k: r[k] for k in ("mode", "compare_bits", "s3_compare_ms", "compare_bytes") if k in r})
    _print(out, a.json)
    return 0 if r["accepted"] else 1


def cmd_revoke(a) -> int:
    if getattr(a, "protocol", "im2020") == "kolberg":
        return cmd_kolberg_client(a)
    from .protocols.common import check_subject_id
    from .protocols.im2020 import remote
    from .protocols.im2020.parties import PROTOCOL

    check_subject_id(PROTOCOL, a.id)
    with remote.service_client(a.server, **_http_kw(a)) as http:
        resp, st = remote.revoke(http, a.id)
    path = _key_path(a)
    removed = path.is_file()
    if removed:
        path.unlink()
    _print({"id": a.id, "revoked": resp.revoked, "key_file_removed": str(path) if removed else None,
            "bytes_sent": st["bytes_sent"], "bytes_received": st["bytes_received"]}, a.json)
    return 0


def _service_options(a, name: str) -> dict:
    """Protocol options of `privface serve` for the protocol `name`."""
    if name == "gsm":
        return _gsm_service_options(a)
    if name == "kolberg":
        return _kolberg_service_options(a)
    if name == "ident":
        return _ident_service_options(a)
    if name == "cryptomask":
        return _cryptomask_service_options(a)
    if name != "im2020":
        return {}
    options = {"params": _im2020_params(a)}
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
        from .store.sqlite import SQLiteStore

        db = SQLiteStore.path_of(a.db)
        return None if db is None else str(db.with_name(f"{db.stem}.gsm-signing.key"))
    raise PrivfaceError("a gsm provider on this store needs --signing-key PATH (its Ed25519 key file, created "
                        "mode 0600 if absent; never kept in the store)")


def _gsm_service_options(a) -> dict:
    """gsm: --role provider (--signing-key PATH, default next to a SQLite store) or terminal (--provider-key
    HEX, --capture IMAGE read, embedded and quantized to norm ζ at every match/start; --allow-variant pi1)."""
    if a.role not in ("provider", "terminal"):
        raise PrivfaceError("--protocol gsm needs --role provider or --role terminal")
    options = {"role": a.role, "params": _gsm_params(a)}
    if a.role == "provider":
        if a.allow_variant:
            raise PrivfaceError("--allow-variant applies to a gsm terminal")
        options["signing_key_path"] = _gsm_signing_key_path(a)
        return options
    if not a.capture:
        raise PrivfaceError("a gsm terminal needs --capture IMAGE (the camera's latest frame)")
    if not a.provider_key:
        raise PrivfaceError("a gsm terminal needs --provider-key HEX (printed by the provider at start): it checks "
                            "the provider's signature on every first message")
    try:
        options["provider_key"] = bytes.fromhex(a.provider_key)
    except ValueError:
        raise PrivfaceError("--provider-key must be the provider's key as 64 hex digits") from None
    options["allow_pi1"] = "pi1" in (a.allow_variant or ())
    from .faces.registry import make_backend
    from .templates.fixed_norm import fixed_norm_template

    backend, m, path = make_backend(), options["params"].m, a.capture
    options["capture"] = lambda: fixed_norm_template(backend.embed(path), m)
    return options


def _kolberg_service_options(a) -> dict:
    """kolberg: --role auth (key pairs in its own --db) or db (--auth-url of the auth server), --scheme."""
    if a.role not in ("db", "auth"):
        raise PrivfaceError("--protocol kolberg needs --role db or --role auth")
    if a.role == "db" and not a.auth_url:
        raise PrivfaceError("a kolberg DB server needs --auth-url (the auth server's base URL)")
    options = {"role": a.role, "scheme": a.scheme or "bfv", "auth_url": a.auth_url}
    if a.role == "db":
        from .service.client import tls_context

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
        options["insecure_test_params"] = a.insecure_test_params
        return options
    if not a.key_url:
        raise PrivfaceError("an ident local server needs --key-url (the key server's base URL)")
    from .service.client import tls_context

    options.update(gallery_url=a.gallery or a.db, key_url=a.key_url,
                   key_api_key=a.key_api_key or os.environ.get("PRIVFACE_KEY_API_KEY") or None,
                   key_tls=tls_context(a.auth_ca, a.auth_client_cert, a.auth_client_key))
    return options


def _cryptomask_service_options(a) -> dict:
    """cryptomask (seed 001): --role cs over the persisted gallery (--gallery, default --db; --gallery-name); the
    CS holds pk and k_sw, never sk or sk_v (the verifier is the client: identify --protocol cryptomask)."""
    if a.role != "cs":
        raise PrivfaceError("--protocol cryptomask needs --role cs (the verifier is `privface identify "
                            "--protocol cryptomask --server URL --key-store URL`)")
    return {"role": "cs", "gallery_url": a.gallery or a.db, "gallery_name": a.gallery_name}


def _kolberg_embedding(a):
    """The face's embedding for the kolberg commands (default backend); (embedding, ms)."""
    import time

    from .faces.registry import make_backend

    t0 = time.perf_counter()
    x = make_backend(**_spec(a)).embed(a.image)
    return x, round((time.perf_counter() - t0) * 1000, 3)


def _kolberg_client(a):
    from .protocols.kolberg import KolbergParams
    from .protocols.kolberg.remote import KolbergClient

    return KolbergClient(a.server, KolbergParams(a.scheme or "bfv"), **_http_kw(a))


def _kolberg_stats(http) -> dict:
    return {"bytes_sent": sum(s.request_bytes for s in http.stats),
            "bytes_received": sum(s.response_bytes for s in http.stats),
            "network_ms": round(sum(s.seconds for s in http.stats) * 1000, 3)}


def cmd_kolberg_client(a) -> int:
    """enroll / verify / identify / revoke against a kolberg DB server (no client key file: the auth
    server's public key is fetched from the DB server)."""
    from .protocols.common import check_subject_id
    from .protocols.kolberg.parties import PROTOCOL

    if a.cmd != "identify":
        check_subject_id(PROTOCOL, a.id)
    x, face_ms = _kolberg_embedding(a) if a.cmd != "revoke" else (None, None)
    with _kolberg_client(a) as http:
        out = {"protocol": "kolberg", "scheme": http.params.scheme}
        if a.cmd == "enroll":
            out.update(id=a.id, replaced=http.enrol(a.id, x).replaced)
        elif a.cmd == "verify":
            out.update(id=a.id, accepted=http.verify(a.id, x))
        elif a.cmd == "identify":
            out.update(id=http.identify(x))
            out["accepted"] = out["id"] is not None
        else:
            out.update(id=a.id, revoked=http.revoke(a.id))
        out.update(_kolberg_stats(http))
    if face_ms is not None:
        out["face_ms"] = face_ms
    _print(out, a.json)
    return 1 if out.get("accepted") is False else 0


GALLERY_SCHEMES = ("idface-ckks", "hers", "idface-paillier")
GALLERY_SCHEMES += ("cryptomask",)  # seed 001: 1-bit answer (scale.cryptomask_gallery)


def cmd_gallery_enrol(a) -> int:
    from .faces.registry import make_backend
    from .scale import enrol, open_source

    if a.insecure_test_params:
        print("privface: WARNING: --insecure-test-params: TOY KEY SIZES, NO SECURITY — for tests only",
              file=sys.stderr)
    source = open_source(a.inputs, lambda: make_backend(**_spec(a)))
    centring, lift = a.centring, a.lift
    if a.scheme.startswith("idface"):  # the eval's defaults: centred and, for d = 128, lifted (README accuracy)
        from .eval.identify_eval import DEFAULT_LIFT

        centring = centring or "shipped"
        lift = DEFAULT_LIFT.get(source.dim, 0) if lift is None else lift
    report = enrol(a.gallery, source, a.scheme, key_store_url=a.key_store, beta=a.beta, tau=a.tau,
                   insecure_test_params=a.insecure_test_params, progress=not a.json, name=a.name,
                   centring=centring or "none", backend=_spec(a).get("name", "dlib-resnet128"), lift=lift or None)
    _print(report.to_dict(), a.json)
    return 0


def _identify_embedding(a):
    """(embedding, face_ms or None) from a face photo or a .npy file holding one embedding."""
    import time

    if a.image.endswith(".npy"):
        try:
            x = np.load(a.image, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise PrivfaceError(f"cannot read {a.image}: {e}") from None
        if x.size == 0 or x.ndim > 2 or (x.ndim == 2 and x.shape[0] != 1):
            raise PrivfaceError(f"{a.image}: expected one embedding, got shape {x.shape}")
        return x, None
    from .faces.registry import make_backend

    t = time.perf_counter()
    x = make_backend(**_spec(a)).embed(a.image)
    return x, round((time.perf_counter() - t) * 1000, 3)


def _ident_client(a) -> int:
    """identify --protocol ident --server URL: the hers / idface local server (seed 003 §3.2) over HTTP."""
    from .protocols.hers.remote import IdentClient

    x, face_ms = _identify_embedding(a)
    with IdentClient(a.server, **_http_kw(a)) as http:
        found = http.identify(x)
        out = {"protocol": "ident", "id": found, "accepted": found is not None, **_kolberg_stats(http)}
    if face_ms is not None:
        out["face_ms"] = face_ms
    if a.json:
        _print(out, True)
    else:
        print(found if found is not None else "no match")
    return 0 if found is not None else 1


def _cryptomask_client(a) -> int:
    """identify --protocol cryptomask --server URL --key-store URL: the verifier (sk_v) against a CS (seed 001)."""
    from .protocols.cryptomask.remote import VerifierClient
    from .scale.cryptomask_identify import ANSWER

    if a.scheme not in (None, "cryptomask") or a.ray or a.workers:
        raise PrivfaceError("--protocol cryptomask takes --key-store and --name (no --scheme, --ray, --workers)")
    if not a.key_store:
        raise PrivfaceError("--protocol cryptomask needs --key-store URL (the verifier's sk_v and τ)")
    x, face_ms = _identify_embedding(a)
    with VerifierClient(a.server, a.key_store, name=a.name or "default", **_http_kw(a)) as http:
        out = http.identify(x)
        out = {**out, "answer": ANSWER, **_kolberg_stats(http)}
    _print_bit(out, face_ms, a.json)
    return 0 if out["match"] else 1


def _print_bit(out: dict, face_ms, as_json: bool) -> None:
    """cryptomask's 1-bit answer (in process or over HTTP): JSON, or "match"/"no match" and the figures."""
    out = {"match": out["match"], "accepted": out["match"], **out}
    if face_ms is not None:
        out["face_ms"] = face_ms
    if as_json:
        _print(out, True)
        return
    print("match" if out["match"] else "no match")
    print("  ".join(f"{k} {v}" for k, v in out.items()
                    if k not in ("match", "accepted", "id", "answer", "bytes_per_phase")))
    print(out["answer"])


def cmd_identify(a) -> int:
    """identify: kolberg over HTTP (--server) or against a local encrypted gallery (--gallery)."""
    if a.server and a.protocol == "cryptomask":
        return _cryptomask_client(a)
    if a.server:
        if a.scheme in GALLERY_SCHEMES or a.key_store or a.ray or a.workers or a.name:
            raise PrivfaceError("--scheme idface-ckks|idface-paillier|hers, --key-store, --name, --ray and "
                                "--workers go with --gallery")
        if a.protocol == "ident":
            if a.scheme is not None:
                raise PrivfaceError("--scheme does not go with --protocol ident: the local server's gallery has one")
            return _ident_client(a)
        return cmd_kolberg_client(a)
    if a.protocol in ("ident", "cryptomask"):
        who = "the local server's" if a.protocol == "ident" else "the CS's"
        raise PrivfaceError(f"--protocol {a.protocol} goes with --server ({who} URL)")
    from .scale import Gallery, cryptomask_gallery, identify

    if a.scheme is not None and a.scheme not in GALLERY_SCHEMES:
        raise PrivfaceError(f"--gallery galleries use --scheme {' or '.join(GALLERY_SCHEMES)}")
    if a.workers is not None and (a.ray is None or a.workers < 1):
        raise PrivfaceError("--workers needs --ray and a positive count")
    name = a.name or "default"
    if cryptomask_gallery.stored_scheme(a.gallery, name) == "cryptomask":
        return _identify_cryptomask(a, name)
    gallery_scheme = Gallery(a.gallery, name).settings.scheme
    if a.scheme is not None and a.scheme != gallery_scheme:
        raise PrivfaceError(f"the gallery was enrolled with {gallery_scheme}, not {a.scheme}")
    x, face_ms = _identify_embedding(a)
    out = identify(x, a.gallery, key_store_url=a.key_store, ray=a.ray, workers=a.workers, name=name)
    out = {"id": out["id"], "accepted": out["id"] is not None, **{k: v for k, v in out.items() if k != "id"}}
    if face_ms is not None:
        out["face_ms"] = face_ms
    if a.json:
        _print(out, True)
    else:
        print(out["id"] if out["accepted"] else "no match")
        print("  ".join(f"{k} {v}" for k, v in out.items() if k not in ("id", "accepted")))
    return 0 if out["accepted"] else 1


def _identify_cryptomask(a, name: str) -> int:
    """identify --gallery with a cryptomask gallery (seed 001): the verifier's bit, no id (exit 0 match, 1 none)."""
    from .scale import identify

    if a.scheme is not None and a.scheme != "cryptomask":
        raise PrivfaceError(f"the gallery was enrolled with cryptomask, not {a.scheme}")
    x, face_ms = _identify_embedding(a)
    out = identify(x, a.gallery, key_store_url=a.key_store, ray=a.ray, workers=a.workers, name=name)
    _print_bit(out, face_ms, a.json)
    return 0 if out["match"] else 1


def cmd_rotate_keys(a) -> int:
    """Admin: re-encrypt every kolberg reference in --db under a fresh key of the auth server (resumable)."""
    if a.protocol != "kolberg":
        raise PrivfaceError("rotate-keys supports --protocol kolberg only")
    from .protocols.kolberg import KolbergParams
    from .protocols.kolberg.remote import HttpAuth
    from .protocols.kolberg.rotation import rotate_keys
    from .store import open_store

    with open_store(a.db) as store, HttpAuth(a.auth_url, **_http_kw(a)) as auth:
        scheme = a.scheme or auth.keys().scheme
        report = rotate_keys(KolbergParams(scheme), store, auth)
    _print(report.to_dict(), a.json)
    return 0


class _Shutdown(Exception):
    """SIGINT/SIGTERM reached `privface serve` (after uvicorn finished its graceful shutdown)."""


def _shutdown(signum, frame):
    raise _Shutdown


def cmd_keys(a) -> int:
    """API keys of `privface serve` in the store --db: create (prints the secret once), list, revoke."""
    from .service.auth import ApiKeys
    from .store import open_store

    with open_store(a.db) as store:
        keys = ApiKeys(store)
        if a.action == "create":
            key, secret = keys.create(a.scopes, a.name)
            if a.json:
                print(json.dumps({**key.to_dict(), "api_key": secret}))
            else:
                _print({**key.to_dict(), "api_key": secret}, False)
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
        _print({"key_id": a.key_id, "revoked": revoked}, a.json)
        return 0 if revoked else 1


def cmd_certs(a) -> int:
    from .service.certs import make_dev_certs

    files = make_dev_certs(a.out, a.hosts.split(","), days=a.days)
    _print(files, a.json)
    return 0


def _serve_ops_args(s) -> None:
    """Limits and operations of `privface serve` (issue 8 §2, §6; README "Running the service")."""
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


def _serve_limits(a, store) -> dict:
    from .service.limits import Lockout, RateLimiter

    try:
        return {"rate_limit": RateLimiter(a.rate_limit, a.rate_burst) if a.rate_limit > 0 else None,
                "lockout": Lockout(store, a.lockout_failures, a.lockout_backoff, a.lockout_max)
                if a.lockout_failures > 0 else None}
    except ValueError as e:
        raise PrivfaceError(str(e)) from None


def cmd_serve(a) -> int:
    import logging
    import logging.config
    import signal

    import uvicorn

    from .service.app import create_app
    from .service.auth import ApiKeys
    from .service.observe import log_config
    from .service.registry import load_service
    from .store import open_store
    from .store.base import redact

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
                         max_sessions_per_caller=a.max_sessions_per_caller, keys=keys, **limits)
        for svc in services:
            if svc.name == "gsm" and svc.role == "provider":  # public: terminals are configured with it
                from .protocols.gsm.service import provider_key_bytes

                note.info(f"gsm provider key {provider_key_bytes(svc.provider.public_key).hex()}")
            if svc.name == "gsm" and svc.role == "terminal" and svc.allow_pi1:
                note.warning("WARNING: --allow-variant pi1: this terminal serves Π1, whose result is the device's "
                             "own claim (answered as such, not counted, audited as pi1-claimed-…)")
        scheme = "https" if a.tls_cert else "http"
        note.info(f"serving {', '.join(s.name for s in services)} on {scheme}://{a.host}:{a.port} "
                  f"(store {redact(a.db)}; API keys {'off' if a.no_auth else 'required'}"
                  f"{'; mutual TLS' if a.tls_client_ca else ''}; rate limit "
                  f"{f'{a.rate_limit:g}/s burst {a.rate_burst}' if limits['rate_limit'] else 'off'}; lockout "
                  f"{f'after {a.lockout_failures} rejections' if limits['lockout'] else 'off'})")
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
                                      access_log=False, timeout_graceful_shutdown=30, **tls)).run()
    except _Shutdown:
        pass
    finally:
        store.close()
    note.info("stopped; store closed")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="privface", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("embed", help="detect, align and embed the faces in an image")
    s.add_argument("image")
    s.add_argument("--all", action="store_true", help="every face, not only the largest")
    _backend_args(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_embed)

    s = sub.add_parser("compare", help="plaintext baseline: distance, threshold and decision for two images")
    s.add_argument("image_a")
    s.add_argument("image_b")
    s.add_argument("--threshold", type=float, help="decision threshold on distance (default: the backend's)")
    _backend_args(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("eval", help="verification accuracy on a dataset")
    s.add_argument("--dataset", required=True, help="orl, lfw, or a folder with one sub-folder per identity")
    s.add_argument("--protocol", default="plain",
                   choices=["plain", "im2020", "gsm", "kolberg", "idface", "hers", "cryptomask"],
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
    s.add_argument("--variant", choices=["pi1", "pi2", "pi3"],
                   help="gsm: Π1 (§5), Π2 (§6) or Π3 (§7) (default pi1)")
    s.add_argument("--m", type=int, help="gsm: template bits m (default 16)")
    s.add_argument("--cos-threshold", type=float, help="gsm: cosine threshold T′ (default: the ORL EER threshold); "
                                                       "cryptomask: τ (default: the plaintext τ at FPIR 1e-2)")
    s.add_argument("--pairs", type=int,
                   help="im2020, gsm, kolberg: run a seeded sample of N pairs (half genuine) instead of all")
    s.add_argument("--tau", type=int, help="im2020: decision threshold on the squared distance (default 4777)")
    s.add_argument("--security-bits", type=int, default=112, choices=[112, 128], help="im2020: security level")
    s.add_argument("--insecure-test-params", action="store_true",
                   help="im2020, idface, hers: toy key sizes, for a quick smoke test only (insecure)")
    s.add_argument("--data-root", help="datasets root (default: $PRIVFACE_DATA)")
    s.add_argument("--report", metavar="DIR", help="write ROC/DET/histogram PNGs and summary.md here")
    s.add_argument("--workers", type=int, help="embedding and im2020 protocol processes (default: one per core)")
    s.add_argument("--no-cache", action="store_true",
                   help="do not read or write the embedding cache (nor the default im2020 checkpoint)")
    _mode_args(s)
    s.add_argument("--checkpoint", metavar="FILE",
                   help="im2020: resume from and append finished pairs to FILE (default: a file under the cache "
                        "directory named by dataset, backend, level, τ, mode and --pairs)")
    s.add_argument("--no-checkpoint", action="store_true", help="im2020: neither resume nor record progress")
    s.add_argument("--yes", action="store_true", help="im2020 secure-comparison: run every pair without --pairs")
    _backend_args(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_eval)

    s = sub.add_parser("bench", help="benchmarks (medians)")
    s.add_argument("what", choices=["faces", "crypto", "im2020", "im2020-attacks", "gsm", "gsm-enrol", "lattice",
                                    "kolberg", "kolberg-unlinkability", "identify", "load"])
    s.add_argument("--scheme", help="kolberg*: ckks|bfv|ntru (default: all three); identify: "
                   "plain|hers|idface-ckks|idface-paillier (seed 003) or cryptomask (seed 001) (default idface-ckks)")
    s.add_argument("--dim", type=int, choices=range(1, 4095), metavar="D",
                   help="kolberg: one template dimension (default: 512 and 128); kolberg-unlinkability: (default 128); "
                   "identify: template dimension d (idface: 128, 512, or a lift dimension 1024 / 2048; default 512)")
    s.add_argument("--subjects", type=int, default=100,
                   help="kolberg-unlinkability: subjects, five protected templates each (default 100)")
    s.add_argument("--n", type=int, default=1 << 13, help="identify: gallery size N (synthetic unit vectors)")
    s.add_argument("--beta", type=int, help="identify: IDFace query parameter β (default 63 for d = 512, 15 for 128)")
    s.add_argument("--seal-adds", action="store_true",
                   help="identify, idface-ckks: also time IP_DB's additions with SEAL add_inplace")
    s.add_argument("--ell", type=int, help="gsm: template length ℓ (with --m: one row instead of the grid); "
                   "gsm-enrol: ℓ (default 256)")
    s.add_argument("--m", type=int, help="gsm: bits per template element; gsm-enrol: m (default 16)")
    s.add_argument("--paillier-bits", type=int, default=3072,
                   help="gsm: Paillier modulus bits (default 3072 as seed 004 §9; 2048 is the 112-bit minimum)")
    s.add_argument("--no-pi3", action="store_true", help="gsm: skip Π3 (its garbled circuit)")
    s.add_argument("--protocol", help="load: the protocol served (im2020)")
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
    s.add_argument("--tau", type=int, help="im2020-attacks: decision threshold (default 4777)")
    s.add_argument("--hbcs-pairs", type=int, help="im2020-attacks: (r0, r1) pairs of the HBCS transcript "
                   "enumeration (default: all 128)")
    _mode_args(s)
    s.add_argument("--dataset", help="orl, lfw, a folder, or demo (default: orl when a data root is set, else demo)")
    s.add_argument("--data-root", help="datasets root (default: $PRIVFACE_DATA)")
    _backend_args(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_bench)

    s = sub.add_parser("protocols", help="the protocol catalogue: threat model, leakage, security levels, parameters")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_protocols)

    s = sub.add_parser("train-pca", help="fit an eigenfaces (PCA) model on a dataset")
    s.add_argument("--dataset", required=True)
    s.add_argument("--data-root")
    s.add_argument("-k", type=int, default=32, help="components (seed 000 uses 16–48)")
    s.add_argument("--out", required=True, help="model file to write")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_train_pca)

    s = sub.add_parser("serve", help="run the HTTP service for one or more protocols")
    s.add_argument("--protocol", action="append", required=True, metavar="NAME",
                   help="protocol to mount, e.g. im2020 (repeat for several)")
    s.add_argument("--db", default="sqlite:///privface.db",
                   help="template store URL: sqlite:///path.db (default sqlite:///privface.db) or postgresql://…")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--session-ttl", type=float, default=120.0, help="seconds a flow's session lives (default 120)")
    s.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    s.add_argument("--security-bits", type=int, default=112, choices=[112, 128],
                   help="im2020: minimum security level of client keys (default 112)")
    s.add_argument("--tau", type=int, help="im2020: decision threshold on the squared distance (default 4777)")
    s.add_argument("--tp-public-key", metavar="PEM",
                   help="im2020: accept only registrations signed by this trusted party (§VII)")
    s.add_argument("--insecure-test-params", action="store_true",
                   help="im2020, gsm, ident key server: accept toy key sizes — tests only, INSECURE")
    s.add_argument("--role", choices=["provider", "terminal", "db", "auth", "key", "local", "cs"],
                   help="gsm: serve the service provider (enrolment Π_en) or a terminal (Π1/Π2/Π3 matching); "
                        "kolberg: the DB server (encrypted references) or the auth server (secret key); "
                        "ident: the key server (sk; --db is the gallery's key store) or the local server "
                        "(encrypted gallery); cryptomask: cs, the Cloud Server over --gallery (pk, k_sw)")
    s.add_argument("--auth-url", help="kolberg DB server: the auth server's base URL")
    s.add_argument("--gallery", metavar="URL", help="ident local server, cryptomask cs: the gallery store "
                                                    "(default: --db)")
    s.add_argument("--gallery-name", default="default", help="ident, cryptomask: which gallery of the store "
                                                             "(default default)")
    s.add_argument("--key-url", help="ident local server: the key server's base URL")
    s.add_argument("--key-api-key", help="ident local server: API key (scope internal) for the key server "
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
    s.add_argument("--capture", metavar="IMAGE", help="gsm terminal: image file holding the camera's latest frame")
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
    _mode_args(s)
    _serve_ops_args(s)
    s.set_defaults(func=cmd_serve)

    def http_args(s) -> None:
        s.add_argument("--api-key", help="API key of the service (default: $PRIVFACE_API_KEY; the environment "
                                         "keeps it out of the process list)")
        s.add_argument("--ca", metavar="PEM", help="CA certificate that signed an https server's certificate")
        s.add_argument("--client-cert", metavar="PEM", help="client certificate for mutual TLS")
        s.add_argument("--client-key", metavar="PEM", help="the client certificate's private key")

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

    def client_args(s, image: bool = True) -> None:
        s.add_argument("--server", required=True, help="service base URL, e.g. http://127.0.0.1:8000")
        s.add_argument("--id", required=True, help="the subject ID")
        if image:
            s.add_argument("image", help="face photo")
            _backend_args(s)
        s.add_argument("--key", metavar="FILE",
                       help="client key file (default ~/.config/privface/keys/<server host>/<id>.key)")
        s.add_argument("--json", action="store_true")
        http_args(s)

    def kolberg_args(s) -> None:
        s.add_argument("--protocol", choices=["im2020", "kolberg"], default="im2020",
                       help="im2020 (default) or kolberg (a kolberg DB server: privface serve --role db)")
        s.add_argument("--scheme", choices=["ckks", "bfv", "ntru"], help="kolberg: the server's scheme (default bfv)")

    s = sub.add_parser("enroll", help="over HTTP: embed the face and enrol it encrypted (im2020: make a key pair, "
                                      "register C = Enc(Γ); kolberg: under the auth server's public key)")
    client_args(s)
    kolberg_args(s)
    s.add_argument("--force", action="store_true", help="replace an existing key file")
    s.add_argument("--security-bits", type=int, default=112, choices=[112, 128], help="key size level")
    s.add_argument("--insecure-test-params", action="store_true", help="toy key sizes — tests only, INSECURE")
    s.set_defaults(func=cmd_enroll)

    s = sub.add_parser("verify", help="over HTTP: authenticate ID with a face photo (exit 0 accept, 1 reject)")
    client_args(s)
    kolberg_args(s)
    s.add_argument("--workers", type=int, help="threads for the level-2 decryption (default: one per core)")
    s.add_argument("--mode", choices=MODES,
                   help="insist on this im2020 mode (default: follow the server); refused before s* or the "
                        "comparison is sent if the server runs another")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("revoke", help="over HTTP: delete ID's enrolment (im2020: and the local key file)")
    client_args(s, image=False)
    kolberg_args(s)
    s.set_defaults(func=cmd_revoke)

    s = sub.add_parser("identify", help="who is this face? kolberg over HTTP (--server) or a local encrypted "
                                        "gallery (--gallery; hers / idface-ckks / idface-paillier; cryptomask: match "
                                        "or not, no id) (exit 0 found, 1 nobody)")
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="the kolberg DB server's (or with --protocol ident, the hers/idface local "
                                        "server's) base URL")
    where.add_argument("--gallery", help="an encrypted gallery's store URL (made by `privface gallery enrol`)")
    s.add_argument("image", help="face photo (--gallery: or a .npy file holding one embedding)")
    _backend_args(s)
    s.add_argument("--scheme", choices=["ckks", "bfv", "ntru", *GALLERY_SCHEMES],
                   help="--server: the server's scheme (default bfv); --gallery: checked against the gallery's")
    s.add_argument("--key-store", help="--gallery: the key server's store URL (default for sqlite:///g.db: "
                                       "sqlite:///g.keys.db); --protocol cryptomask --server: the verifier's")
    s.add_argument("--ray", metavar="auto|ADDRESS", help="--gallery: shard the blocks over Ray workers "
                                                         "(auto: a local Ray; else a cluster address)")
    s.add_argument("--workers", type=int, help="--ray: number of shards (default: the cluster's CPUs)")
    s.add_argument("--name", help="--gallery, --protocol cryptomask: which gallery (default: default)")
    s.add_argument("--protocol", choices=["kolberg", "ident", "cryptomask"], default="kolberg",
                   help="--server: kolberg DB server (default), ident local server (`serve --protocol ident "
                        "--role local`) or cryptomask CS (`serve --protocol cryptomask --role cs`; with --key-store, "
                        "the verifier's keys)")
    s.add_argument("--json", action="store_true")
    http_args(s)
    s.set_defaults(func=cmd_identify)

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
                                             "held-out LFW identities (README: default thresholds)")
    g.add_argument("--insecure-test-params", action="store_true",
                   help="toy keys (CKKS N = 2048, Paillier 512-bit, cryptomask BFV N = 2048): tests only")
    g.add_argument("--name", default="default", help="the gallery's name in the store (several may share one)")
    g.add_argument("inputs", nargs="+", help=".npy embedding files (ids <stem>.<row>) or images / directories "
                                             "(ids: file stems)")
    _backend_args(g)
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=cmd_gallery_enrol)

    s = sub.add_parser("rotate-keys", help="admin: re-encrypt every stored reference under a fresh auth key "
                                           "(blind re-encryption, resumable; kolberg)")
    s.add_argument("--protocol", required=True, choices=["kolberg"])
    s.add_argument("--db", required=True, help="the DB server's template store URL")
    s.add_argument("--auth-url", required=True, help="the auth server's base URL")
    s.add_argument("--scheme", choices=["ckks", "bfv", "ntru"], help="default: the auth server's")
    s.add_argument("--json", action="store_true")
    http_args(s)
    s.set_defaults(func=cmd_rotate_keys)

    s = sub.add_parser("demo", help="enrol and verify on an embedded photo; no download, no dataset")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["serve"]:  # serve options from --config FILE and $PRIVFACE_* (service/config.py)
            from .service import config

            config.apply(_subparser(parser, "serve"), argv[1:], os.environ)
        a = parser.parse_args(argv)
        return a.func(a)
    except PrivfaceError as e:
        print(f"privface: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("privface: interrupted", file=sys.stderr)
        return 130


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


if __name__ == "__main__":
    sys.exit(main())
