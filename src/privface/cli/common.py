"""Shared by the command modules: face backend options, printing, protocol parameters, HTTP client options."""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from ..errors import PrivfaceError


def backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="dlib-resnet128", choices=["dlib-resnet128", "sface", "pca", "onnx"],
                   help="face backend (default: dlib-resnet128)")
    p.add_argument("--model", help="model file for --backend pca or onnx (sface: default the installed file)")
    p.add_argument("--jitter", type=int, default=None, help="dlib-resnet128: jitter passes per face (slower, steadier)")
    p.add_argument("--flip", action="store_true", help="dlib-resnet128: average with the mirrored face")


def backend_spec(a) -> dict:
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


def print_result(obj: dict, as_json: bool) -> None:
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


def check_choice(flag: str, value, choices) -> None:
    if value is not None and value not in choices:
        raise PrivfaceError(f"{flag} must be one of {', '.join(choices)} here, got {value!r}")


def gsm_params(a, ell: int = 128):
    from ..protocols.gsm import GsmParams

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


def im2020_params(a):
    from ..protocols.im2020 import DEFAULT_TAU, Im2020Params

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


def mode_args(s) -> None:
    s.add_argument("--mode", choices=MODES, default="basic",
                   help="im2020: basic (server learns the distance s) or secure-comparison (§VII Fig. 8 garbled "
                        "circuit: server learns only the decision)")
    s.add_argument("--compare-bits", choices=["k", "64"], default="k",
                   help="im2020 secure-comparison: circuit width, the full message space k (default; forgery "
                        "≤ τ/2^k) or 64 (~4× cheaper; forgery ≤ τ/2^64)")


def http_args(s) -> None:
    s.add_argument("--api-key", help="API key of the service (default: $PRIVFACE_API_KEY; the environment "
                                     "keeps it out of the process list)")
    s.add_argument("--ca", metavar="PEM", help="CA certificate that signed an https server's certificate")
    s.add_argument("--client-cert", metavar="PEM", help="client certificate for mutual TLS")
    s.add_argument("--client-key", metavar="PEM", help="the client certificate's private key")


def http_kw(a) -> dict:
    """ServiceClient options from --api-key (or $PRIVFACE_API_KEY), --ca, --client-cert, --client-key."""
    from ..service.client import tls_context

    return {"api_key": a.api_key or os.environ.get("PRIVFACE_API_KEY") or None,
            "tls": tls_context(a.ca, a.client_cert, a.client_key)}


def http_stats(http) -> dict:
    """Bytes sent and received and network time of a client's requests so far."""
    return {"bytes_sent": sum(s.request_bytes for s in http.stats),
            "bytes_received": sum(s.response_bytes for s in http.stats),
            "network_ms": round(sum(s.seconds for s in http.stats) * 1000, 3)}

