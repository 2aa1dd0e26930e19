"""From the jobs' results to the report's data: paper sections, the cross-protocol comparison, accuracy, plots,
the machine. ``report.json`` is this data; ``index.html`` renders exactly it (html.py)."""
from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

from . import papers, plots
from .html import human_bytes
from .jobs import BACKEND_IDENT, BACKENDS, SPEC, Outcome

#: Post-quantum or not, and why (the hardness each protocol's secrecy rests on).
POST_QUANTUM = {
    "im2020": (False, "Joye–Libert encryption: quadratic residuosity / factoring"),
    "gsm": (False, "Paillier (factoring); Π3's OT on edwards25519 (discrete log)"),
    "kolberg": (True, "CKKS, BFV: RLWE; NTRU: lattices"),
    "hers": (True, "CKKS: RLWE"),
    "idface-ckks": (True, "CKKS: RLWE"),
    "idface-paillier": (False, "Paillier: factoring"),
    "cryptomask": (False, "BFV is RLWE, but Alg. 3's OT runs on edwards25519 (discrete log)"),
}


def git_commit(cwd: Path | None = None) -> str:
    """The checkout's commit (``+dirty`` with uncommitted changes), or "unknown" outside git."""
    here = cwd or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version()}


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _results(outcomes: list[Outcome]) -> dict[str, object]:
    return {o.job.id: o.result for o in outcomes if o.result is not None}


def _fmt_setting(job_id: str, r) -> str:
    """Our setting, from the job's own result."""
    if not isinstance(r, dict):
        return ""
    if job_id.startswith("bench.im2020"):
        return (f"{r.get('security_bits')}-bit level (JL N {r.get('jl_modulus_bits')} bits), k = {r.get('k')}, "
                f"{r.get('transport')}, {r.get('workers')} threads, median of {r.get('repeat')}")
    if job_id.startswith("bench.gsm"):
        return (f"Paillier {r.get('paillier_bits')}-bit, ℓ = {r.get('ell')}, m = {r.get('m')}, λ = {r.get('lambda')}, "
                f"median of {r.get('repeat')}")
    if job_id.startswith("bench.identify"):
        return (f"N = {r.get('n')}, d = {r.get('dim')}" + (f", β = {r['beta']}" if r.get("beta") else "")
                + f", {r.get('threads')} threads, median" + (" — TOY PARAMETERS" if r.get("insecure_test_params")
                                                             else ""))
    if job_id.startswith("eval."):
        size = (f"{r.get('pairs_run') or r.get('genuine_pairs', 0) + r.get('impostor_pairs', 0)} pairs"
                if "genuine_pairs" in r else
                f"{r.get('identities_enrolled')} enrolled, {r.get('mated_probes')} + {r.get('nonmated_probes')} probes")
        return f"{r.get('dataset')}, {r.get('backend')}, {size}"
    return ""


