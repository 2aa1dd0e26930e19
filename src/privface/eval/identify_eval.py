"""`privface eval --protocol idface|hers`: encrypted 1:N identification on a face dataset vs plaintext (seed 003 §5.2).

Split (``split``, ``select``). Identities with ≥ 2 images: the first image with a detected face is enrolled,
their other detected images are **mated** probes. Identities with one image (LFW has 4069) are never enrolled:
their detected images are **non-mated** probes. Images without a face take no part (``undetected``). With
``probes`` = N, a seeded sample of N mated and N non-mated candidate images (drawn before embedding, so only
the gallery and the sample are embedded).

Plaintext reference: the same embeddings, unit-normalised, matched by cosine ⟨x, y⟩ (seed 003's templates live
on S^{d−1}); top-1 = argmax, the first index on ties (as S_key's ``KeyServer.decide``).

Encrypted: the gallery is enrolled at S_local (``hers.LocalServer``) with HERS (Alg. 1) or IDFace.ENC_DB
(T_α after centring, ``protocols.idface.centring``, and — by default for d = 128 — the tight-frame lift into
D = ``DEFAULT_LIFT[d]`` dimensions, ``protocols.idface.lift``); each probe is one IP_DB at S_local, and the eval plays
S_key: it decrypts the probe's scores once and applies S_key's rule (argmax, accept iff best ≥ τ) at every
threshold τ, so one pass gives rank-1 and every TPIR operating point.

Figures: closed-set rank-1 over the mated probes (``rank1_plaintext``, ``rank1_encrypted``,
``accuracy_loss_pp`` = their difference in percentage points); ``mismatches``: probes (mated and non-mated)
whose encrypted top-1 differs from the plaintext top-1; open-set TPIR at FPIR 1e-2 and 1e-3
(``metrics.tpir_at_fpir``, thresholds set on each system's own non-mated scores). For idface also
``rank1_transformed``/``mismatches_transformed``: the plaintext ⟨T_α(x), T_β(y)⟩ argmax, which the decrypted
answer must equal exactly.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from ..errors import PrivfaceError
from ..protocols.idface.lift import DEFAULT_LIFT  # idface's default lift D per d; ``lift`` = 0 turns it off
from . import metrics
from .datasets import Dataset
from .embed import embed_paths

PROTOCOLS = ("idface", "hers")
CENTRINGS = ("shipped", "gallery", "none")
FPIR_TARGETS = (1e-2, 1e-3)


def split(ids: np.ndarray, found: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gallery, mated, non-mated) image indices when every image was embedded; see the module docstring."""
    ids = np.asarray(ids).astype(str)
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    multi = counts[inverse] >= 2
    gallery: dict[str, int] = {}
    for r in np.flatnonzero(found & multi):
        gallery.setdefault(ids[r], r)
    g = np.array(sorted(gallery.values()), dtype=np.int64)
    mated = np.setdiff1d(np.flatnonzero(found & multi), g)
    return g, mated, np.flatnonzero(found & ~multi)


@dataclass
class Selection:
    """Embedded rows (NaN where not embedded or no face), the split, and how many chosen images had no face."""

    vectors: np.ndarray
    gallery: np.ndarray
    mated: np.ndarray
    nonmated: np.ndarray
    undetected: int
    embedded_now: int


