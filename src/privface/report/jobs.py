"""The report's jobs: each one call of the library function a `privface bench …` / `privface eval …` command makes,
with the same arguments (``command`` is that command), so a figure on the page is the figure the command prints.

``plan(mode)`` lists the jobs of ``--quick`` or ``--full``; ``run_jobs`` runs them in order, each result written
atomically to the cache as it finishes (a crash loses at most the job running), reusing a cached result whose key
— job id, arguments and commit — is unchanged.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import heap

MODES = ("quick", "full", "tiny")
#: Gallery sizes of `bench identify` per mode and scheme (log2). --quick keeps to minutes on 2 cores: IDFace-Paillier
#: enrols by one Paillier encryption per template (~0.1 s each there), the CKKS schemes pay per block of 4096.
IDENTIFY_LOG2 = {
    "quick": {"plain": (10, 12, 14), "hers": (10, 12, 13), "idface-ckks": (10, 12, 13), "idface-paillier": (7, 9),
              "cryptomask": (10, 12, 14)},
    "full": {"plain": (10, 12, 14, 16, 18, 20), "hers": (10, 12, 14, 16, 18, 20),
             "idface-ckks": (10, 12, 14, 16, 18, 20), "idface-paillier": (10, 12, 14, 16),
             "cryptomask": (10, 12, 14, 16, 18, 20)},
    "tiny": dict.fromkeys(("plain", "hers", "idface-ckks", "idface-paillier", "cryptomask"), (6, 8)),
}
IDENTIFY_SCHEMES = ("plain", "hers", "idface-ckks", "idface-paillier", "cryptomask")
SPEC = {"name": "dlib-resnet128"}  # `--backend dlib-resnet128`: the papers' reproductions (seed 000's Table II is dlib)
#: The backends shown side by side (verification EER / 10-fold accuracy, 1:N TPIR/FPIR at the default τ): the
#: paper-reproduction evals are dlib's (``SPEC``, job ids ``eval.<ds>.<suffix>``); each other backend adds the
#: plaintext eval and the 1:N evals at default τ (``eval.<ds>.<backend>.<suffix>``).
BACKENDS = ("dlib-resnet128", "sface")
BACKEND_IDENT = ("hers", "idface-ckks", "cryptomask")  # the 1:N evals compared across backends


@dataclass(frozen=True)
class Job:
    id: str  # dotted: kind.what.variant (e.g. bench.identify.hers.n16384)
    title: str
    command: str  # the `privface …` command that prints the same figures
    fn: str  # name of the function in this module that runs it (picklable for a child process)
    args: dict = field(default_factory=dict)
    seconds: float = 10.0  # expected wall time on 2 quiet cores (progress bar weight)
    needs_data: bool = False  # needs PRIVFACE_DATA (skipped, and said so, without)
    child: bool = False  # run in a fresh child process (memory, thread settings)

    def key(self, commit: str) -> str:
        blob = json.dumps({"id": self.id, "fn": self.fn, "args": self.args, "commit": commit}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------- the plan


def plan(mode: str, *, only: Iterable[str] | None = None) -> list[Job]:
    """The jobs of ``mode`` (quick | full | tiny: toy parameters for tests), restricted to ids starting with one of
    ``only`` when given."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    quick, tiny = mode == "quick", mode == "tiny"
    toy = {"insecure_test_params": True} if tiny else {}
    toy_flag = " --insecure-test-params" if tiny else ""
    jobs: list[Job] = []
    dim = 128 if tiny else 512
    for scheme in IDENTIFY_SCHEMES:
        for e in IDENTIFY_LOG2[mode][scheme]:
            n = 1 << e
            repeat = 3 if not tiny else 1
            # cryptomask: CryptoMask-W and -WO on one enrolled gallery (seed 001 Fig. 2's two lines)
            variant = {"variant": "w,wo"} if scheme == "cryptomask" else {}
            jobs.append(Job(f"bench.identify.{scheme}.n{n}", f"bench identify {scheme}, N = 2^{e}",
                            f"privface bench identify --scheme {scheme} --n {n} --dim {dim} --repeat {repeat}"
                            f"{' --variant w,wo' if variant else ''}{toy_flag} --json",
                            "job_identify", {"scheme": scheme, "n": n, "dim": dim, "repeat": repeat, **variant, **toy},
                            seconds=_identify_seconds(scheme, n), child=not tiny))
    rep = 1 if tiny else (3 if quick else 10)
    for mode_ in ("basic", "secure-comparison"):  # the same repeats: one cold run is no median (478 ms against ≈ 140)
        r = rep
        level = "" if tiny else " --security-bits 112"
        transport = "in-process" if tiny else "http"
        jobs.append(Job(f"bench.im2020.{mode_}", f"bench im2020 ({mode_})",
                        f"privface bench im2020 --mode {mode_}{level} --repeat {r} --transport {transport}"
                        f"{' --no-face' if tiny else ''}{toy_flag} --json",
                        "job_im2020", {"mode": mode_, "levels": [112], "repeat": r, "transport": transport,
                                       "face": not tiny, **toy},
                        seconds=6 * r / 3))
    # --quick: ℓ = 128 (the eval's ℓ); --full: seed 004's whole Fig. 7/8 grid
    grid = [(128, 16)] if tiny or quick else [(ell, m) for m in (8, 16, 24) for ell in (128, 256, 512, 1024)]
    for ell, m in grid:
        r = 1 if tiny else (2 if quick else 5)
        bits = 512 if tiny else 3072
        jobs.append(Job(f"bench.gsm.l{ell}-m{m}", f"bench gsm ℓ = {ell}, m = {m}",
                        f"privface bench gsm --ell {ell} --m {m} --paillier-bits {bits} --repeat {r}{toy_flag} --json",
                        "job_gsm", {"ell": ell, "m": m, "paillier_bits": bits, "repeat": r, **toy},
                        seconds=25 * ell / 128 * r / 2))
    if not tiny:  # the whole default bench (d = 512 and 128, the three schemes) takes seconds
        jobs.append(Job("bench.kolberg", "bench kolberg (CKKS, BFV, NTRU)", "privface bench kolberg --repeat 20 --json",
                        "job_kolberg", {"dims": [512, 128], "repeat": 20}, seconds=5))
    jobs += _eval_jobs(mode)
    if only:
        prefixes = tuple(only)
        jobs = [j for j in jobs if j.id.startswith(prefixes)]
    return jobs


