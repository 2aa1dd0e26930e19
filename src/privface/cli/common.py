"""Shared by the command modules: face backend options, printing, protocol parameters, HTTP client options."""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from ..errors import PrivfaceError
from ..faces.registry import BACKENDS, DEFAULT_BACKEND
from ..faces.thresholds import DEFAULT_THRESHOLDS, squared_quantized
from ..templates.quantize import IM2020_SCALE

SHARED = "the --backend's default shared with `privface compare` and every protocol, faces.thresholds"


def per_backend(fmt) -> str:
    """``fmt(operating point)`` for every backend with a shared default, e.g. "dlib-resnet128 0.53, sface 1.1"."""
    return ", ".join(f"{name} {fmt(p)}" for name, p in DEFAULT_THRESHOLDS.items())


TAU_HELP = ("im2020: decision threshold on the squared distance of ×128 templates (default ⌊(t·128)²⌋ of the "
            "--backend's shared distance t: "
            + per_backend(lambda p: f"{squared_quantized(p.distance, IM2020_SCALE)} = ⌊({p.distance:g}·128)²⌋")
            + f"; {SHARED})")


# DEFAULT_BACKEND (faces.registry, sface since issue 36): the face backend of every command with --backend — those
# that talk to a server or make a key, gallery or enrolment, and `privface eval`. A server, its enrolments, its key
# files and the page all record theirs, and a mix is refused.
EVAL_BACKEND = DEFAULT_BACKEND


def backend_args(p: argparse.ArgumentParser, default: str | None = DEFAULT_BACKEND) -> None:
    """--backend (None: the command picks, e.g. `verify` the key file's), --model, --jitter, --flip."""
    told = default or f"im2020: the key file's; otherwise {DEFAULT_BACKEND}"
    p.add_argument("--backend", default=default, choices=list(BACKENDS),
                   help=f"face backend (default: {told}); the protocols' default thresholds are this "
                        "backend's (faces.thresholds), and a server refuses templates of another")
    p.add_argument("--model", help="model file for --backend pca or onnx (sface: default the installed file)")
    p.add_argument("--jitter", type=int, default=None, help="dlib-resnet128: jitter passes per face (slower, steadier)")
    p.add_argument("--flip", action="store_true", help="dlib-resnet128: average with the mirrored face")
    p.add_argument("--landmarks", type=int, choices=[5, 68], default=None,
                   help="onnx: align on the five ArcFace points of dlib's 68-point model (default; trained on iBUG "
                        "300-W, not for commercial use) or on dlib's 5-point model (CC0). sface always uses the "
                        "5-point model; --backend sface-lm68 is SFace on the 68-point model, for measurement only")


def face_args(p: argparse.ArgumentParser, what: str = "the photo") -> None:
    p.add_argument("--face", default="single", type=_face_choice, metavar="largest|N",
                   help=f"which face of {what} to use when there are several. Default: the largest, refused when "
                        "another is about as large (its box area ≥ 0.8× the largest's); largest: the largest anyway; "
                        "N: face N as the refusal (or `privface embed --all`) lists them, largest first from 0")


def _face_choice(v: str) -> str | int:
    if v in ("single", "largest", "center"):
        return v
    if v.isdigit():
        return int(v)
    raise argparse.ArgumentTypeError(f"expected largest or a face number (0, 1, …), got {v!r}")


def one_face(a, image, backend=None):
    """The face of `image` to use (--face) with the command's backend: (Face, ms). Its ``describe()`` names it in
    the command's output: which face was used, of how many."""
    import time

    from ..faces.registry import make_backend

    backend = backend or make_backend(**backend_spec(a))
    t0 = time.perf_counter()
    face = backend.face(image, getattr(a, "face", "single"))
    return face, round((time.perf_counter() - t0) * 1000, 3)


def backend_name(a) -> str:
    """The command's face backend: --backend, or the default for a command without one."""
    return getattr(a, "backend", None) or DEFAULT_BACKEND


def _backend_default(what, backend: str):
    """A protocol default of ``backend`` (faces.thresholds), or a PrivfaceError saying to give it explicitly."""
    try:
        return what(backend)
    except ValueError as e:
        raise PrivfaceError(str(e)) from None


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
    landmarks = getattr(a, "landmarks", None)
    if landmarks is not None:
        if a.backend != "onnx":
            raise PrivfaceError("--landmarks applies to --backend onnx only (sface aligns on dlib's 5-point "
                                "landmarks; --backend sface-lm68 on its 68-point ones)")
        spec["landmarks"] = landmarks
    return spec


THIN = "\u202f"
"""Digit-group separator in tables for people: a narrow no-break space (SI: 26 843 546, never 2.68435e+07)."""


def grouped(n: int) -> str:
    return f"{n:,}".replace(",", THIN)


def size(n: float) -> str:
    """A byte count as people read it: 812 B, 26.8 MB, 1.07 GB (SI units, as the docs use)."""
    for unit, div in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g} {unit}" if abs(n) / div < 1000 else f"{grouped(round(n / div))} {unit}"
    return f"{int(n)} B"


def human(key: str, v):
    """``v`` (the value of ``key``) as a table for people shows it: byte counts (keys naming bytes) with a unit,
    integers from 10 000 on in thin-space groups (floats rounded), smaller floats to 6 significant digits, which
    needs an exponent only when tiny (1e-05) — ``--json`` prints the numbers themselves."""
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        return v
    if "bytes" in key:
        return size(float(v))
    if isinstance(v, int | np.integer):
        return grouped(int(v)) if abs(v) >= 10_000 else str(int(v))
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    return grouped(round(v)) if abs(v) >= 10_000 else f"{v:.6g}"  # .6g below 10 000: an exponent only if tiny


def human_row(row: dict) -> dict:
    """Every scalar of ``row`` through ``human`` (for a bench table's ``format_table``); nested values as they are."""
    return {k: human(k, v) for k, v in row.items()}


def print_result(obj: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj, default=_jsonable))
        return
    width = max(len(k) for k in obj)
    for k, v in obj.items():
        if isinstance(v, dict):
            v = "  ".join(f"{kk}: {human(f'{k}.{kk}', vv)}" for kk, vv in v.items())  # bytes_per_phase.x: bytes
        elif isinstance(v, list) and len(v) > 8:
            v = f"[{len(v)} values]"
        else:
            v = human(k, v)
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

    kw: dict = {"ell": ell, "backend": backend_name(a)}  # T′: --cos-threshold, else the backend's default
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
    from ..protocols.im2020 import Im2020Params
    from ..protocols.im2020.params import default_tau

    backend = backend_name(a)
    tau = _backend_default(default_tau, backend) if getattr(a, "tau", None) is None else a.tau
    kw = {"tau": tau, "mode": getattr(a, "mode", None) or "basic", "backend": backend}
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