def select(ds: Dataset, spec: dict, *, probes: int | None = None, seed: int = 0, **embed_kw) -> Selection:
    """``split`` on the images it needs: with ``probes`` = None every image is embedded; otherwise the gallery
    (first image with a face of each identity with ≥ 2 images, searched in order) and a seeded sample of at
    most ``probes`` mated and ``probes`` non-mated candidate images — only those are embedded."""
    which = ds.meta.get("face", "largest")
    n = len(ds.paths)
    if probes is None:
        emb = embed_paths(ds.paths, spec, which=which, **embed_kw)
        return Selection(emb.vectors, *split(ds.ids, emb.found), emb.undetected, emb.computed)
    ids = np.asarray(ds.ids).astype(str)
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    multi = counts[inverse] >= 2
    order: dict[str, list[int]] = {}
    for r in np.flatnonzero(multi):
        order.setdefault(ids[r], []).append(int(r))
    vectors = np.full((n, 0), np.nan, dtype=np.float32)
    gallery: dict[str, int] = {}
    tried: set[int] = set()
    undetected = computed = 0

    def embed(rows: list[int]) -> np.ndarray:
        nonlocal vectors, undetected, computed
        emb = embed_paths([ds.paths[r] for r in rows], spec, which=which, **embed_kw)
        if vectors.shape[1] == 0:
            vectors = np.full((n, emb.vectors.shape[1]), np.nan, dtype=np.float32)
        vectors[rows] = emb.vectors
        undetected += emb.undetected
        computed += emb.computed
        return emb.found

    for k in range(int(counts.max())):  # round k: the k-th image of identities without a gallery face yet
        rows = [imgs[k] for sid, imgs in order.items() if sid not in gallery and k < len(imgs)]
        if not rows:
            break
        tried.update(rows)
        for r, ok in zip(rows, embed(rows)):
            if ok:
                gallery[ids[r]] = r
    pools = [np.array(sorted(set(np.flatnonzero(multi & np.isin(ids, list(gallery))).tolist()) - tried)),
             np.flatnonzero(~multi)]
    chosen = [_sample(pool, probes, seed + i) for i, pool in enumerate(pools)]
    rows = sorted(set(np.concatenate(chosen).tolist()))
    if rows:
        embed(rows)
    found = ~np.isnan(vectors).any(axis=1) if vectors.shape[1] else np.zeros(n, bool)
    return Selection(vectors, np.array(sorted(gallery.values()), dtype=np.int64),
                     chosen[0][found[chosen[0]]], chosen[1][found[chosen[1]]], undetected, computed)


def _sample(idx: np.ndarray, limit: int | None, seed: int) -> np.ndarray:
    if limit is None or limit >= idx.size:
        return idx.astype(np.int64)
    return np.sort(np.random.default_rng(seed).choice(idx, limit, replace=False)).astype(np.int64)


def _unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _deploy(protocol: str, scheme: str, dim: int, beta: int | None, mean, insecure: bool, lift: int | None = None):
    """(public scheme, secret scheme, description keys)."""
    if protocol == "hers":
        if scheme != "ckks":
            raise PrivfaceError("hers runs over CKKS only")
        from ..crypto.lattice import generate_lattice_keypair
        from ..protocols.hers import HERS, HERS_CKKS, HERSKey

        pub, sec = generate_lattice_keypair(_toy() if insecure else HERS_CKKS, insecure_test_params=insecure)
        return HERS(pub, dim), HERSKey(sec), {"scheme": "ckks", "security_bits": HERS_CKKS.security_bits}
    from ..protocols.idface import PARAMETER_SETS, IDFaceParams

    width = lift or dim
    if width in PARAMETER_SETS and beta is None:
        beta = PARAMETER_SETS[width][0]  # β = α: the most accurate of the paper's settings (Table 3)
    p = IDFaceParams.for_dim(dim, beta, mean, lift)
    info = {"scheme": scheme, "alpha": p.alpha, "beta": p.beta, "lift": p.lift,
            "lift_seed": None if p.lift is None else p.lift_seed}
    if scheme == "ckks":
        from ..crypto.lattice import generate_lattice_keypair
        from ..protocols.idface import IDFACE_CKKS, IDFaceCKKS, IDFaceCKKSKey

        pub, sec = generate_lattice_keypair(_toy() if insecure else IDFACE_CKKS, insecure_test_params=insecure)
        return IDFaceCKKS(pub, p), IDFaceCKKSKey(sec, p), {**info, "security_bits": IDFACE_CKKS.security_bits}
    if scheme == "paillier":
        from ..crypto.paillier import generate_paillier_keypair
        from ..protocols.idface import IDFacePaillier, IDFacePaillierKey

        pk, sk = generate_paillier_keypair(512 if insecure else 2048, insecure_test_params=insecure)
        return IDFacePaillier(pk, p), IDFacePaillierKey(sk, p), {**info, "security_bits": 112}
    raise PrivfaceError(f"idface runs over ckks or paillier, not {scheme!r}")


