"""`privface eval --protocol gsm --variant pi1|pi2|pi3`: every pair's decision through the encrypted protocol.

Templates: each embedding becomes an m-bit template of exact norm ζ (``templates.fixed_norm``); the
plaintext score of a pair is the cosine ⟨u, w⟩/ζ², the decision ⟨u, w⟩ ≥ T = ⌈T′·ζ²⌉ (seed 004 §2).
Pair (i, j): image i is the device's enrolled template (Π1: self-encoded m1; Π2/Π3: enrolled at the
provider, which signs m1 — without the §8 proofs, see ``ServiceProvider``), image j the terminal's
measurement. Each worker process has one device key pair and enrols each image it needs once.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from ..protocols.gsm import Device, GsmParams, ServiceProvider, Terminal
from ..templates.fixed_norm import fixed_norm_template
from . import metrics


def gsm_templates(vectors: np.ndarray, found: np.ndarray, m: int) -> np.ndarray:
    """One fixed-norm m-bit template per row (zeros where no face was found)."""
    out = np.zeros(vectors.shape, dtype=np.int64)
    for r in np.flatnonzero(found):
        out[r] = fixed_norm_template(vectors[r], m)
    return out


def cosine_threshold(templates: np.ndarray, found: np.ndarray, i: np.ndarray, j: np.ndarray,
                     genuine: np.ndarray, m: int) -> float:
    """T′: the EER threshold of the plaintext cosine ⟨u, w⟩/ζ² of the quantized templates (seed 004 §2:
    T = T′·ζ²), over the pairs whose faces were both found."""
    ok = found[i] & found[j]
    z2 = float(GsmParams(ell=templates.shape[1], m=m).zeta ** 2)
    cos = (templates[i[ok]] * templates[j[ok]]).sum(axis=1) / z2
    _, thr = metrics.eer(1.0 - cos, genuine[ok])
    return round(1.0 - thr, 6)


def _run_chunk(params: GsmParams, variant: str, templates: dict[int, np.ndarray], pairs: list[tuple[int, int]]):
    sp = ServiceProvider(params, insecure_skip_proofs=True)
    device = Device("eval", params, provider_key=sp.public_key)
    # Π1 (Fig. 3): the device encodes its own m1 and nobody signs, so its terminal is one without a provider key
    terminal = Terminal(params, provider_key=None if variant == "pi1" else sp.public_key)
    enrolled_now, first = None, None
    decisions = []
    for i, j in pairs:
        if enrolled_now != i:
            if variant == "pi1":
                device.pi1_enrol(templates[i])
            else:
                device.accept_enrolment(sp.enrol_unproven(device.unproven_enrol_request(templates[i])))
            first = terminal.receive(device.first_message(), variant, reuse=True)
            enrolled_now = i
        ch, session = terminal.challenge(first, templates[j], variant)
        if variant == "pi1":
            decisions.append(terminal.pi1_finish(session, device.pi1_decide(ch)))
            continue
        if variant == "pi2":
            d = terminal.pi2_finish(session, device.pi2_reply(ch))
        else:
            req, ev = device.pi3_request(ch)
            d = terminal.pi3_finish(session, device.pi3_finish(ev, terminal.pi3_compare(session, req)))
        if d.aborted:
            raise RuntimeError("an honest gsm run aborted (⊥): parameters are inconsistent")
        decisions.append(d.match)
    return decisions


def protocol_scores(vectors: np.ndarray, found: np.ndarray, i: np.ndarray, j: np.ndarray, genuine: np.ndarray,
                    missing: float, *, params: GsmParams | None = None, variant: str = "pi1",
                    workers: int | None = None, progress: bool = False, device: str = "python"
                    ) -> tuple[np.ndarray, dict]:
    """(ζ² − ⟨u, w⟩ per pair — a distance for the ROC —, extra output keys incl. ``mismatches``). ``device``
    "browser": the device side runs in the browser's TypeScript Device (``gsm_browser``), checked pair by pair
    against the Python Device (``mismatches_vs_python_device``)."""
    params = dataclasses.replace(params or GsmParams(), ell=vectors.shape[1])  # ℓ = the embedding dimension
    t0 = time.perf_counter()
    U = gsm_templates(np.nan_to_num(vectors), found, params.m)
    ok = found[i] & found[j]
    ip = (U[i] * U[j]).sum(axis=1)
    dist = np.where(ok, params.zeta**2 - ip, missing).astype(np.float64)
    run = np.flatnonzero(ok)
    order = run[np.lexsort((j[run], i[run]))]
    workers = max(1, workers or os.cpu_count() or 1)
    chunks = [c for c in np.array_split(order, min(len(order), workers * 4) or 1) if len(c)]
    decisions = np.zeros(len(i), dtype=bool)
    python_decisions = np.zeros(len(i), dtype=bool)
    device_ms: list[float] = []
    if device == "browser":
        from .gsm_browser import run_chunk
    elif device == "python":
        run_chunk = _run_chunk
    else:
        raise ValueError(f"device must be python or browser, got {device!r}")
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(order), desc=f"gsm {variant} pairs", unit="pair")
    # forkserver, not fork: the parent has crypto thread pools (and maybe Ray's gRPC threads); a forked child
    # inherits whatever lock one of them held and hangs.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("forkserver")) as pool:
        futures = [(c, pool.submit(run_chunk, params, variant, {k: U[k] for k in set(i[c]) | set(j[c])},
                                   list(zip(i[c].tolist(), j[c].tolist())))) for c in chunks]
        for c, f in futures:
            rows = f.result()
            if device == "browser":
                decisions[c] = [r[0] for r in rows]
                python_decisions[c] = [r[1] for r in rows]
                device_ms.extend(r[2] for r in rows)
            else:
                decisions[c] = rows
            if bar:
                bar.update(len(c))
    if bar:
        bar.close()
    plain = ip[run] >= params.threshold
    extra = {
        "variant": variant,
        "m": params.m,
        "ell": params.ell,
        "zeta": params.zeta,
        "cos_threshold": params.cos_threshold,
        "cos_threshold_eer": cosine_threshold(U, found, i, j, genuine, params.m),
        "threshold_ip": params.threshold,
        "paillier_bits": params.paillier_bits,
        "pairs_run": int(len(run)),
        "mismatches": int((decisions[run] != plain).sum()),
        "accepted": int(decisions[run].sum()),
        "plain_accepted": int(plain.sum()),
        "protocol_seconds": round(time.perf_counter() - t0, 2),
        "protocol_workers": workers,
    }
    if device == "browser":
        differ = int((decisions[run] != python_decisions[run]).sum())
        extra.update({"device": "browser", "mismatches_vs_python_device": differ,
                      "browser_device_ms_median": round(float(np.median(device_ms)), 1) if device_ms else None})
    return dist, extra
