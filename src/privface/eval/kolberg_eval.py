"""`privface eval --protocol kolberg --scheme ckks|bfv|ntru`: every pair's decision through the encrypted protocol.

Templates (seed 002 §2.1): float embeddings (CKKS), ⌊128·x⌋ (BFV), LSSC bits (NTRU); ``protocols.kolberg.protect``.
Verification: each image is enrolled once at the DB server as reference ``img<i>`` and encrypted once as a probe;
pair (i, j) is a ``VerifyRequest`` for ``img<i>`` with probe j, decided by the auth server. τ: the backend's shared
default (``KolbergParams.tau``, ``faces.thresholds``), or ``KolbergParams.threshold``; the plaintext EER threshold of
the same pairs only for a backend without a default (``threshold_source`` says which). ``mismatches``: decisions
that differ from ``plaintext distance ≤ τ``. CKKS distances are noise-flooded (σ ≈ 0.001), so a pair within the
documented precision band |d − τ| ≤ 6σ + CKKS_DISTANCE_ERROR may flip; those are counted in ``mismatches_in_band``,
not in ``mismatches``. Identification (rank-1, closed set): the first image of each subject is enrolled under its
subject id, every other image is an ``IdentifyRequest`` (with ``--pairs N``: a seeded sample of max(40, N // 40)
of them); τ = ∞ so the DB server always returns the top match.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..crypto.lattice import CKKS_DISTANCE_ERROR, flood_sigma
from ..protocols.kolberg import AuthServer, Client, DBServer, KolbergParams, VerifyRequest, plaintext_distance, protect
from ..store.sqlite import SQLiteStore
from . import metrics


def _deploy(params: KolbergParams):
    auth = AuthServer(params)
    pk = auth.public_key()
    return Client(params, pk), DBServer(params, SQLiteStore(None), pk, auth.decide)


def _bar(progress: bool, total: int, desc: str):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="req")


def protocol_scores(vectors: np.ndarray, found: np.ndarray, ids: np.ndarray, i: np.ndarray, j: np.ndarray,
                    genuine: np.ndarray, missing: float, *, params: KolbergParams, progress: bool = False,
                    identification_probes: int | None = None) -> tuple[np.ndarray, dict]:
    """(plaintext distance of the scheme's templates per pair, extra output keys incl. ``mismatches``)."""
    t0 = time.perf_counter()
    params = dataclasses.replace(params, dims=vectors.shape[1])
    T = {r: protect(params, vectors[r]) for r in np.flatnonzero(found)}
    ok = found[i] & found[j]
    dq = np.array([plaintext_distance(params, T[a], T[b]) if k else missing for a, b, k in zip(i, j, ok)], dtype=float)
    tau, source = _threshold(params, dq[ok], genuine[ok])
    params = dataclasses.replace(params, threshold=tau)
    band = 6 * flood_sigma() + CKKS_DISTANCE_ERROR if params.scheme == "ckks" else 0.0

    client, db = _deploy(params)
    used = sorted(set(i[ok].tolist()) | set(j[ok].tolist()))
    for r in used:
        db.enrol(client.enrol(f"img{r}", vectors[r]))
    probes = {r: client.verify("x", vectors[r]).probe for r in used}
    t_pairs = time.perf_counter()
    bar = _bar(progress, int(ok.sum()), f"kolberg {params.scheme} pairs")
    mismatches = in_band = pairs_in_band = 0
    for a, b, d in zip(i[ok], j[ok], dq[ok]):
        accepted = db.verify(VerifyRequest(f"img{a}", params.backend, probes[b])).accepted
        near = abs(d - tau) <= band
        pairs_in_band += near
        if accepted != (d <= tau):
            in_band += near
            mismatches += not near
        if bar is not None:
            bar.update()
    pair_seconds = time.perf_counter() - t_pairs
    if bar is not None:
        bar.close()
    extra = {"scheme": params.scheme, "security_bits": security_bits(params.scheme), "threshold_protocol": tau,
             "threshold_source": source,
             "pairs_run": int(ok.sum()), "mismatches": mismatches, "mismatches_in_band": in_band,
             "pairs_in_band": pairs_in_band, "precision_band": band,
             "ms_per_verification": round(1000 * pair_seconds / max(int(ok.sum()), 1), 2)}
    extra.update(_identification(vectors, found, ids, T, params, progress, identification_probes))
    extra["protocol_seconds"] = round(time.perf_counter() - t0, 3)
    return dq, extra


def _threshold(params: KolbergParams, dq: np.ndarray, genuine: np.ndarray) -> tuple[float, str]:
    """(τ, where it came from): the given one, else the backend's shared default (``faces.thresholds``, set on
    held-out LFW identities, never on these pairs); only a backend without one (a trained PCA, a user's ONNX model)
    falls back to the plaintext EER threshold of these pairs, and says so."""
    if params.threshold is not None:
        return float(params.threshold), "given"
    try:
        return float(params.tau), f"{params.backend} default (faces.thresholds)"
    except ValueError:
        _, tau = metrics.eer(dq, genuine)
        tau = float(np.floor(tau)) if params.scheme != "ckks" else float(tau)
        return tau, f"plaintext EER threshold of these pairs (no default for backend {params.backend!r})"


def security_bits(scheme: str) -> int:
    from ..protocols.kolberg import DESCRIPTION

    return next(lvl["security_bits"] for lvl in DESCRIPTION["security_levels"] if lvl["scheme"] == scheme)


def _identification(vectors, found, ids, T, params: KolbergParams, progress: bool, limit: int | None) -> dict:
    """Closed-set rank-1: gallery = first image of each subject, probes = the others with a face (a seeded
    sample of ``limit`` of them when given)."""
    ids = np.asarray(ids).astype(str)
    gallery: dict[str, int] = {}
    for r in np.flatnonzero(found):
        gallery.setdefault(ids[r], r)
    probes = [r for r in np.flatnonzero(found) if gallery[ids[r]] != r]
    if limit is not None and limit < len(probes):
        probes = sorted(np.random.default_rng(0).choice(probes, limit, replace=False).tolist())
    params = dataclasses.replace(params, threshold=float("inf"))
    band = 6 * flood_sigma() + CKKS_DISTANCE_ERROR if params.scheme == "ckks" else 0.0
    client, db = _deploy(params)
    for sid, r in gallery.items():
        db.enrol(client.enrol(f"subj-{sid}", vectors[r]))
    hits = plain_hits = mismatches = 0
    bar = _bar(progress, len(probes), f"kolberg {params.scheme} identification")
    t0 = time.perf_counter()
    for p in probes:
        got = db.identify(client.identify(vectors[p])).subject_id.removeprefix("subj-")
        dist = {sid: plaintext_distance(params, T[r], T[p]) for sid, r in gallery.items()}
        best = min(dist.values())
        hits += got == ids[p]
        plain_hits += dist[ids[p]] == best and list(dist.values()).count(best) == 1
        mismatches += dist[got] - best > band  # the returned subject is not a nearest one
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    n = max(len(probes), 1)
    return {"rank1_encrypted": hits / n, "rank1_plaintext_templates": plain_hits / n, "rank1_mismatches": mismatches,
            "identification_probes": len(probes), "gallery_size": len(gallery),
            "ms_per_identification": round(1000 * (time.perf_counter() - t0) / n, 2)}