def _toy():
    from ..crypto.lattice import CKKS, LatticeParams

    return LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36)


def _centring(choice: str, backend: str, gallery: np.ndarray) -> tuple[np.ndarray | None, str]:
    from ..protocols.idface.centring import mean_of, shipped_mean, shipped_provenance

    if choice == "none":
        return None, "none"
    if choice == "gallery":
        return mean_of(gallery), "gallery (mean of the enrolled templates, computed at enrolment)"
    if choice == "shipped":
        prov = shipped_provenance(backend)
        return shipped_mean(backend), f"shipped ({prov['dataset']}, {prov['images']} images)"
    raise PrivfaceError(f"--centring must be one of {CENTRINGS}")


def _message_bytes(msg, public) -> int:
    return msg.nbytes if hasattr(msg, "arrays") else msg.nbytes(public.public)


def evaluate_identification(ds: Dataset, spec: dict, *, protocol: str = "idface", scheme: str = "ckks",
                            beta: int | None = None, centring: str = "shipped", lift: int | None = None, cache=True,
                            workers: int | None = None, probes: int | None = None, progress: bool = False,
                            insecure_test_params: bool = False, seed: int = 0) -> dict:
    """One JSON object (docs: `privface eval --protocol idface|hers`). ``probes``: a seeded sample of at most
    that many mated and that many non-mated probes instead of all. ``lift``: idface's lift dimension D, None
    for ``DEFAULT_LIFT`` of the template dimension, 0 for none."""
    from ..protocols.hers import LocalServer

    if protocol not in PROTOCOLS:
        raise PrivfaceError(f"protocol {protocol!r}: choose one of {PROTOCOLS}")
    if protocol == "hers" and (beta is not None or centring != "shipped" or lift is not None):
        raise PrivfaceError("--beta, --centring and --lift apply to --protocol idface only")
    if lift is not None and lift < 0:
        raise PrivfaceError("--lift must be 0 (off) or a dimension D")
    t0 = time.perf_counter()
    backend = spec.get("name", "dlib-resnet128")
    sel = select(ds, spec, probes=probes, seed=seed, cache=cache, workers=workers, progress=progress)
    g, mated, nonmated = sel.gallery, sel.mated, sel.nonmated
    if g.size < 2 or mated.size == 0:
        raise PrivfaceError(f"{ds.name}: need ≥ 2 enrolled identities and a mated probe")
    x = _unit(np.nan_to_num(sel.vectors, nan=1.0))  # rows without a face are never used
    ids = np.asarray(ds.ids).astype(str)
    dim = x.shape[1]
    mean, centring_desc = (None, None) if protocol == "hers" else _centring(centring, backend, x[g])
    if protocol == "idface":
        lift = DEFAULT_LIFT.get(dim) if lift is None else (lift or None)
    public, secret, info = _deploy(protocol, scheme, dim, beta, mean, insecure_test_params, lift)
    local = LocalServer(public)
    t = time.perf_counter()
    local.enrol([ids[r] for r in g], x[g])
    enrol_s = time.perf_counter() - t

    plain = x[g] @ x[np.r_[mated, nonmated]].T  # (gallery, probes) cosine
    probe_rows = np.r_[mated, nonmated]
    top_plain, best_plain = np.argmax(plain, axis=0), plain.max(axis=0)
    top_enc = np.empty(probe_rows.size, dtype=np.int64)
    best_enc = np.empty(probe_rows.size, dtype=np.float64)
    times, comm = [], 0
    bar = _bar(progress, probe_rows.size, f"{protocol} identification")
    for k, r in enumerate(probe_rows):
        t = time.perf_counter()
        msg = local.identify_request(x[r])
        scores = secret.decrypt_scores(msg)  # the eval plays S_key (see module docstring)
        top_enc[k] = int(np.argmax(scores))
        times.append(time.perf_counter() - t)
        best_enc[k] = float(scores[top_enc[k]])
        comm = _message_bytes(msg, public)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()

    m = mated.size
    truth = ids[mated]
    correct_plain, correct_enc = ids[g][top_plain[:m]] == truth, ids[g][top_enc[:m]] == truth
    r1p, r1e = float(correct_plain.mean()), float(correct_enc.mean())
    out = {"dataset": ds.name, "backend": backend, "protocol": protocol, **info,
           "centring": centring_desc, "dim": dim, "images": len(ds.paths), "dataset_part": ds.meta.get("part"),
           "undetected": sel.undetected,
           "identities_enrolled": int(g.size), "mated_probes": int(m), "nonmated_probes": int(nonmated.size),
           "probes_sampled": probes, "rank1_plaintext": r1p, "rank1_encrypted": r1e,
           "accuracy_loss_pp": round(100 * (r1p - r1e), 4),
           "mismatches": int((top_plain != top_enc).sum()),
           "mismatches_mated": int((top_plain[:m] != top_enc[:m]).sum())}
    if protocol == "idface":
        zg = public.params.enrol_transform(x[g]).astype(np.int64)
        zq = public.params.query_transform(x[probe_rows]).astype(np.int64)
        top_t = np.argmax(zg @ zq.T, axis=0)
        out["rank1_transformed"] = float((ids[g][top_t[:m]] == truth).mean())
        out["mismatches_transformed"] = int((top_t != top_enc).sum())
    if nonmated.size:
        out["tpir_plaintext"] = metrics.tpir_at_fpir(best_plain[:m], correct_plain, best_plain[m:], FPIR_TARGETS)
        out["tpir_encrypted"] = metrics.tpir_at_fpir(best_enc[:m], correct_enc, best_enc[m:], FPIR_TARGETS)
    key = "hers" if protocol == "hers" else _idface_key(centring, public.params)
    out.update(at_default_tau(backend, dim, key, best_enc, correct_enc, m, int(g.size)))
    plain_times = []
    for r in probe_rows[:200]:
        t = time.perf_counter()
        int(np.argmax(x[g] @ x[r]))
        plain_times.append(time.perf_counter() - t)
    out.update({"enrol_s": round(enrol_s, 3), "identify_ms": round(1000 * statistics.median(times), 3),
                "plaintext_identify_ms": round(1000 * statistics.median(plain_times), 4),
                "storage_bytes": local.storage_bytes, "comm_bytes": comm, "blocks": len(local.blocks),
                "insecure_test_params": insecure_test_params, "embedded_now": sel.embedded_now,
                "seconds": round(time.perf_counter() - t0, 3)})
    return out


