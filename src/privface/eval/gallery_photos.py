"""`privface eval --gallery-photos K`: 1:N with K photos fused per identity, at the gallery's default τ(N).

ORL (``orl_split``): each of the 40 subjects is enrolled with its first K photos with a face (K = 1, or K > 1
fused: the normalised mean of the unit embeddings, ``fusion.fuse``); their other photos are the mated probes; the
non-mated probes are a seeded sample of LFW images of the evaluation part (people outside the calibration set,
``datasets.lfw_calibration``), none of whom is in ORL.

LFW (``lfw_split``, evaluation part only): identities with ≥ 4 photos with a face are enrolled with their first
K photos and probed with their photos after the third (the same probes for K = 1 and 3, so the two enrolments are
compared on one probe set); identities with 2–3 photos fill the gallery (enrolled the same way, never probed);
identities with one photo are the non-mated probes. Galleries of N = 100 and 1 000 (seeded samples: the probed
identities first, then fillers) and all are scored.

Scores are the ones S_key decides on (hers: the cosine; idface: the integer ⟨T_α(x), T_β(y)⟩ after the shipped
centring and the default lift; cryptomask: the verifier's bit). The encrypted path is the real scheme run as
``identify_eval`` runs it — enrolled at S_local, one IP_DB per probe, decrypted as S_key (for cryptomask Alg. 2 +
Alg. 3 per probe) — on every probe or, with ``encrypted_probes``, a seeded sample; the plaintext scores on every
probe. Figures: ``tpir_default_tau`` / ``fpir_default_tau`` at τ(N) for N identities of K photos
(``scale.tau_curve``: the K-photo curve; ``one_photo_curve_tau``: what the one-photo curve would give) from the
encrypted run when it covered every probe, FNIR at FPIR 0.003 (threshold on these non-mated probes) in plaintext
and encrypted. For N below the whole gallery, ``fpir_default_tau_plaintext_over_galleries`` is the plaintext FPIR
at τ(N) over 300 seeded N-identity galleries (mean, 5 % and 95 % points): the gallery scored above is one draw.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PrivfaceError
from ..protocols.idface.lift import DEFAULT_LIFT
from . import metrics
from .datasets import load_identification
from .embed import embed_paths
from .fusion import fuse
from .identify_eval import _bar, _deploy, _idface_key, _unit

FPIR = 3e-3
LFW_MIN_PHOTOS = 4
LFW_SIZES = (100, 1000)
GALLERY_DRAWS = 300  # seeded N-identity galleries behind ``fpir_default_tau_plaintext_over_galleries``


def _rows_by_id(ids: np.ndarray, found: np.ndarray) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in np.flatnonzero(found):
        out.setdefault(str(ids[r]), []).append(int(r))
    return out


def orl_split(x: np.ndarray, ids: np.ndarray, found: np.ndarray, photos: int):
    """(gallery ids, templates, mated probe rows, their gallery index)."""
    by = _rows_by_id(ids, found)
    names = sorted(by, key=lambda s: (len(s), s))
    names = [n for n in names if len(by[n]) > photos]
    templates = np.stack([fuse(x[by[n][:photos]], "mean") for n in names])
    mated = [(r, k) for k, n in enumerate(names) for r in by[n][photos:]]
    return names, templates, np.array([r for r, _ in mated]), np.array([k for _, k in mated])


def lfw_split(x: np.ndarray, ids: np.ndarray, found: np.ndarray, photos: int):
    """(gallery ids, templates, mated rows, their gallery index, non-mated rows, number of probed identities);
    the probed identities come first in the gallery."""
    by = _rows_by_id(ids, found)
    names, counts = np.unique(ids, return_counts=True)
    single = set(names[counts == 1].tolist())
    probed = sorted(n for n, r in by.items() if len(r) >= LFW_MIN_PHOTOS)
    fillers = sorted(n for n, r in by.items() if len(r) < LFW_MIN_PHOTOS and n not in single)
    gallery = probed + fillers
    templates = np.stack([fuse(x[by[n][:photos]], "mean") for n in gallery])
    mated = [(r, k) for k, n in enumerate(probed) for r in by[n][3:]]
    nonmated = np.array(sorted(r for n in single if n in by for r in by[n]), dtype=np.int64)
    return gallery, templates, np.array([r for r, _ in mated]), np.array([k for _, k in mated]), nonmated, len(probed)


class Runner:
    """The scheme under test: its plaintext scores (what S_key decides on) and its encrypted run."""

    def __init__(self, protocol: str, scheme: str, dim: int, backend: str, insecure: bool) -> None:
        from ..protocols.idface.centring import shipped_mean

        self.protocol, self.scheme, self.dim, self.backend, self.insecure = protocol, scheme, dim, backend, insecure
        if protocol == "cryptomask":
            self.key, self.info = "cryptomask", {"scheme": "bfv"}
            return
        mean = None if protocol == "hers" else shipped_mean(backend)
        lift = DEFAULT_LIFT.get(dim) if protocol == "idface" else None
        self.public, self.secret, self.info = _deploy(protocol, scheme, dim, None, mean, insecure, lift)
        self.key = "hers" if protocol == "hers" else _idface_key("shipped", self.public.params)

    def plain(self, templates: np.ndarray, probes: np.ndarray) -> np.ndarray:
        """(probes, gallery) scores in the clear."""
        if self.protocol == "idface":
            p = self.public.params
            return (p.query_transform(probes).astype(np.float64) @ p.enrol_transform(templates).astype(np.float64).T)
        return probes @ templates.T

    def encrypted(self, templates: np.ndarray, probes: np.ndarray, tau: float, progress: bool):
        """(probes, gallery) decrypted scores (hers, idface) or the verifier's bits (cryptomask), and the median ms."""
        t_all = []
        bar = _bar(progress, len(probes), f"{self.protocol} encrypted")
        if self.protocol == "cryptomask":
            from ..protocols.cryptomask import CryptoMask

            cm = CryptoMask(self.dim, tau=tau, insecure_test_params=self.insecure)
            cm.enrol(templates)
            out = np.empty(len(probes), dtype=bool)
            for k, y in enumerate(probes):
                t = time.perf_counter()
                out[k] = cm.identify(y).match
                t_all.append(time.perf_counter() - t)
                if bar is not None:
                    bar.update()
        else:
            from ..protocols.hers import LocalServer

            local = LocalServer(self.public)
            local.enrol([str(i) for i in range(len(templates))], templates)
            out = np.empty((len(probes), len(templates)), dtype=np.float64)
            for k, y in enumerate(probes):
                t = time.perf_counter()
                out[k] = np.asarray(self.secret.decrypt_scores(local.identify_request(y)))[:len(templates)]
                t_all.append(time.perf_counter() - t)
                if bar is not None:
                    bar.update()
        if bar is not None:
            bar.close()
        return out, round(1000 * float(np.median(t_all)), 3) if t_all else None