def _identify_seconds(scheme: str, n: int) -> float:
    blocks = max(1, n // 4096)
    # seconds measured by a --quick run on this project's 2-core CI-like machine under load (progress weights)
    return {"plain": 1, "hers": 7 + 3 * blocks, "idface-ckks": 20 + 2 * blocks, "idface-paillier": 5 + n * 0.1,
            "cryptomask": 4 + n / 450}[scheme]


#: 1:1 evals: (id suffix, protocol, options) — `privface eval --protocol P …`
PAIR_EVALS = (("plain", "plain", {}),
              ("im2020", "im2020", {"mode": "basic"}),
              ("im2020-sc", "im2020", {"mode": "secure-comparison"}),
              ("gsm-pi1", "gsm", {"variant": "pi1"}), ("gsm-pi2", "gsm", {"variant": "pi2"}),
              ("gsm-pi3", "gsm", {"variant": "pi3"}),
              ("kolberg-ckks", "kolberg", {"scheme": "ckks"}), ("kolberg-bfv", "kolberg", {"scheme": "bfv"}),
              ("kolberg-ntru", "kolberg", {"scheme": "ntru"}))
#: 1:N evals: (id suffix, protocol, scheme)
IDENT_EVALS = (("hers", "hers", "ckks"), ("idface-ckks", "idface", "ckks"), ("idface-paillier", "idface", "paillier"),
               ("cryptomask", "cryptomask", None))
#: --pairs per 1:1 protocol in --quick (None: all); the garbled-circuit variants are the slow ones
QUICK_PAIRS = {"plain": None, "im2020": 100, "im2020-sc": 6, "gsm-pi1": 30, "gsm-pi2": 10, "gsm-pi3": 10,
               "kolberg-ckks": 40, "kolberg-bfv": 100, "kolberg-ntru": 200}
FULL_PAIRS = {"plain": None, "im2020": None, "im2020-sc": 2000, "gsm-pi1": 2000, "gsm-pi2": 2000, "gsm-pi3": 500,
              "kolberg-ckks": 1000, "kolberg-bfv": 2000, "kolberg-ntru": 4000}
QUICK_PROBES = 40
LFW_SAMPLE_PER_CLASS = {"quick": 10, "full": None, "tiny": 2}  # same and different pairs per LFW fold


def _eval_jobs(mode: str) -> list[Job]:
    jobs = []
    tiny = mode == "tiny"
    pairs_of = {"quick": QUICK_PAIRS, "full": FULL_PAIRS, "tiny": dict.fromkeys(QUICK_PAIRS, 4)}[mode]
    datasets = [("orl", "orl")] + ([] if tiny else [("lfw", "lfw")])
    for ds_id, ds_name in datasets:
        sample = LFW_SAMPLE_PER_CLASS[mode] if ds_name == "lfw" else None
        ds_arg = {"dataset": ds_name, "lfw_sample": sample}
        for suffix, protocol, opts in PAIR_EVALS:
            if ds_name == "lfw" and mode == "quick" and suffix not in ("plain", "im2020"):
                continue
            pairs = None if sample else pairs_of[suffix]
            if tiny and suffix == "plain":
                pairs = None
            args = {**ds_arg, "protocol": protocol, "pairs": pairs, **opts}
            flags = "".join(f" --{k.replace('_', '-')} {v}" for k, v in opts.items() if k != "mode" or v != "basic")
            every = " --pairs all" if not pairs and protocol in ("im2020", "gsm", "kolberg") else ""
            cmd = (f"privface eval --dataset {ds_name} --protocol {protocol}{flags} --backend {SPEC['name']}"
                   + (f" --pairs {pairs}" if pairs else every)
                   + (" --yes" if protocol == "im2020" and opts.get("mode") != "basic" and not pairs else "")
                   + " --no-checkpoint --json")
            if sample:
                cmd = _sample_note(cmd, sample)
            jobs.append(Job(f"eval.{ds_id}.{suffix}", f"eval {ds_name} {suffix}", cmd, "job_eval_pairs", args,
                            seconds=_eval_seconds(suffix, pairs or (20 * sample if sample else
                                                                    {"orl": 79800, "lfw": 6000}[ds_name]), ds_name),
                            needs_data=True))
        for suffix, protocol, scheme in IDENT_EVALS:
            if ds_name == "orl" and protocol == "cryptomask":
                continue
            if ds_name == "lfw" and mode == "quick" and suffix == "idface-paillier":
                continue  # every ORL identity has ten images: no non-mated probe, which cryptomask's eval needs
            probes = None if (mode == "full" or sample) else (8 if tiny else QUICK_PROBES)
            args = {**ds_arg, "protocol": protocol, "scheme": scheme, "probes": probes,
                    "insecure_test_params": tiny}
            cmd = (f"privface eval --dataset {ds_name} --protocol {protocol} --backend {SPEC['name']}"
                   + (f" --scheme {scheme}" if scheme and protocol == "idface" else "")
                   + (f" --probes {probes}" if probes else "") + (" --insecure-test-params" if tiny else "")
                   + " --json")
            if sample:
                cmd = _sample_note(cmd, sample)
            jobs.append(Job(f"eval.{ds_id}.{suffix}", f"eval {ds_name} {suffix} (1:N)", cmd, "job_eval_ident", args,
                            seconds={"hers": 2, "idface-ckks": 30, "idface-paillier": 60, "cryptomask": 10}[suffix],
                            needs_data=True))
        jobs += _backend_jobs(mode, ds_id, ds_name, ds_arg, sample)
    return jobs


def _backend_jobs(mode: str, ds_id: str, ds_name: str, ds_arg: dict, sample: int | None) -> list[Job]:
    """Each backend other than ``SPEC``'s: the plaintext eval and the 1:N evals at the default τ, with the same
    data, probes and parameters as the dlib jobs, so that the report shows the backends side by side."""
    tiny = mode == "tiny"
    jobs = []
    for backend in (b for b in BACKENDS if b != SPEC["name"]):
        cmd = f"privface eval --dataset {ds_name} --backend {backend} --json"
        jobs.append(Job(f"eval.{ds_id}.{backend}.plain", f"eval {ds_name} plain ({backend})",
                        _sample_note(cmd, sample) if sample else cmd, "job_eval_pairs",
                        {**ds_arg, "protocol": "plain", "pairs": None, "backend": backend},
                        seconds=_eval_seconds("plain", 20 * sample if sample else {"orl": 79800, "lfw": 6000}[ds_name],
                                              ds_name), needs_data=True))
        for suffix, protocol, scheme in IDENT_EVALS:
            if suffix not in BACKEND_IDENT or (ds_name == "orl" and protocol == "cryptomask"):
                continue
            probes = None if (mode == "full" or sample) else (8 if tiny else QUICK_PROBES)
            cmd = (f"privface eval --dataset {ds_name} --protocol {protocol} --backend {backend}"
                   + (f" --scheme {scheme}" if scheme and protocol == "idface" else "")
                   + (f" --probes {probes}" if probes else "") + (" --insecure-test-params" if tiny else "")
                   + " --json")
            jobs.append(Job(f"eval.{ds_id}.{backend}.{suffix}", f"eval {ds_name} {suffix} (1:N, {backend})",
                            _sample_note(cmd, sample) if sample else cmd, "job_eval_ident",
                            {**ds_arg, "protocol": protocol, "scheme": scheme, "probes": probes,
                             "insecure_test_params": tiny, "backend": backend},
                            seconds={"hers": 2, "idface-ckks": 30, "cryptomask": 10}[suffix], needs_data=True))
    return jobs


def _sample_note(cmd: str, per_class: int) -> str:
    return (f"{cmd}  [on a sample: the first {per_class} same and {per_class} different pairs of each of "
            f"LFW's 10 folds — privface.report.jobs.lfw_sample; no CLI flag]")


def _eval_seconds(suffix: str, pairs: int, ds: str) -> float:
    per_pair = {"plain": 0, "im2020": 0.25, "im2020-sc": 0.4, "gsm-pi1": 0.7, "gsm-pi2": 2.4, "gsm-pi3": 2.1,
                "kolberg-ckks": 0.25, "kolberg-bfv": 0.17, "kolberg-ntru": 0.01}[suffix]
    return 2 + per_pair * pairs + ({"orl": 65, "lfw": 45}.get(ds, 0) if suffix == "plain" else 0)


# ------------------------------------------------------------------------------------------------ running


@dataclass
class Outcome:
    job: Job
    result: object  # the job's JSON (dict or list), None on error or skip
    status: str  # "ok" | "cached" | "error" | "skipped"
    seconds: float
    note: str = ""

    def to_json(self) -> dict:
        return {"id": self.job.id, "title": self.job.title, "command": self.job.command, "function": self.job.fn,
                "arguments": self.job.args, "status": self.status, "seconds": round(self.seconds, 2),
                "note": self.note, "result": self.result}


def write_atomically(path: Path, text: str, mode: int = 0o600) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it); ``mode``: its permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # not the locale's: the page says charset=utf-8
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cache_path(cache_dir: Path, job: Job, commit: str) -> Path:
    return cache_dir / f"{job.id}-{job.key(commit)}.json"