def paper_sections(outcomes: list[Outcome]) -> list[dict]:
    data = papers.load()
    results = _results(outcomes)
    jobs = {o.job.id: o.job for o in outcomes}
    sections = []
    for name in papers.PAPERS:
        p = data["papers"][name]
        rows = []
        for row in (r for r in data["rows"] if r["paper"] == name):
            ours = papers.resolve(row, results)
            out = {"where": row["where"], "quantity": row["quantity"], "paper_value": row["value"],
                   "unit": row["unit"], "quote": row["quote"], "quote_shown": papers.shown_quote(row["quote"]),
                   "paper_setting": row.get("setting", p["setting"]), "ours": None, "ratio": None,
                   "better": papers.better(row), "verdict": None, "our_setting": None, "job": None, "command": None,
                   "extrapolated_from": None}
            if ours is not None:
                job_id = ours["job"]
                result = results.get(job_id)
                if isinstance(result, list):  # bench kolberg: the row of the scheme and dimension compared
                    sel = row["ours"].get("select", {})
                    r = next((x for x in result if all(x.get(k) == v for k, v in sel.items())), {})
                    setting = (f"{str(r.get('scheme', '')).upper()}, d = {r.get('dim')}, {r.get('security_bits')}-bit, "
                               f"median of {jobs[job_id].args.get('repeat') if job_id in jobs else '?'}")
                else:
                    setting = _fmt_setting(job_id, result)
                if ours["extrapolated_from"]:
                    setting += (f"; extrapolated from N = {ours['extrapolated_from']} to {row['ours']['n']} "
                                f"({ours['scaled_by']})")
                out.update(ours=ours["value"], job=job_id, our_setting=setting,
                           command=jobs[job_id].command if job_id in jobs else None,
                           extrapolated_from=ours["extrapolated_from"],
                           ratio=(ours["value"] / row["value"]) if row["value"] else None)
                out["verdict"] = papers.verdict(row, out["ratio"])
            elif row.get("ours"):
                out["our_setting"] = "not measured in this run"
            unit = papers.SHOWN_UNIT.get(row["unit"], row["unit"])
            out["shown"] = {"unit": unit, "paper": papers.convert(row["value"], row["unit"], unit),
                            "ours": None if out["ours"] is None else papers.convert(out["ours"], row["unit"], unit)}
            rows.append(out)
        sections.append({"paper": name, "seed": p["seed"], "title": p["title"], "setting": p["setting"],
                         "file": p["file"], "rows": rows})
        if name == "cryptomask":
            sections[-1]["versus"] = cryptomask_versus(results)
    return sections


def cryptomask_versus(results: dict) -> list[dict]:
    """Seed 001 Fig. 2 (time) and Fig. 3 (bytes) on this machine: per gallery size N that both `bench identify
    cryptomask` (W, and WO when the job ran both variants) and `bench identify hers` measured, the three figures and
    CryptoMask's ratios to HERS (lower is better for CryptoMask)."""
    def sized(scheme):
        return {int(k.rsplit(".n", 1)[1]): (k, v) for k, v in results.items()
                if k.startswith(f"bench.identify.{scheme}.n") and isinstance(v, dict)}

    def ratio(a, b):
        return round(a / b, 3) if isinstance(a, int | float) and isinstance(b, int | float) and b else None

    cm, hers = sized("cryptomask"), sized("hers")
    rows = []
    for n in sorted(cm.keys() & hers.keys()):
        (jc, c), (jh, h) = cm[n], hers[n]
        wo = c.get("wo") if isinstance(c.get("wo"), dict) else {}
        row = {"n": n, "dim": c.get("dim"), "jobs": [jc, jh],
               "w_s": c.get("identify_s"), "wo_s": wo.get("identify_s"), "hers_s": h.get("identify_s"),
               "w_bytes": c.get("comm_bytes"), "wo_bytes": wo.get("comm_bytes"), "hers_bytes": h.get("comm_bytes"),
               "w_answer_ok": c.get("answer_equals_plaintext"), "wo_answer_ok": wo.get("answer_equals_plaintext")}
        for k in ("w", "wo"):
            row[f"{k}_time_ratio"] = ratio(row[f"{k}_s"], row["hers_s"])
            row[f"{k}_bytes_ratio"] = ratio(row[f"{k}_bytes"], row["hers_bytes"])
        rows.append(row)
    return rows


def _get(results, job, key, select=None):
    r = results.get(job)
    if isinstance(r, list):
        r = next((x for x in r if all(x.get(k) == v for k, v in (select or {}).items())), None)
    return papers.field(r, key) if r is not None else None


def _largest(results: dict, scheme: str):
    sized = [(int(k.rsplit(".n", 1)[1]), v) for k, v in results.items()
             if k.startswith(f"bench.identify.{scheme}.n") and isinstance(v, dict)]
    return max(sized, key=lambda t: t[0]) if sized else (None, None)


def _leakage(desc: dict, mode: str | None = None) -> str:
    """What each party learns: the protocol's overall leakage, else that of ``mode``."""
    leak = desc.get("leakage") if mode is None or desc.get("leakage") else None
    leak = leak or ((desc.get("modes") or {}).get(mode) or {}).get("leakage") or {}
    parts = [f"{party.replace('_', ' ')}: {', '.join(items)}" for party, items in leak.items()
             if party != "not_leaked_to_auth_server" and isinstance(items, list)]
    return "; ".join(parts)


