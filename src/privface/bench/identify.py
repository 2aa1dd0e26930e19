"""`privface bench identify`: encrypted 1:N identification vs plaintext in the same run (seed 003 §5.1, Fig. 2).

Synthetic, seeded unit vectors as seed 003 does: a gallery of N templates and a probe that is a noisy copy of
gallery[N // 3]. ``plaintext_identify_s`` is one float32 matrix-vector product plus argmax on the same gallery
(the faster median of BLAS with its default threads and with one thread);
``identify_s`` is S_local's IP_DB plus S_key's decryption, decoding and argmax (the two parties in one process).
Times are medians over ``repeat`` runs; enrolment runs once. ``answer_equals_plaintext`` compares the encrypted
answer with the plaintext answer on the same (for idface: transformed) templates.

``bench_schemes`` runs several schemes back to back, each in a fresh child process on the same seeded gallery, so
that each row's peak memory is its own; ``threads`` caps BLAS, the crypto core's thread pools
(``PRIVFACE_THREADS``) and the native core's (``RAYON_NUM_THREADS``).
"""
from __future__ import annotations

import multiprocessing
import os
import resource
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import tenseal.sealapi as sealapi
from threadpoolctl import threadpool_limits

from .. import heap
from ..crypto import seal_arrays
from ..errors import PrivfaceError