def _rates(best: np.ndarray, correct: np.ndarray, m: int, tau: float) -> tuple[float, float]:
    hit = best >= tau
    return round(float((hit[:m] & correct).mean()), 6), round(float(hit[m:].mean()), 6)


def _fnir(best: np.ndarray, correct: np.ndarray, m: int) -> dict:
    r = metrics.tpir_at_fpir(best[:m], correct, best[m:], (FPIR,))
    r = next(iter(r.values()))
    return {"fnir": round(1 - r["tpir"], 6), "fpir": round(r["fpir"], 6), "threshold": r["threshold"]}


def _gallery_cols(rng: np.random.Generator, n: int, n_probed: int, total: int) -> np.ndarray:
    """A seeded N-identity gallery: the probed identities first, then fillers."""
    if n == total:
        return np.arange(n)
    if n <= n_probed:
        return np.sort(rng.choice(n_probed, n, replace=False))
    return np.r_[np.arange(n_probed), np.sort(rng.choice(np.arange(n_probed, total), n - n_probed, replace=False))]


def _fpir_over_galleries(hit: np.ndarray, n: int, n_probed: int, seed: int) -> dict:
    """FPIR at τ(N) averaged over ``GALLERY_DRAWS`` seeded N-identity galleries (``hit``: non-mated probe × gallery
    identity, score ≥ τ): what τ(N) gives a gallery of N of these identities, rather than the one drawn."""
    rng = np.random.default_rng(seed)
    f = np.array([hit[:, _gallery_cols(rng, n, n_probed, hit.shape[1])].any(axis=1).mean()
                  for _ in range(GALLERY_DRAWS)])
    return {"mean": round(float(f.mean()), 6), "q05": round(float(np.quantile(f, 0.05)), 6),
            "q95": round(float(np.quantile(f, 0.95)), 6), "draws": GALLERY_DRAWS}