def _security(desc: dict, scheme: str | None = None) -> int | None:
    for level in desc.get("security_levels", []):
        if scheme is None or level.get("scheme") == scheme:
            return level.get("security_bits")
    return desc.get("default_security_bits")


def _pair_accuracy(results: dict, ds: str, suffix: str) -> dict | None:
    r = results.get(f"eval.{ds}.{suffix}")
    if not isinstance(r, dict):
        return None
    return {"eer_plaintext": r.get("eer"), "eer_protocol_templates": r.get("eer_quantized"),
            "mismatches": r.get("mismatches"), "pairs": r.get("pairs_run") or r.get("pairs_total"),
            "accuracy_10fold": r.get("accuracy_10fold"), "dataset": r.get("dataset")}


def _ident_accuracy(results: dict, ds: str, suffix: str) -> dict | None:
    r = results.get(f"eval.{ds}.{suffix}")
    if not isinstance(r, dict):
        return None
    if suffix == "cryptomask":
        return {"tpir_plaintext": r.get("detect_mated_plaintext"), "tpir_encrypted": r.get("detect_mated_encrypted"),
                "fpir_plaintext": r.get("detect_nonmated_plaintext"),
                "fpir_encrypted": r.get("detect_nonmated_encrypted"), "mismatches": r.get("mismatches_plaintext"),
                "probes": (r.get("mated_probes") or 0) + (r.get("nonmated_probes") or 0), "dataset": r.get("dataset")}
    return {"rank1_plaintext": r.get("rank1_plaintext"), "rank1_encrypted": r.get("rank1_encrypted"),
            "mismatches": r.get("mismatches"),
            "probes": (r.get("mated_probes") or 0) + (r.get("nonmated_probes") or 0), "dataset": r.get("dataset")}


