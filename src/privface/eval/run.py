"""`privface eval`: embed a dataset, score its verification protocol, report the figures."""
from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import numpy as np

from ..templates import quantize
from . import metrics
from .cache import default_path as default_cache_path
from .datasets import Dataset
from .embed import embed_paths

MISSING = 1e9  # distance given to a pair whose image had no face: always rejected
PROTOCOLS = ("plain", "im2020", "gsm", "kolberg")


def pair_protocol(ds: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(i, j, genuine, folds) of the dataset's verification protocol (all pairs unless fixed)."""
    if ds.pairs is not None:
        return ds.pairs[:, 0], ds.pairs[:, 1], ds.genuine, ds.folds
    i, j, genuine = metrics.all_pairs(ds.ids)
    return i, j, genuine, None


def sample_pairs(genuine: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """Indices of n pairs: up to n/2 genuine, the rest impostors, uniform within each class (seeded)."""
    rng = np.random.default_rng(seed)
    gen, imp = np.flatnonzero(genuine), np.flatnonzero(~genuine)
    n_gen = min(len(gen), n // 2)
    n_imp = min(len(imp), n - n_gen)
    return np.sort(np.concatenate([rng.choice(gen, n_gen, replace=False), rng.choice(imp, n_imp, replace=False)]))


def distances(vectors: np.ndarray, found: np.ndarray, i: np.ndarray, j: np.ndarray, squared=False) -> np.ndarray:
    """Euclidean (or squared) distance per pair; MISSING where either image had no face."""
    v = np.where(found[:, None], vectors, 0).astype(np.float64)
    d = ((v[i] - v[j]) ** 2).sum(axis=1)
    d = d if squared else np.sqrt(d)
    return np.where(found[i] & found[j], d, MISSING)


def at_default_threshold(backend: str, d: np.ndarray, genuine: np.ndarray) -> dict:
    """FAR and FRR of the plaintext distances at the backend's shared default (``faces.thresholds``: the one
    `privface compare` and the protocols' defaults use), next to the dataset's own EER threshold."""
    from ..faces.thresholds import default_threshold

    point = default_threshold(backend)
    if point is None:
        return {"default_threshold": None, "far_at_default": None, "frr_at_default": None}
    far, frr = metrics.far_frr(d, genuine, point.distance)
    return {"default_threshold": point.distance, "far_at_default": round(far, 6), "frr_at_default": round(frr, 6)}


def evaluate(ds: Dataset, spec: dict, *, protocol: str = "plain", scale: int = 128, cache=True,
             workers: int | None = None, progress: bool = False, report: str | Path | None = None,
             pairs: int | None = None, protocol_params=None, checkpoint: str | Path | None = "auto",
             variant: str = "pi1", device: str = "python") -> dict:
    """Verification figures for `ds` under backend `spec`; keys as documented in docs/cli.md (JSON keys).

    protocol "plain" scores the quantized templates in the clear; "im2020" runs every pair (or a
    sample of ``pairs`` of them, half genuine) through the encrypted protocol (``im2020_eval``) and
    adds the protocol's keys, among them ``mismatches`` (decisions differing from the plaintext ones).
    ``checkpoint`` (im2020): a file to resume from and append to; "auto" is a file under the cache
    directory named by the settings (none with ``cache=False``); None turns checkpointing off.
    "gsm" runs ``variant`` (pi1, pi2, pi3) the same way (``gsm_eval``): its quantized scores are the cosine
    of m-bit fixed-norm templates, as the distance ζ² − ⟨u, w⟩. "kolberg" runs the scheme of
    ``protocol_params`` (KolbergParams: ckks, bfv, ntru) the same way (``kolberg_eval``).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r} is not available; choose one of {PROTOCOLS}")
    t0 = time.perf_counter()
    which = ds.meta.get("face", "largest")
    emb = embed_paths(ds.paths, spec, which=which, cache=cache, workers=workers, progress=progress)
    i, j, genuine, folds = pair_protocol(ds)
    pairs_total = len(i)
    if pairs is not None and pairs < pairs_total:
        keep = sample_pairs(genuine, pairs)
        i, j, genuine = i[keep], j[keep], genuine[keep]
        folds = None if folds is None else folds[keep]
    d = distances(emb.vectors, emb.found, i, j)
    res = metrics.summarize(d, genuine)
    q = quantize(np.nan_to_num(emb.vectors), scale=scale)
    dq = distances(q.astype(np.float64), emb.found, i, j, squared=True)
    extra = {}
    if protocol == "im2020":
        from ..protocols.im2020 import Im2020Params
        from .im2020_eval import protocol_scores

        params = protocol_params or Im2020Params()
        settings = {"dataset": ds.name, "backend": spec, "quantization_scale": scale, "pairs_sampled": pairs}
        if checkpoint == "auto":
            checkpoint = default_checkpoint(ds.name, spec, params, pairs) if cache else None
        dq, extra = protocol_scores(q, emb.found, i, j, dq, MISSING, params=params, workers=workers,
                                    progress=progress, checkpoint=checkpoint, settings=settings)
    elif protocol == "gsm":
        from .gsm_eval import protocol_scores

        dq, extra = protocol_scores(emb.vectors, emb.found, i, j, genuine, MISSING, params=protocol_params,
                                    variant=variant, workers=workers, progress=progress, device=device)
        scale = extra["zeta"]
    elif protocol == "kolberg":
        from ..protocols.kolberg import KolbergParams
        from .kolberg_eval import protocol_scores

        dq, extra = protocol_scores(emb.vectors, emb.found, ds.ids, i, j, genuine, MISSING,
                                    params=protocol_params or KolbergParams(backend=spec.get("name", "dlib-resnet128")),
                                    progress=progress,
                                    identification_probes=None if pairs is None else max(40, pairs // 40))
    res_q = metrics.summarize(dq, genuine)
    out = {
        "dataset": ds.name,
        "backend": spec.get("name", "dlib-resnet128"),
        "protocol": protocol,
        "face": which,
        "images": len(ds.paths),
        "subjects": ds.subjects,
        "undetected": emb.undetected,
        "genuine_pairs": res.genuine_pairs,
        "impostor_pairs": res.impostor_pairs,
        "eer": res.eer,
        "auc": res.auc,
        "threshold": res.eer_threshold,
        "eer_quantized": res_q.eer,
        # kolberg's CKKS decides on float distances: its protocol threshold is not an integer
        "threshold_quantized": (float(res_q.eer_threshold) if extra.get("scheme") == "ckks"
                                else int(np.floor(res_q.eer_threshold))),
        "quantization_scale": scale,
        **at_default_threshold(spec.get("name", "dlib-resnet128"), d, genuine),
        "tar_at_far": res.tar_at_far,
        "pairs_total": pairs_total,
        "pairs_sampled": pairs if pairs is not None and pairs < pairs_total else None,
        **extra,
    }
    if folds is not None:
        acc, std = metrics.kfold_accuracy(d, genuine, folds)
        out["accuracy_10fold"], out["accuracy_std"] = acc, std
    else:  # all-pairs datasets: closed-set identification, every image a probe against the rest
        out["rank1"] = _rank1(emb.vectors, emb.found, ds.ids)
    out["embedded_now"] = emb.computed
    out["seconds"] = round(time.perf_counter() - t0, 3)
    if report:
        metrics_title = f"{ds.name} · {out['backend']} · {protocol}"
        out["report"] = [str(p) for p in _report(report, d, genuine, metrics_title, out)]
    return out


def default_checkpoint(dataset: str, spec: dict, params, pairs: int | None) -> Path:
    """<cache dir>/checkpoints/im2020-<dataset>-<backend>-<level>-tau<τ>-<mode>-<pairs>-<options digest>.jsonl"""
    level = "toy" if params.insecure_test_params else f"{params.security_bits}bit"
    mode = params.mode if params.mode == "basic" else f"{params.mode}{params.circuit_bits}"
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    name = "-".join(["im2020", dataset, spec.get("name", "dlib-resnet128"), level, f"tau{params.tau}", mode,
                     "all" if pairs is None else f"{pairs}pairs", digest])
    return default_cache_path().parent / "checkpoints" / (re.sub(r"[^A-Za-z0-9_.+-]", "_", name) + ".jsonl")


def _rank1(vectors: np.ndarray, found: np.ndarray, ids: np.ndarray) -> float:
    """Leave-one-out rank-1 rate; an image without a face counts as a miss."""
    ids = np.asarray(ids)
    usable_found, usable_all = _usable(ids[found]), _usable(ids)
    if usable_found == 0:
        return 0.0
    return metrics.rank1_leave_one_out(vectors[found], ids[found]) * usable_found / usable_all


def _usable(ids: np.ndarray) -> int:
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    return int((counts[inverse] >= 2).sum())


def _report(out_dir, d, genuine, title, summary):
    from .report import write_report

    keep = d < MISSING
    return write_report(Path(out_dir), d[keep], genuine[keep], title, summary)