def _sample(n: int, limit: int | None, seed: int) -> np.ndarray:
    if limit is None or limit >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, limit, replace=False))


def evaluate(dataset: str, spec: dict, *, protocol: str = "hers", scheme: str = "ckks", photos: int = 1,
             nonmated: int = 3000, encrypted_probes: int | None = None, data_root=None, cache: bool = True,
             workers: int | None = None, progress: bool = False, insecure_test_params: bool = False,
             seed: int = 0) -> dict:
    """One JSON object (module docstring)."""
    from ..scale.tau_curve import describe, tau_for_n

    if photos < 1:
        raise PrivfaceError("--gallery-photos must be ≥ 1")
    if protocol not in ("hers", "idface", "cryptomask"):
        raise PrivfaceError("--gallery-photos goes with --protocol hers, idface or cryptomask")
    if dataset not in ("orl", "lfw"):
        raise PrivfaceError("--gallery-photos evaluates --dataset orl or lfw")
    if dataset == "lfw" and (protocol == "cryptomask" or photos > 3):
        raise PrivfaceError("--dataset lfw --gallery-photos: --protocol hers or idface, 1 to 3 photos")
    t0 = time.perf_counter()
    backend = spec.get("name", "dlib-resnet128")
    kw = {"cache": cache, "workers": workers, "progress": progress}
    lfw = load_identification("lfw", data_root)
    if dataset == "orl":
        orl = load_identification("orl", data_root)
        emb = embed_paths(orl.paths, spec, which=orl.meta.get("face", "largest"), **kw)
        x = _unit(np.nan_to_num(emb.vectors, nan=1.0))
        names, templates, mated, owner = orl_split(x, np.asarray(orl.ids).astype(str), emb.found, photos)
        pick = _sample(len(lfw.paths), nonmated, seed)
        nemb = embed_paths([lfw.paths[i] for i in pick], spec, which="center", **kw)
        probes = np.r_[x[mated], _unit(np.nan_to_num(nemb.vectors, nan=1.0))[nemb.found]]
        undetected, sizes, n_probed = emb.undetected + nemb.undetected, [len(names)], len(names)
    else:
        emb = embed_paths(lfw.paths, spec, which="center", **kw)
        x = _unit(np.nan_to_num(emb.vectors, nan=1.0))
        names, templates, mated, owner, non, n_probed = lfw_split(x, np.asarray(lfw.ids).astype(str), emb.found,
                                                                  photos)
        probes = np.r_[x[mated], x[non]]
        undetected = emb.undetected
        sizes = sorted({*(n for n in LFW_SIZES if n < len(names)), len(names)})
    m = len(mated)
    run = Runner(protocol, scheme, x.shape[1], backend, insecure_test_params)
    full_tau, full_src = tau_for_n(backend, x.shape[1], run.key, len(names), photos=photos)
    enc_rows = np.r_[_sample(m, encrypted_probes, seed), m + _sample(len(probes) - m, encrypted_probes, seed + 1)]
    enc, enc_ms = run.encrypted(templates, probes[enc_rows], full_tau, progress)
    cosine = probes @ templates.T
    plain = run.plain(templates, probes) if protocol == "idface" else cosine
    rng = np.random.default_rng(seed)
    out = {"dataset": dataset, "backend": backend, "protocol": protocol, **run.info, "gallery_photos": photos,
           "fusion": "normalised mean of unit embeddings" if photos > 1 else None, "undetected": undetected,
           "identities_enrolled": len(names), "mated_probes": m, "nonmated_probes": len(probes) - m,
           "nonmated_source": "lfw evaluation part (outside the calibration identities)",
           "encrypted_probes": int(enc_rows.size), "encrypted_all": bool(enc_rows.size == len(probes)),
           "encrypted_identify_ms": enc_ms, "insecure_test_params": insecure_test_params, "rows": []}
    for n in sizes:
        cols = _gallery_cols(rng, n, n_probed, len(names))  # the probed identities first, then fillers (seeded)
        keep = np.isin(owner, cols)  # mated probes of identities in this gallery
        rows = np.r_[np.flatnonzero(keep), np.arange(m, len(probes))]
        mk = int(keep.sum())
        tau, src = ((full_tau, full_src) if n == len(names)
                    else tau_for_n(backend, x.shape[1], run.key, n, photos=photos))
        row: dict = {"n": int(n), "mated_probes": mk, "default_tau": tau, "default_tau_source": describe(src)}
        s = plain[np.ix_(rows, cols)]
        best, correct = s.max(axis=1), cols[s.argmax(axis=1)][:mk] == owner[keep]
        row["tpir_default_tau_plaintext"], row["fpir_default_tau_plaintext"] = _rates(best, correct, mk, tau)
        if n < len(names):  # one seeded gallery is one draw: FPIR's spread over galleries of N of these identities
            row["fpir_default_tau_plaintext_over_galleries"] = _fpir_over_galleries(plain[m:] >= tau, n, n_probed,
                                                                                   seed + 2 + n)
        if photos > 1:  # τ(N) from the one-photo curve, as before the calibration per photo count
            one = tau_for_n(backend, x.shape[1], run.key, n)[0]
            row["one_photo_curve_tau"] = one
            row["tpir_one_photo_curve_tau_plaintext"], row["fpir_one_photo_curve_tau_plaintext"] = _rates(
                best, correct, mk, one)
        if protocol != "cryptomask":
            row["plaintext"] = _fnir(best, correct, mk)
        if protocol == "idface":  # the float cosine on every probe: what T_α / T_β cost
            c = cosine[np.ix_(rows, cols)]
            row["plaintext_cosine"] = _fnir(c.max(axis=1), cols[c.argmax(axis=1)][:mk] == owner[keep], mk)
        pos = {r: k for k, r in enumerate(enc_rows)}
        er = [r for r in rows if r in pos]
        if protocol == "cryptomask":
            me = sum(r < m for r in er)
            bits = enc[[pos[r] for r in er]]
            row["tpir_default_tau_encrypted"] = round(float(bits[:me].mean()), 6)  # detection (a 1-bit answer)
            row["fpir_default_tau_encrypted"] = round(float(bits[me:].mean()), 6)
            row["mismatches"] = int((bits != (best[[k for k, r in enumerate(rows) if r in pos]] >= tau)).sum())
        else:
            e = enc[np.ix_([pos[r] for r in er], cols)]
            me = int(sum(r < m for r in er))
            eb, ec = e.max(axis=1), cols[e.argmax(axis=1)][:me] == owner[[r for r in er[:me]]]
            row["tpir_default_tau_encrypted"], row["fpir_default_tau_encrypted"] = _rates(eb, ec, me, tau)
            row["encrypted"] = _fnir(eb, ec, me)
            sub = [k for k, r in enumerate(rows) if r in pos]
            pb, pc = best[sub], np.r_[correct, np.zeros(len(rows) - mk, bool)][sub][:me]
            row["plaintext_same_probes"] = _fnir(pb, pc, me)
            if protocol == "idface":  # the float cosine, before T_α / T_β quantise it
                c = cosine[np.ix_(er, cols)]
                cc = cols[c.argmax(axis=1)][:me] == owner[[r for r in er[:me]]]
                row["plaintext_cosine_same_probes"] = _fnir(c.max(axis=1), cc, me)
        which = "encrypted" if out["encrypted_all"] else "plaintext"
        row["tpir_default_tau"], row["fpir_default_tau"] = (row[f"tpir_default_tau_{which}"],
                                                            row[f"fpir_default_tau_{which}"])
        out["rows"].append(row)
    last = out["rows"][-1]
    out.update(default_tau=last["default_tau"], tpir_default_tau=last["tpir_default_tau"],
               fpir_default_tau=last["fpir_default_tau"],
               default_tau_figures="encrypted" if out["encrypted_all"] else "plaintext (encrypted: a sample, rows)",
               seconds=round(time.perf_counter() - t0, 3))
    return out