def comparison(outcomes: list[Outcome]) -> list[dict]:
    """One row per protocol (1:1 then 1:N): latency, bytes, storage per identity, security, post-quantum, leakage,
    accuracy against plaintext on ORL and LFW."""
    from ..protocols import catalogue

    cat = {d["name"]: d for d in catalogue()}
    res = _results(outcomes)
    rows = []

    def add(protocol, label, task, latency_s, latency_note, nbytes, bytes_note, storage, storage_note, security,
            pq_key, learns, acc_key, jobs):
        pq, why = POST_QUANTUM[pq_key]
        rows.append({"protocol": protocol, "label": label, "task": task, "latency_s": latency_s,
                     "latency_note": latency_note, "bytes": nbytes, "bytes_note": bytes_note,
                     "storage_bytes_per_identity": storage, "storage_note": storage_note, "security_bits": security,
                     "post_quantum": pq, "post_quantum_note": why, "learns": learns,
                     "accuracy_orl": acc_key("orl"), "accuracy_lfw": acc_key("lfw"), "jobs": jobs})

    def ms(x):
        return None if x is None else x / 1000

    for mode, label in (("basic", "im2020 basic"), ("secure-comparison", "im2020 secure comparison")):
        job = f"bench.im2020.{mode}"
        suffix = "im2020" if mode == "basic" else "im2020-sc"
        add("im2020", label, "1:1", ms(_get(res, job, "total_ms")), "C2 + S1 + C3 + S2(/S3) + network, C1 excluded",
            _get(res, job, "auth_bytes"), "one authentication, all messages",
            _get(res, job, "enrol_bytes"), "registration messages (the stored ciphertexts)",
            _get(res, job, "security_bits") or _security(cat["im2020"]), "im2020", _leakage(cat["im2020"], mode),
            lambda ds, s=suffix: _pair_accuracy(res, ds, s), [job, f"eval.orl.{suffix}"])
    for v in ("pi1", "pi2", "pi3"):
        job = "bench.gsm.l128-m16"
        reuse = {"pi1": "pi1_t2d_bytes", "pi2": "pi2_reused_m1_bytes"}.get(v)
        reused = _get(res, job, reuse) if reuse else None
        if v == "pi3" and _get(res, job, "pi3_total_bytes") is not None:
            reused = _get(res, job, "pi3_total_bytes") - _get(res, job, "pi3_m1_bytes")
        add("gsm", f"gsm Π{v[-1]}", "1:1", ms(_get(res, job, f"{v}_ms")),
            "matching phase, m1 received (ℓ = 128, m = 16)",
            _get(res, job, f"{v}_total_bytes"),
            "m1 + the session's messages" + (f"; {human_bytes(reused)} with m1 reused" if reused is not None else ""),
            _get(res, job, f"{v}_m1_bytes"), "m1, kept on the user's device (none at the provider)",
            _security(cat["gsm"]), "gsm", _leakage(cat["gsm"], v),
            lambda ds, s=f"gsm-{v}": _pair_accuracy(res, ds, s), [job, f"eval.orl.gsm-{v}"])
    for scheme in ("ckks", "bfv", "ntru"):
        sel = {"scheme": scheme, "dim": 512}
        enc, cmp_ = _get(res, "bench.kolberg", "encrypt_ms", sel), _get(res, "bench.kolberg", "compare_ms", sel)
        add("kolberg", f"kolberg {scheme.upper()}", "1:1 (and 1:N)",
            ms(enc + cmp_) if enc is not None and cmp_ is not None else None,
            "probe encryption + comparison (distance, decryption, decision), d = 512",
            _get(res, "bench.kolberg", "template_bytes", sel), "the encrypted probe (plus a decision)",
            _get(res, "bench.kolberg", "template_bytes", sel), "one encrypted reference",
            _security(cat["kolberg"], scheme), "kolberg",
            "; ".join(x for x in (_leakage({"modes": cat["kolberg"]["modes"]}, scheme), _leakage(cat["kolberg"]))
                      if x),
            lambda ds, s=f"kolberg-{scheme}": _pair_accuracy(res, ds, s),
            ["bench.kolberg", f"eval.orl.kolberg-{scheme}"])
    for scheme, label, desc, sec_scheme in (("hers", "HERS (CKKS)", "hers", "ckks"),
                                            ("idface-ckks", "IDFace CKKS", "idface", "ckks"),
                                            ("idface-paillier", "IDFace Paillier", "idface", "paillier"),
                                            ("cryptomask", "CryptoMask", "cryptomask", "bfv")):
        n, r = _largest(res, scheme)
        r = r or {}
        add(desc, label, "1:N", r.get("identify_s"), f"one identification, N = {n}, d = {r.get('dim')}" if n else "",
            r.get("comm_bytes"), "one identification (" + ("query → key server, answer" if scheme != "cryptomask"
                                                            else "Alg. 2 + Alg. 3") + ")",
            (r["storage_bytes"] / n) if n and r.get("storage_bytes") else None, f"gallery storage / N (N = {n})",
            _security(cat[desc], sec_scheme), scheme,
            _leakage(cat[desc], sec_scheme if desc == "idface" else None),
            lambda ds, s=scheme: _ident_accuracy(res, ds, s),
            [f"bench.identify.{scheme}.n{n}", f"eval.orl.{scheme}", f"eval.lfw.{scheme}"])
    for row in rows:
        if row["protocol"] == "cryptomask" and row["accuracy_orl"] is None:
            row["accuracy_orl"] = {"note": "not run: every ORL identity has ten images, so there is no non-mated "
                                           "probe, which the cryptomask eval needs"}
    commands = {o.job.id: o.job.command for o in outcomes}
    for row in rows:
        if row["protocol"] != "cryptomask" and any(j.startswith("eval.orl.") for j in row["jobs"]):
            row["jobs"] += [j.replace("eval.orl.", "eval.lfw.") for j in row["jobs"] if j.startswith("eval.orl.")]
        row["jobs"] = [j for j in dict.fromkeys(row["jobs"]) if j in commands]
        row["commands"] = [commands[j] for j in row["jobs"]]
    return rows