SCHEMES = ("plain", "hers", "idface-ckks", "idface-paillier", "cryptomask")
#: Verifier–server exchanges of one identification: hers / idface send the IP_DB message to the key server and get
#: its decision back; cryptomask counts its own (``Run.rounds``).
ROUNDS = {"plain": 0, "hers": 1, "idface-ckks": 1, "idface-paillier": 1}
THREAD_VARIABLES = ("PRIVFACE_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
TAU = {"hers": 0.5, "idface": 0.25, "cryptomask": 0.5}  # hers, cryptomask: cosine; idface: fraction of min(α, β)


def synthetic(n: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """(gallery float32 (n, dim) unit rows, probe, index the probe was drawn from)."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 1 << 15):
        c = rng.standard_normal((min(n, lo + (1 << 15)) - lo, dim), dtype=np.float32)
        x[lo:lo + c.shape[0]] = c / np.linalg.norm(c, axis=1, keepdims=True)
    k = n // 3
    y = x[k] + 0.5 * rng.standard_normal(dim, dtype=np.float32) / np.sqrt(dim)
    return x, (y / np.linalg.norm(y)).astype(np.float32), k


def _median(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _plaintext(x: np.ndarray, y: np.ndarray) -> tuple[int, float]:
    s = x @ y
    k = int(np.argmax(s))
    return k, float(s[k])


def _seal_add_time(scheme, blocks, query) -> float:
    """The same 2(β − 1) additions per block with SEAL ``add_inplace`` on SEAL ciphertext objects."""
    ctx, pid = scheme.public.seal_context, scheme.parms_id
    plus, minus = scheme.query(query)
    seal_blocks = [[[seal_arrays.ciphertext_from_array(ctx, pid, b.data[s, j]) for j in range(b.data.shape[1])]
                    for s in (0, 1)] for b in blocks]
    ev = scheme.public.evaluator
    t = time.perf_counter()
    for c in seal_blocks:
        for first, second in ((c[0], c[1]), (c[1], c[0])):
            terms = [first[j] for j in plus] + [second[j] for j in minus]
            acc = sealapi.Ciphertext()
            ev.add(terms[0], terms[-1], acc) if len(terms) > 1 else None
            for ct in terms[1:-1]:
                ev.add_inplace(acc, ct)
    return time.perf_counter() - t


def parse_schemes(text: str) -> list[str]:
    """``a,b,…`` → the schemes, each one of SCHEMES, no repeats."""
    schemes = [x.strip() for x in text.split(",")]
    bad = [x for x in schemes if x not in SCHEMES]
    if bad or not schemes or len(set(schemes)) != len(schemes):
        raise PrivfaceError(f"--scheme takes one or more of {', '.join(SCHEMES)}, comma-separated, each once; "
                            f"got {text!r}")
    return schemes


def bench_schemes(schemes: list[str], n: int, dim: int, *, threads: int | None = None, **options) -> list[dict]:
    """One row per scheme, in order, each from a fresh child process (same seed, so the same gallery)."""
    rows = []
    for scheme in schemes:
        saved = {k: os.environ.get(k) for k in THREAD_VARIABLES}
        if threads is not None:  # inherited by the child before it loads BLAS or the native core
            os.environ.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
        try:
            spawn = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=spawn, initializer=heap.retain) as pool:
                got = pool.submit(bench_identify, scheme, n, dim, threads=threads, **options).result()
                rows.extend(got if isinstance(got, list) else [got])
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return rows


def bench_identify(scheme: str, n: int, dim: int, *, beta: int | None = None, repeat: int = 5,
                   insecure_test_params: bool = False, seed: int = 0, seal_adds: bool = False,
                   threads: int | None = None, variant: str = "w", ot: str = "ferret") -> dict:
    """One JSON row (docs/protocols/idface.md: `privface bench identify`); ``variant`` (cryptomask only): "w", or
    "wo" for CryptoMask-WO (seed 001 Fig. 2: the verifier decrypts the distances, no Alg. 3), or "w,wo": a list of
    two rows from one enrolled gallery; ``ot`` (cryptomask): Alg. 3's OTs (``reveal.OT_KINDS``)."""
    if scheme not in SCHEMES:
        raise PrivfaceError(f"--scheme must be one of {SCHEMES}")
    variants = variant.split(",")
    if not variants or any(v not in ("w", "wo") for v in variants) or len(set(variants)) != len(variants):
        raise PrivfaceError("--variant takes w, wo or w,wo (cryptomask)")
    if n < 1 or dim < 1 or repeat < 1 or (threads is not None and threads < 1):
        raise PrivfaceError("--n, --dim, --repeat and --threads must be positive")
    if threads is not None:
        os.environ["PRIVFACE_THREADS"] = os.environ["RAYON_NUM_THREADS"] = str(threads)
    with threadpool_limits(threads):  # None: BLAS as configured
        return _bench_identify(scheme, n, dim, beta, repeat, insecure_test_params, seed, seal_adds, threads, variant,
                               ot)


def _bench_identify(scheme, n, dim, beta, repeat, insecure_test_params, seed, seal_adds, threads,
                    variant, ot) -> dict | list[dict]:
    x, y, k = synthetic(n, dim, seed)
    plain_s, (plain_best, _) = _median(lambda: _plaintext(x, y), max(repeat, 5))
    with threadpool_limits(1):  # on a busy machine BLAS threads can cost more than they save at small N
        plain_s = min(plain_s, _median(lambda: _plaintext(x, y), max(repeat, 5))[0])
    row = {"scheme": scheme, "n": n, "dim": dim, "beta": None, "enrol_s": 0.0, "identify_s": plain_s,
           "plaintext_identify_s": plain_s, "ratio": 1.0, "storage_bytes": int(x.nbytes), "comm_bytes": 0,
           "rounds": ROUNDS.get(scheme, 0), "threads": threads or os.cpu_count() or 1,
           "answer_equals_plaintext": plain_best == k, "insecure_test_params": insecure_test_params}
    if scheme == "cryptomask":
        found = _cryptomask(x, y, repeat, insecure_test_params, threads, variant.split(","), ot)
        peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        rows = [{**row, **got, "ratio": round(got["identify_s"] / plain_s, 3), "peak_rss_mb": peak,
                 "cs_peak_rss_mb": peak} for got in found]
        rows = [{k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()} for r in rows]
        return rows if len(rows) > 1 else rows[0]
    if scheme != "plain":
        row.update(_encrypted(scheme, x, y, beta, repeat, insecure_test_params, seal_adds))
        row["ratio"] = round(row["identify_s"] / plain_s, 3)
    # every party runs in this process, so the server's (CS, local server) peak memory is at most this
    row["peak_rss_mb"] = row["cs_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}


def _encrypted(scheme, x, y, beta, repeat, insecure, seal_adds) -> dict:
    from ..protocols.hers import HERS, HERS_CKKS, HERSKey, KeyServer, LocalServer
    from ..protocols.idface import IDFaceParams, plaintext_scores, t_alpha

    n, dim = x.shape
    extra = {}
    if scheme == "hers":
        from ..crypto.lattice import CKKS, LatticeParams, generate_lattice_keypair

        params = LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36) if insecure else HERS_CKKS
        pub, sec = generate_lattice_keypair(params, insecure_test_params=insecure)
        public, secret, tau = HERS(pub, dim), HERSKey(sec), TAU["hers"]
        ref = x.astype(np.float64) @ y.astype(np.float64)
    else:
        p = IDFaceParams.for_dim(dim, beta)
        extra["beta"] = p.beta
        tau = int(TAU["idface"] * min(p.alpha, p.beta))
        if scheme == "idface-ckks":
            from ..crypto.lattice import CKKS, LatticeParams, generate_lattice_keypair
            from ..protocols.idface import IDFACE_CKKS, IDFaceCKKS, IDFaceCKKSKey

            params = (LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36) if insecure
                      else IDFACE_CKKS)
            pub, sec = generate_lattice_keypair(params, insecure_test_params=insecure)
            public, secret = IDFaceCKKS(pub, p), IDFaceCKKSKey(sec, p)
        else:
            from ..crypto.paillier import generate_paillier_keypair
            from ..protocols.idface import IDFacePaillier, IDFacePaillierKey

            pk, sk = generate_paillier_keypair(512 if insecure else 2048, insecure_test_params=insecure)
            public, secret = IDFacePaillier(pk, p), IDFacePaillierKey(sk, p)
        ref = plaintext_scores(t_alpha(x, p.alpha), t_alpha(y, p.beta))
    local, key = LocalServer(public), KeyServer(secret, tau)
    t = time.perf_counter()
    local.enrol([str(i) for i in range(n)], x)
    enrol_s = time.perf_counter() - t
    ids = {s: i for i, s in enumerate(local.ids)}
    msgs, cpu = [], []

    def once():
        c = time.process_time()
        msg = local.identify_request(y)
        msgs.append(msg)
        out = local.resolve(key.decide(msg))
        cpu.append(time.process_time() - c)
        return out

    identify_s, answer = _median(once, repeat)
    ip_s, _ = _median(lambda: local.identify_request(y), repeat)
    best = int(np.argmax(ref))
    expect = best if ref[best] >= tau else None
    msg = msgs[-1]
    comm = msg.nbytes if hasattr(msg, "arrays") else msg.nbytes(public.public)
    extra.update({"enrol_s": round(enrol_s, 3), "identify_s": identify_s, "identify_cpu_s": statistics.median(cpu),
                  "ip_db_s": ip_s,
                  "storage_bytes": local.storage_bytes, "comm_bytes": comm, "blocks": len(local.blocks),
                  "templates_per_block": public.capacity, "answer": None if answer is None else ids[answer],
                  "answer_equals_plaintext": (None if answer is None else ids[answer]) == expect})
    if seal_adds and scheme == "idface-ckks":
        extra["ip_db_seal_add_s"] = _seal_add_time(public, local.blocks, y)
    return extra


def _cryptomask(x, y, repeat, insecure, threads, variants, ot) -> list[dict]:
    """seed 001: enrol through one DP (Alg. 1), identify = Alg. 2 + Alg. 3 end to end (the verifier's bit), all
    parties in this process with BLAS on one thread; ``identify_cpu_s`` is the process CPU time of the same runs.
    ``answer_equals_plaintext`` compares the bit with [max ⟨a, b⟩ ≥ ts] on the same quantised vectors (WO: and the
    best entry's inner product with the maximum). One row per variant, all on the same enrolled gallery. Ferret's
    pools are refilled before each timed run (``CryptoMask.prepare``, between identifications): ``ot_refill_s`` and
    the bytes phase ``ot_refill`` are one identification's share of the refills (per COT it takes), the bytes in
    ``comm_bytes``, the time not in ``identify_s``. ``distance_steps``: the CS's thread-seconds per step of the
    distances phase (``parties.distance_steps``; at one thread they add up to most of ``distances``)."""
    from ..protocols.cryptomask import CryptoMask, encoding

    n, dim = x.shape
    cm = CryptoMask(dim, tau=TAU["cryptomask"], insecure_test_params=insecure, variant=variants[0], ot=ot)
    t = time.perf_counter()
    for lo in range(0, n, 1 << 14):
        cm.enrol(x[lo:lo + (1 << 14)])
    enrol_s = time.perf_counter() - t
    qy = encoding.quantize(y)
    top = max(int((encoding.quantize(x[lo:lo + (1 << 16)]) @ qy).max()) for lo in range(0, n, 1 << 16))
    return [_cryptomask_variant(cm, x, y, qy, repeat, threads, v, enrol_s, top) for v in variants]


def _cryptomask_variant(cm, x, y, qy, repeat, threads, variant, enrol_s, top) -> dict:
    """One variant's figures on an enrolled ``cm`` (``_cryptomask``)."""
    from ..protocols.cryptomask import encoding

    runs, cpu = [], []

    def once():
        c = time.process_time()
        runs.append(cm.identify(y, variant=variant))
        cpu.append(time.process_time() - c)

    def refill_then_once():
        if variant == "w":
            cm.prepare()  # between identifications: untimed, its share reported as ot_refill_s
        return _timed(once)

    with threadpool_limits(1 if threads is None else threads):  # BLAS threads spin on a shared machine; the
        times = [refill_then_once() for _ in range(repeat)]      # matmuls are per-ciphertext chunks
    identify_s = statistics.median(times)
    expect = top >= cm.ts
    run = runs[-1]
    phases = {k: statistics.median(r.seconds[k] for r in runs) for k in run.seconds}
    steps = {k: statistics.median(r.steps[k] for r in runs) for k in run.steps}
    ok = run.match == expect
    if run.best is not None:  # WO: the verifier's best entry must carry the largest plaintext inner product
        ok = ok and int(encoding.quantize(x[run.best]) @ qy) == top
    ferret = variant == "w" and cm.ot == "ferret"
    return {"variant": variant, "ot": cm.ot if variant == "w" else None, "enrol_s": round(enrol_s, 3),
            "identify_s": identify_s, "ot_refill_s": phases.get("ot_refill") if ferret else None,
            "identify_cpu_s": statistics.median(cpu), "storage_bytes": cm.cs.storage_bytes,
            "comm_bytes": run.comm_bytes, "bytes_per_phase": run.bytes, "setup_bytes": cm.setup_wire.bytes["setup"]
            + cm.setup_wire.bytes["ot_setup"], "best": run.best, "enrol_bytes": cm.enrol_bytes,
            "seconds_per_phase": phases, "distance_steps": steps,
            "ciphertexts": cm.cs.ciphertexts, "slices": cm.cs.slices, "templates_per_ciphertext": cm.cs.delta,
            "rounds": run.rounds, "answer": run.match, "answer_equals_plaintext": ok}


def format_table(rows: dict | list[dict]) -> str:
    rows = [rows] if isinstance(rows, dict) else rows
    return "\n\n".join("\n".join(f"{k:24s} {v}" for k, v in row.items()) for row in rows)
