"""`privface eval --dataset lfw --protocol cryptomask`: CryptoMask's 1-bit identification (seed 001 §3–§4) on LFW.

The split is `identify_eval`'s (one image of every identity with ≥ 2 images enrolled; the other images of
those identities are mated probes, the images of single-image identities non-mated probes). The gallery is
enrolled through Alg. 1, every probe runs Alg. 2 + Alg. 3, and the verifier's bit ("some enrolled face has
cosine ≥ τ") is compared with

* ``bit_quantized``: the same decision in plaintext on the §3.4-quantised vectors, max ⟨q(a), q(b)⟩ ≥ ⌊τ·2^16⌉
  — what the protocol must reproduce exactly (``mismatches``);
* ``bit_plaintext``: max cos(a, b) ≥ τ on the float embeddings (``mismatches_plaintext``: the quantisation's cost).

A 1-bit answer has no rank: the figures are the detection rates — on mated probes (TPIR-like; the face that
reached τ need not be the right identity, CryptoMask cannot tell) and on non-mated probes (FPIR) — encrypted
and in plaintext. τ is ``--tau`` or, by default, the τ(N) a service would use for this gallery of N identities
(``scale.tau_curve``: calibrated on LFW identities held out of this evaluation), so ``detect_*_encrypted`` are also
``tpir_default_tau`` / ``fpir_default_tau``; the fixed per-backend default (``scale.default_tau``) is reported
beside it (``fixed_default_tau``, its rates in plaintext); ``tau_fpir_1e-2_plaintext`` is the threshold these
probes themselves would need.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from ..errors import PrivfaceError
from ..scale.default_tau import default_tau
from ..scale.tau_curve import describe, tau_for_n
from . import metrics
from .datasets import Dataset
from .identify_eval import _bar, _unit, select

DEFAULT_FPIR = 1e-2


def evaluate_cryptomask(ds: Dataset, spec: dict, *, tau: float | None = None, cache=True, workers: int | None = None,
                        probes: int | None = None, progress: bool = False, insecure_test_params: bool = False,
                        seed: int = 0) -> dict:
    """One JSON object (module docstring). ``probes``: a seeded sample of at most that many mated and that many
    non-mated probes instead of all."""
    from ..protocols.cryptomask import CryptoMask, encoding

    t0 = time.perf_counter()
    sel = select(ds, spec, probes=probes, seed=seed, cache=cache, workers=workers, progress=progress)
    g, mated, nonmated = sel.gallery, sel.mated, sel.nonmated
    if g.size < 2 or mated.size == 0 or nonmated.size == 0:
        raise PrivfaceError(f"{ds.name}: need ≥ 2 enrolled identities, a mated and a non-mated probe")
    x = _unit(np.nan_to_num(sel.vectors, nan=1.0))  # rows without a face are never used
    ids = np.asarray(ds.ids).astype(str)
    probe_rows, m = np.r_[mated, nonmated], mated.size
    cos = x[g] @ x[probe_rows].T
    best_plain = cos.max(axis=0)
    ids_g = ids[g]
    correct = ids_g[np.argmax(cos, axis=0)[:m]] == ids[mated]
    rates = metrics.tpir_at_fpir(best_plain[:m], correct, best_plain[m:], (DEFAULT_FPIR,))
    tau_probes = next(iter(rates.values()))["threshold"]
    backend = spec.get("name", "dlib-resnet128")
    try:  # the τ(N) a service would use for this gallery of N = g.size identities of one photo (scale.tau_curve)
        default, src = tau_for_n(backend, x.shape[1], "cryptomask", int(g.size))
        default_source = describe(src)
    except PrivfaceError as e:
        if tau is None:
            raise
        default, default_source = None, str(e)
    try:  # the fixed default (one τ per backend, scale.default_tau), reported beside it
        fixed, fixed_source = default_tau(backend, x.shape[1], "cryptomask")
    except PrivfaceError as e:
        fixed, fixed_source = None, str(e)
    tau, tau_source = (default, default_source) if tau is None else (tau, "--tau")
    cm = CryptoMask(x.shape[1], tau=tau, insecure_test_params=insecure_test_params)
    t = time.perf_counter()
    cm.enrol(x[g])
    enrol_s = time.perf_counter() - t

    qg, qp = encoding.quantize(x[g]), encoding.quantize(x[probe_rows])
    bit_quantized = (qg @ qp.T).max(axis=0) >= cm.ts
    bit_plain = best_plain >= tau
    bit_enc = np.empty(probe_rows.size, dtype=bool)
    times, comm = [], 0
    bar = _bar(progress, probe_rows.size, "cryptomask identification")
    for k, r in enumerate(probe_rows):
        t = time.perf_counter()
        run = cm.identify(x[r])
        times.append(time.perf_counter() - t)
        bit_enc[k], comm = run.match, run.comm_bytes
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()

    def rate(bits: np.ndarray, rows: slice) -> float:
        return round(float(bits[rows].mean()), 6)

    mat, non = slice(0, m), slice(m, None)
    return {"dataset": ds.name, "backend": spec.get("name", "dlib-resnet128"), "protocol": "cryptomask",
            "security_bits": 128 if not insecure_test_params else None, "tau": round(tau, 6), "tau_source": tau_source,
            "ts": cm.ts, "dim": x.shape[1], "images": len(ds.paths), "dataset_part": ds.meta.get("part"),
            "undetected": sel.undetected,
            "identities_enrolled": int(g.size), "mated_probes": int(m), "nonmated_probes": int(nonmated.size),
            "probes_sampled": probes,
            "mismatches": int((bit_enc != bit_quantized).sum()),
            "mismatches_plaintext": int((bit_enc != bit_plain).sum()),
            "detect_mated_encrypted": rate(bit_enc, mat), "detect_mated_plaintext": rate(bit_plain, mat),
            "detect_nonmated_encrypted": rate(bit_enc, non), "detect_nonmated_plaintext": rate(bit_plain, non),
            "rank1_plaintext": round(float(correct.mean()), 6),
            "tau_fpir_1e-2_plaintext": tau_probes, "default_tau": default, "default_tau_source": default_source,
            "fixed_default_tau": fixed, "fixed_default_tau_source": fixed_source,
            "tpir_fixed_default_tau_plaintext": None if fixed is None else rate(best_plain >= fixed, mat),
            "fpir_fixed_default_tau_plaintext": None if fixed is None else rate(best_plain >= fixed, non),
            "tpir_default_tau": rate(bit_enc, mat) if tau == default else None,
            "fpir_default_tau": rate(bit_enc, non) if tau == default else None,
            "enrol_s": round(enrol_s, 3), "identify_ms": round(1000 * statistics.median(times), 3),
            "storage_bytes": cm.cs.storage_bytes, "comm_bytes": comm, "ciphertexts": cm.cs.ciphertexts,
            "insecure_test_params": insecure_test_params, "embedded_now": sel.embedded_now,
            "seconds": round(time.perf_counter() - t0, 3)}