def baseline(outcomes: list[Outcome]) -> dict:
    """The plaintext eval of each dataset: EER over all its pairs (and LFW's 10-fold accuracy)."""
    res = _results(outcomes)
    out = {}
    for ds in ("orl", "lfw"):
        r = res.get(f"eval.{ds}.plain")
        if isinstance(r, dict):
            out[ds] = {"dataset": r.get("dataset"), "eer": r.get("eer"), "auc": r.get("auc"),
                       "pairs": (r.get("genuine_pairs") or 0) + (r.get("impostor_pairs") or 0),
                       "accuracy_10fold": r.get("accuracy_10fold"), "job": f"eval.{ds}.plain"}
    return out


def _backend_job(ds: str, backend: str, suffix: str) -> str:
    return f"eval.{ds}.{suffix}" if backend == SPEC["name"] else f"eval.{ds}.{backend}.{suffix}"


def backends(outcomes: list[Outcome]) -> list[dict]:
    """One row per (dataset, face backend): verification EER over all the dataset's pairs (LFW: and the 10-fold
    accuracy), and each 1:N protocol's TPIR and FPIR at the default τ (``scale.default_tau``, set on held-out LFW
    identities). dlib-resnet128's come from the paper-reproduction jobs, the other backends' from their own."""
    res = _results(outcomes)
    rows = []
    for ds in ("orl", "lfw"):
        for backend in BACKENDS:
            plain_job = _backend_job(ds, backend, "plain")
            r = res.get(plain_job)
            row = {"dataset": ds, "backend": backend, "dataset_name": None, "eer": None, "accuracy_10fold": None,
                   "accuracy_std": None, "pairs": None, "undetected": None, "one_to_n": {}, "jobs": []}
            if isinstance(r, dict):
                row.update(dataset_name=r.get("dataset"), eer=r.get("eer"), accuracy_10fold=r.get("accuracy_10fold"),
                           accuracy_std=r.get("accuracy_std"), undetected=r.get("undetected"),
                           pairs=(r.get("genuine_pairs") or 0) + (r.get("impostor_pairs") or 0))
                row["jobs"].append(plain_job)
            for suffix in BACKEND_IDENT:
                job = _backend_job(ds, backend, suffix)
                r = res.get(job)
                if not isinstance(r, dict):
                    continue
                row["one_to_n"][suffix] = {
                    "default_tau": r.get("default_tau"), "tpir_default_tau": r.get("tpir_default_tau"),
                    "fpir_default_tau": r.get("fpir_default_tau"), "mated_probes": r.get("mated_probes"),
                    "nonmated_probes": r.get("nonmated_probes"), "identities_enrolled": r.get("identities_enrolled"),
                    "dataset_name": r.get("dataset")}
                row["jobs"].append(job)
            if row["jobs"]:
                rows.append(row)
    return rows