def run_jobs(jobs: list[Job], cache_dir: Path, commit: str, *, fresh: bool = False, progress: bool = True,
             data_available: bool = True) -> list[Outcome]:
    """Run (or reuse) every job in order; a failing job is recorded, not fatal. Progress bar on stderr."""
    from tqdm import tqdm

    out: list[Outcome] = []
    total = sum(j.seconds for j in jobs)
    bar = tqdm(total=round(total), unit="s~", desc="report", disable=not progress, dynamic_ncols=True,
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} est. s [{elapsed}<{remaining}] {postfix}")
    try:
        for job in jobs:
            bar.set_postfix_str(job.id)
            out.append(_run_one(job, cache_dir, commit, fresh, data_available))
            bar.update(round(job.seconds))
    finally:
        bar.close()
    return out


def _run_one(job: Job, cache_dir: Path, commit: str, fresh: bool, data_available: bool) -> Outcome:
    path = cache_path(cache_dir, job, commit)
    if job.needs_data and not data_available:
        return Outcome(job, None, "skipped", 0.0, "PRIVFACE_DATA is not set or has no ORL/LFW: not run")
    if path.is_file() and not fresh:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            return Outcome(job, saved["result"], "cached", saved.get("seconds", 0.0),
                           f"cached result from {saved.get('finished', '?')}")
        except (ValueError, KeyError):
            pass  # a damaged file: run again
    t0 = time.perf_counter()
    try:
        if job.child:
            spawn = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=spawn, initializer=heap.retain) as pool:
                result = pool.submit(run_job, job.fn, job.args).result()
        else:
            result = run_job(job.fn, job.args)
    except Exception as e:  # recorded on the page; the other jobs still run
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return Outcome(job, None, "error", time.perf_counter() - t0, tb[:500])
    seconds = time.perf_counter() - t0
    result = _jsonable(result)
    write_atomically(path, json.dumps({"id": job.id, "args": job.args, "commit": commit, "seconds": round(seconds, 2),
                                       "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                       "result": result}, indent=1, ensure_ascii=False))
    return Outcome(job, result, "ok", seconds)


def run_job(fn: str, args: dict):
    func: Callable[..., object] = globals()[fn]
    return func(**args)


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, float) and not np.isfinite(o):
        return None
    if o is None or isinstance(o, str | int | float | bool):
        return o
    return str(o)


# ------------------------------------------------------------------------------------------- job functions


def job_identify(scheme: str, n: int, dim: int, repeat: int, insecure_test_params: bool = False,
                 variant: str = "w") -> dict:
    """`privface bench identify --scheme S --n N --dim D --repeat R [--variant w,wo]` (bench.identify.bench_identify;
    the job itself runs in a fresh child process). With two variants the first row is the result and the second
    its ``"wo"`` entry."""
    from ..bench import identify

    out = identify.bench_identify(scheme, n, dim, beta=None, repeat=repeat, insecure_test_params=insecure_test_params,
                                  seal_adds=False, threads=None, variant=variant)
    if isinstance(out, list):
        out = {**out[0], "wo": out[1]}
    return out


def job_im2020(mode: str, levels: list[int], repeat: int, transport: str, face: bool,
               insecure_test_params: bool = False) -> dict:
    """`privface bench im2020 --mode M --security-bits 112 --repeat R` (bench.im2020.bench_im2020)."""
    from ..bench import im2020

    rows = im2020.bench_im2020(tuple(levels), repeat=repeat, workers=None, face=face,
                               insecure_test_params=insecure_test_params, transport=transport, mode=mode,
                               compare_bits=None, pool=True)
    return rows[0]


def job_gsm(ell: int, m: int, paillier_bits: int, repeat: int, insecure_test_params: bool = False) -> dict:
    """`privface bench gsm --ell L --m M --repeat R` (bench.gsm.bench_gsm); adds each variant's total bytes."""
    from ..bench import gsm

    row = gsm.bench_gsm([(ell, m)], paillier_bits=paillier_bits, repeat=repeat,
                        insecure_test_params=insecure_test_params, pi3=True)[0]
    row["pi1_total_bytes"] = row["pi1_m1_bytes"] + row["pi1_t2d_bytes"]
    row["pi2_total_bytes"] = row["pi2_m1_bytes"] + row["pi2_d2t_bytes"] + row["pi2_t2d_bytes"]
    row["pi3_total_bytes"] = row["pi3_m1_bytes"] + row["pi3_d2t_bytes"] + row["pi3_t2d_bytes"]
    row["pi2_reused_m1_bytes"] = row["pi2_d2t_bytes"] + row["pi2_t2d_bytes"]
    return row


def job_kolberg(dims: list[int], repeat: int) -> list[dict]:
    """`privface bench kolberg [--dim D] --repeat R` (bench.kolberg.bench_kolberg)."""
    from ..bench import kolberg

    return kolberg.bench_kolberg(dims=tuple(dims), schemes=kolberg.SCHEMES, repeat=repeat)


def lfw_sample(per_class: int, root=None):
    """LFW's pairs protocol cut to the first ``per_class`` same and ``per_class`` different pairs of each fold (the
    10 folds kept, so the 10-fold accuracy is defined); only the images of those pairs."""
    from ..eval.datasets import Dataset, load_lfw

    ds = load_lfw(root)
    keep = []
    for fold in np.unique(ds.folds):
        rows = np.flatnonzero(ds.folds == fold)
        keep += list(rows[ds.genuine[rows]][:per_class]) + list(rows[~ds.genuine[rows]][:per_class])
    keep = np.array(sorted(keep))
    used = np.unique(ds.pairs[keep])
    remap = {int(o): k for k, o in enumerate(used)}
    pairs = np.array([[remap[int(a)], remap[int(b)]] for a, b in ds.pairs[keep]])
    return Dataset("lfw-sample", [ds.paths[i] for i in used], ds.ids[used], pairs, ds.genuine[keep], ds.folds[keep],
                   {**ds.meta, "sample": f"{per_class} same + {per_class} different pairs per fold"})


def _dataset(dataset: str, lfw_sample_per_class: int | None, identification: bool):
    from ..eval.datasets import Dataset, load, load_identification

    if dataset == "lfw" and lfw_sample_per_class:
        ds = lfw_sample(lfw_sample_per_class)
        if identification:  # the same images as a folder-per-identity set (no pair protocol)
            ds = Dataset(ds.name, ds.paths, ds.ids, meta={"face": "center", "part": "sample"})
        return ds
    return load_identification(dataset) if identification else load(dataset)


def job_eval_pairs(dataset: str, protocol: str, pairs: int | None, lfw_sample: int | None = None,
                   mode: str = "basic", variant: str = "pi1", scheme: str = "ckks",
                   backend: str = SPEC["name"]) -> dict:
    """`privface eval --dataset D --protocol P --backend B [--pairs N] --no-checkpoint` (eval.run.evaluate). The
    plaintext job also keeps a thinned ROC curve of its float distances (eval.metrics.roc on the same pairs)."""
    from ..eval import metrics
    from ..eval.run import evaluate

    spec = {"name": backend}
    ds = _dataset(dataset, lfw_sample, identification=False)
    params = None
    if protocol == "im2020":
        from ..protocols.im2020 import Im2020Params

        params = Im2020Params.for_level(112, mode=mode, backend=SPEC["name"])  # seed 000 Table II: dlib's τ
    elif protocol == "gsm":
        from ..protocols.gsm import GsmParams

        params = GsmParams(ell=128)
    elif protocol == "kolberg":
        from ..protocols.kolberg import KolbergParams

        params = KolbergParams(scheme, backend=backend)
    out = evaluate(ds, spec, protocol=protocol, cache=True, workers=None, progress=False, report=None, pairs=pairs,
                   protocol_params=params, checkpoint=None, variant=variant)
    if protocol == "plain":
        from ..eval.embed import embed_paths
        from ..eval.run import MISSING, distances, pair_protocol

        emb = embed_paths(ds.paths, spec, which=ds.meta.get("face", "largest"), cache=True, workers=None)
        i, j, genuine, _ = pair_protocol(ds)
        d = distances(emb.vectors, emb.found, i, j)
        keep = d < MISSING
        far, tar, _thr = metrics.roc(d[keep], genuine[keep])[:3]
        idx = np.unique(np.r_[np.searchsorted(far, np.geomspace(1e-5, 1, 150)).clip(0, len(far) - 1), len(far) - 1])
        out["roc_curve"] = {"far": [float(far[k]) for k in idx], "tar": [float(tar[k]) for k in idx]}
    return out


def job_eval_ident(dataset: str, protocol: str, scheme: str | None, probes: int | None,
                   lfw_sample: int | None = None, insecure_test_params: bool = False,
                   backend: str = SPEC["name"]) -> dict:
    """`privface eval --dataset D --protocol idface|hers|cryptomask --backend B [--scheme S] [--probes N]`
    (eval.identify_eval.evaluate_identification, eval.cryptomask_eval.evaluate_cryptomask)."""
    spec = {"name": backend}
    ds = _dataset(dataset, lfw_sample, identification=True)
    if protocol == "cryptomask":
        from ..eval.cryptomask_eval import evaluate_cryptomask

        return evaluate_cryptomask(ds, spec, tau=None, cache=True, workers=None, probes=probes, progress=False,
                                   insecure_test_params=insecure_test_params)
    from ..eval.identify_eval import evaluate_identification

    return evaluate_identification(ds, spec, protocol=protocol, scheme=scheme or "ckks", beta=None,
                                   centring="shipped", lift=None, cache=True, workers=None, probes=probes,
                                   progress=False, insecure_test_params=insecure_test_params)