def _idface_key(centring: str, params) -> str | None:
    from ..scale.default_tau import idface_key

    return idface_key(centring, params.lift, params.beta) if centring in ("shipped", "none") else None


def at_default_tau(backend: str, dim: int, key: str | None, best: np.ndarray, correct: np.ndarray, m: int,
                   n: int | None = None) -> dict:
    """The encrypted system's TPIR (mated: right identity and best ≥ τ) and FPIR (non-mated: best ≥ τ) at the
    default τ a service would use for this gallery — ``default_tau``: τ(N) for its ``n`` identities of one photo
    (``scale.tau_curve``, calibrated on held-out identities, not on these probes) — and at the fixed default of
    ``scale.default_tau`` (``fixed_default_tau``, one τ per backend for a 1 370-identity gallery); None where no
    default exists."""
    from ..scale.default_tau import default_tau
    from ..scale.tau_curve import describe, tau_for_n

    out: dict = {}
    for name, pick in (("default_tau", lambda: _tau_n(tau_for_n(backend, dim, key, n), describe)),
                       ("fixed_default_tau", lambda: default_tau(backend, dim, key))):
        try:
            tau, source = pick() if key and (n or name == "fixed_default_tau") else (None, "no default for this "
                                                                                          "setting")
        except PrivfaceError as e:
            tau, source = None, str(e)
        hit = best >= tau if tau is not None else None
        out.update({name: tau, f"{name}_source": source,
                    f"tpir_{name}": None if hit is None else round(float((hit[:m] & correct).mean()), 6),
                    f"fpir_{name}": None if hit is None or best.size <= m else round(float(hit[m:].mean()), 6)})
    return out


def _tau_n(got: tuple[float, dict], describe) -> tuple[float, str]:
    return got[0], describe(got[1])


def _bar(progress: bool, total: int, desc: str):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="probe")