def make_plots(outcomes: list[Outcome], out: Path) -> list[dict]:
    res = _results(outcomes)
    made: list[dict] = []
    series: dict[str, list] = {}
    for k, r in res.items():
        if k.startswith("bench.identify.") and isinstance(r, dict):
            series.setdefault(r["scheme"], []).append((r["n"], r["identify_s"], r.get("comm_bytes") or 0))
    if (p := plots.identify_scaling(series, out / "identify_scaling.png")) is not None:
        made.append({"file": p.name, "title": "1:N identification time and bytes against gallery size (log–log)",
                     "alt": "two log–log panels: seconds and bytes per identification against N, one line per "
                            "scheme", "jobs": sorted(k for k in res if k.startswith("bench.identify."))})
    versus = cryptomask_versus(res)
    if (p := plots.cryptomask_vs_hers(versus, out / "cryptomask_vs_hers.png")) is not None:
        made.append({"file": p.name, "title": "CryptoMask-W, CryptoMask-WO and HERS against gallery size: time "
                                              "(seed 001 Fig. 2) and bytes per identification (Fig. 3)",
                     "alt": "two log–log panels: seconds and bytes per identification against N for CryptoMask-W, "
                            "CryptoMask-WO and HERS", "jobs": sorted({j for r in versus for j in r["jobs"]})})
    bars = []
    for mode, label in (("basic", "im2020 basic"), ("secure-comparison", "im2020 secure comparison")):
        bars.append((label, _get(res, f"bench.im2020.{mode}", "auth_bytes"), None))
    job = "bench.gsm.l128-m16"
    for v in ("pi1", "pi2", "pi3"):
        total = _get(res, job, f"{v}_total_bytes")
        m1 = _get(res, job, f"{v}_m1_bytes")
        bars.append((f"gsm Π{v[-1]} (ℓ 128, m 16)", total, (total - m1) if total and m1 else None))
    for scheme in ("ckks", "bfv", "ntru"):
        bars.append((f"kolberg {scheme.upper()} (d 512)",
                     _get(res, "bench.kolberg", "template_bytes", {"scheme": scheme, "dim": 512}), None))
    if (p := plots.bytes_per_protocol(bars, out / "bytes_1to1.png")) is not None:
        made.append({"file": p.name, "title": "Bytes per 1:1 verification", "alt": "bar chart of bytes per protocol",
                     "jobs": ["bench.im2020.basic", "bench.im2020.secure-comparison", job, "bench.kolberg"]})
    names = {"im2020": "im2020 basic", "im2020-sc": "im2020 sec. comp.", "gsm-pi1": "gsm Π1", "gsm-pi2": "gsm Π2",
             "gsm-pi3": "gsm Π3", "kolberg-ckks": "kolberg CKKS", "kolberg-bfv": "kolberg BFV",
             "kolberg-ntru": "kolberg NTRU"}
    for ds in ("orl", "lfw"):
        curve = _get(res, f"eval.{ds}.plain", "roc_curve")
        pairs = []
        for suffix, name in names.items():
            r = res.get(f"eval.{ds}.{suffix}")
            if isinstance(r, dict) and r.get("eer_quantized") is not None and r.get("eer") is not None:
                n = r.get("pairs_run") or (r.get("genuine_pairs") or 0) + (r.get("impostor_pairs") or 0)
                pairs.append((name, r["eer"], r["eer_quantized"], n, r.get("mismatches")))
        ident = []
        for suffix in ("hers", "idface-ckks", "idface-paillier"):
            t = _get(res, f"eval.{ds}.{suffix}", "tpir_encrypted/1e-2")
            if isinstance(t, dict):
                ident.append((f"{suffix} (1:N, encrypted): TPIR at FPIR 1e-2", t["fpir"], t["tpir"]))
        r = res.get(f"eval.{ds}.cryptomask")
        if isinstance(r, dict):
            ident.append(("cryptomask (1:N, 1 bit), encrypted", r["detect_nonmated_encrypted"],
                          r["detect_mated_encrypted"]))
        title = "ORL" if ds == "orl" else f"LFW ({(res.get(f'eval.{ds}.plain') or {}).get('dataset', 'lfw')})"
        if (p := plots.accuracy(curve, pairs, ident, f"Accuracy on {title}: plaintext and protocols",
                                out / f"accuracy_{ds}.png")):
            made.append({"file": p.name, "title": f"Accuracy on {title}: DET of the plaintext distances with the 1:N "
                                                  "operating points; each 1:1 protocol's EER beside plaintext's on "
                                                  "the same pairs",
                         "alt": f"left: DET curve on {title} with one marker per 1:N protocol; right: EER per 1:1 "
                                "protocol against plaintext EER on the same pairs",
                         "jobs": sorted(k for k in res if k.startswith(f"eval.{ds}."))})
    for plot in made:
        plot["width"], plot["height"] = plots.png_size(out / plot["file"])
    return made


def build(outcomes: list[Outcome], out: Path, *, mode: str, commit: str, started: float, load_start: list[float],
          data_note: str) -> dict:
    plots_made = make_plots(outcomes, out)
    return {
        "title": "privface report",
        "mode": mode,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "commit": commit,
        "machine": {**machine(), "loadavg_start": load_start, "loadavg_end": loadavg()},
        "wall_seconds": round(time.time() - started, 1),
        "data": data_note,
        "papers": paper_sections(outcomes),
        "baseline": baseline(outcomes),
        "backends": backends(outcomes),
        "comparison": comparison(outcomes),
        "plots": plots_made,
        "jobs": [o.to_json() for o in outcomes],
    }
