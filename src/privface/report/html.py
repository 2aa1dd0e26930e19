"""index.html from the report's data (build.build): one self-contained page — inline CSS, the PNGs beside it, no
script — readable from phone to desktop width: tables wrap to the width of the page and, on a narrow screen, stack
each row as a card of "column: value" lines, so no column is ever off screen."""
from __future__ import annotations

import html
import json
import math

CSS = """
:root { --fg: #1b1f24; --muted: #5b6470; --line: #d7dce2; --bg: #fff; --head: #f3f5f8; --accent: #0b5cad;
        --better: #116329; --worse: #a4001d; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); }
main { max-width: 1240px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.3em; }
h2 { font-size: 1.25em; margin: 1.6em 0 0.4em; padding-top: 0.4em; border-top: 2px solid var(--line); }
h3 { font-size: 1.05em; margin: 1.2em 0 0.3em; }
p, li { max-width: 80ch; }
.muted, .note { color: var(--muted); font-size: 0.9em; }
.tbl { border: 1px solid var(--line); border-radius: 6px; margin: 0.5em 0 1em; }
table { border-collapse: collapse; width: 100%; font-size: 0.86em; }
th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--head); position: sticky; top: 0; font-weight: 600; }
th small { display: block; font-weight: 400; color: var(--muted); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num > div { white-space: nowrap; }
code, .ids { font-size: 0.9em; overflow-wrap: anywhere; }
tr:last-child td { border-bottom: 0; }
.bad { color: var(--worse); font-weight: 600; }
.ok { color: var(--better); }
.yes { color: var(--better); font-weight: 600; } .no { color: #8a4b00; font-weight: 600; }
.verdict { display: block; font-weight: 600; white-space: nowrap; }
.verdict.better { color: var(--better); } .verdict.worse { color: var(--worse); }
.verdict.same { color: var(--muted); }
.verdict.better::before { content: "▲ "; } .verdict.worse::before { content: "▼ "; }
.verdict.same::before { content: "= "; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 440px), 1fr)); gap: 10px 16px;
         align-items: start; }
figure { margin: 0; } figure.wide { grid-column: 1 / -1; }
figure img { display: block; max-width: 100%; height: auto; max-height: 62vh; object-fit: contain;
             border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 0.85em; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0.4em 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; overflow-wrap: anywhere; }
nav ul { margin: 0.3em 0; padding: 0; list-style: none; display: flex; flex-wrap: wrap; gap: 2px 14px; }
q { quotes: "“" "”"; }
/* Narrow screens: each table row becomes a card of "header: value" lines — every column stays on screen. */
@media (max-width: 900px) {
  main { padding: 10px; } body { font-size: 14px; } h1 { font-size: 1.3em; }
  dl.kv { grid-template-columns: 1fr; } dl.kv dt { margin-top: 4px; }
  .tbl { border: 0; }
  table, tbody, tr, td { display: block; width: 100%; }
  thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  tr { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 10px; padding: 4px 0; }
  td { display: grid; grid-template-columns: minmax(5.5em, 32%) minmax(0, 1fr); gap: 8px; padding: 3px 8px;
       border: 0; }
  td::before { content: attr(data-label); color: var(--muted); font-weight: 600; }
  td.num { text-align: left; }
}
"""

PAPER_NAMES = {"im2020": "im2020 — Im, Jeon, Lee (TIFS 2020)", "cryptomask": "CryptoMask",
               "kolberg": "Kolberg et al. (BIOSIG)", "idface": "IDFace (and HERS)", "gsm": "Game-Set-MATCH (CCS)"}


def esc(x) -> str:
    return html.escape("" if x is None else str(x))


def num(x, unit: str = "") -> str:
    """A figure as shown: 4 significant digits, thousands separated; "—" when missing."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) >= 1000):
        s = f"{int(x):,}"
    elif abs(x) >= 100:
        s = f"{x:,.1f}"
    else:
        s = f"{x:.4g}"
    return f"{s}\u00a0{unit}" if unit else s  # a no-break space: a figure never wraps from its unit


def human_bytes(b) -> str:
    if b is None:
        return "—"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= f:
            return f"{b / f:.3g}\u00a0{unit}"
    return f"{int(b)}\u00a0B"


def human_seconds(s) -> str:
    if s is None:
        return "—"
    if s >= 1:
        return f"{s:.3g}\u00a0s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g}\u00a0ms"
    return f"{s * 1e6:.3g}\u00a0µs"


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:.2f}\u00a0%"


def ratio(x) -> str:
    if x is None:
        return "—"
    return f"{x:.3g}×"


def ratio_cell(r: dict) -> str:
    """ours ÷ paper, and which way is better in words and colour (class better | worse | same)."""
    if r["ratio"] is None:
        return "—"
    v = r.get("verdict")
    words = (f'<span class="verdict {esc(v["class"])}">{esc(v["words"])}</span>' if v else "")
    return esc(ratio(r["ratio"])) + words


def job_id(x: str) -> str:
    """A job id that breaks at its dots, not mid-word, in a narrow column."""
    return esc(x).replace(".", ".<wbr>")


def _table(head: list[tuple[str, str]], rows: list[list[tuple[str, str]]], cls: str = "") -> str:
    """``head``: (label, note under it); ``rows``: (HTML escaped by the caller, class) per cell. Each cell carries its
    column's label (data-label): on a narrow screen the CSS stacks a row's cells as "label: value" lines."""
    th = "".join(f"<th>{esc(h)}{f'<small>{esc(n)}</small>' if n else ''}</th>" for h, n in head)
    body = "\n".join("<tr>" + "".join(
        f'<td data-label="{esc(f"{h} ({n})" if n else h)}"{f" class={chr(34)}{c}{chr(34)}" if c else ""}>'
        f"<div>{x}</div></td>" for (h, n), (x, c) in zip(head, r)) + "</tr>" for r in rows)
    return (f'<div class="tbl"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>\n{body}\n'
            "</tbody></table></div>")


def shown(r: dict, which: str) -> str:
    """A paper-table figure in the row's shown unit (sizes in SI units whatever the paper printed)."""
    return num(r["shown"][which], r["shown"]["unit"])


def _quote(r: dict) -> str:
    """The quote as the paper prints it (LaTeX and the text copy's OCR damage repaired: papers.shown_quote)."""
    note = " (printed in kibibytes, 1,024 B each)" if r["unit"] == "KiB" else ""
    return f"quoted: <q>{esc(r['quote_shown'])}</q>{note}"


def _paper_section(sec: dict) -> str:
    rows = []
    last_paper = last_ours = None
    for r in sec["rows"]:
        ours_setting = esc(r["our_setting"] or "not compared (no equivalent measurement)") + (
            f"<br><code>{esc(r['command'])}</code>" if r.get("command") else "")
        paper_setting = esc(r["paper_setting"])
        shown_paper = paper_setting if paper_setting != last_paper else "<span class='muted'>as above</span>"
        shown_ours = ours_setting if ours_setting != last_ours or not r.get("command") else (
            "<span class='muted'>as above</span>")
        last_paper, last_ours = paper_setting, ours_setting
        measured = r["ours"] is not None
        ours = esc(shown(r, "ours")) + (" <span class='muted'>(extrapolated)</span>" if r["extrapolated_from"]
                                         else "")
        rows.append([
            (esc(r["quantity"]), ""),
            (esc(shown(r, "paper")), "num"),
            (f"{esc(r['where'])}<br><span class='muted quote'>{_quote(r)}</span>", ""),
            (shown_paper, ""),
            (ours if measured else "—", "num"),
            (shown_ours, ""),
            (ratio_cell(r), "num ratio"),
        ])
    table = _table([("quantity", ""), ("paper", ""), ("where in the paper", ""), ("paper's setting", ""),
                    ("ours now", ""), ("our setting / command", ""), ("ours ÷ paper", "")],
                   rows, "paper")
    return (f'<section id="paper-{esc(sec["paper"])}" class="paper" data-paper="{esc(sec["paper"])}">'
            f"<h2>Seed {esc(sec['seed'])}: {esc(PAPER_NAMES.get(sec['paper'], sec['paper']))}</h2>"
            f"<p class='muted'>{esc(sec['title'])} — <code>{esc(sec['file'])}</code></p>"
            f"<p><b>Paper's setting:</b> {esc(sec['setting'])}</p>{table}{_versus(sec.get('versus'))}</section>")


def _versus(rows: list[dict] | None) -> str:
    """CryptoMask against HERS per gallery size, as seed 001's Fig. 2 (time) and Fig. 3 (bytes) draw them."""
    if rows is None:
        return ""
    if not rows:
        return ("<p class='muted' id='cryptomask-vs-hers'>CryptoMask against HERS (Fig. 2, Fig. 3): no gallery size "
                "measured by both <code>bench identify</code> jobs in this run.</p>")
    body = [[(num(r["n"]), "num"), (human_seconds(r["w_s"]), "num"), (human_seconds(r["wo_s"]), "num"),
             (human_seconds(r["hers_s"]), "num"), (ratio(r["w_time_ratio"]), "num"),
             (ratio(r["wo_time_ratio"]), "num"), (human_bytes(r["w_bytes"]), "num"),
             (human_bytes(r["wo_bytes"]), "num"), (human_bytes(r["hers_bytes"]), "num"),
             (ratio(r["w_bytes_ratio"]), "num"), (ratio(r["wo_bytes_ratio"]), "num"),
             (esc(", ".join(r["jobs"])), "")] for r in rows]
    table = _table([("N", ""), ("W time", ""), ("WO time", ""), ("HERS time", ""), ("W ÷ HERS", ""),
                    ("WO ÷ HERS", ""), ("W bytes", ""), ("WO bytes", ""), ("HERS bytes", ""), ("W ÷ HERS", ""),
                    ("WO ÷ HERS", ""), ("jobs", "")], body, "versus")
    return ("<h3 id='cryptomask-vs-hers'>CryptoMask against HERS per gallery size (Fig. 2: time, Fig. 3: bytes)</h3>"
            "<p class='muted'>One identification, d as in the jobs, measured now on this machine (same run): W is "
            "Alg. 2 + Alg. 3 (the verifier learns one bit), WO is CryptoMask-WO (the verifier decrypts the distances, "
            "as HERS' key server does). Ratios below 1 favour CryptoMask.</p>" + table)


def _accuracy(a: dict | None) -> str:
    if not a:
        return "—"
    if "note" in a:
        return f"<span class='muted'>{esc(a['note'])}</span>"
    if "eer_plaintext" in a:
        s = f"<b>{a.get('mismatches')} of {a.get('pairs')}</b> decisions differ from plaintext"
        s += (f"; on these pairs EER plain {pct(a['eer_plaintext'])}, protocol templates "
              f"{pct(a['eer_protocol_templates'])}")
        if a.get("accuracy_10fold") is not None:
            s += f"; 10-fold acc. {pct(a['accuracy_10fold'])}"
    elif "rank1_plaintext" in a:
        s = (f"<b>{a.get('mismatches')} of {a.get('probes')}</b> answers differ from plaintext; rank-1 plain "
             f"{pct(a['rank1_plaintext'])}, encrypted {pct(a['rank1_encrypted'])}")
    else:
        s = (f"<b>{a.get('mismatches')} of {a.get('probes')}</b> bits differ from plaintext; mated detected plain "
             f"{pct(a['tpir_plaintext'])} / encrypted {pct(a['tpir_encrypted'])}, non-mated plain "
             f"{pct(a['fpir_plaintext'])} / encrypted {pct(a['fpir_encrypted'])}")
    if a.get("dataset") and a["dataset"] not in ("orl", "lfw"):
        s += f" <span class='muted'>[{esc(a['dataset'])}: a sample]</span>"
    return s


def _baseline(b: dict) -> str:
    parts = []
    for ds in ("orl", "lfw"):
        r = b.get(ds)
        if not r:
            parts.append(f"{ds.upper()}: not run")
            continue
        s = f"{esc(r['dataset'])}: EER {pct(r['eer'])} over {num(r['pairs'])} pairs"
        if r.get("accuracy_10fold") is not None:
            s += f", 10-fold accuracy {pct(r['accuracy_10fold'])}"
        if r["dataset"] not in ("orl", "lfw"):
            s += " <span class='muted'>(a sample)</span>"
        parts.append(s)
    return "; ".join(parts)


def _backends(rows: list[dict]) -> str:
    """Face backends side by side: verification and the 1:N operating points at the default τ."""
    if not rows:
        return "<p>No backend eval ran (they need PRIVFACE_DATA).</p>"
    out = []
    for r in rows:
        if r["eer"] is None:
            verif = "not run"
        else:
            verif = f"EER {pct(r['eer'])} over {num(r['pairs'])} pairs"
            if r.get("accuracy_10fold") is not None:
                verif += f"; 10-fold accuracy {pct(r['accuracy_10fold'])}"
                if r.get("accuracy_std") is not None:
                    verif += f" ± {pct(r['accuracy_std'])}"
            if r.get("undetected"):
                verif += f"; {num(r['undetected'])} undetected"
            if r.get("dataset_name") not in (None, "orl", "lfw"):
                verif += " <span class='muted'>(a sample)</span>"
        cells = []
        for suffix in ("hers", "idface-ckks", "cryptomask"):
            a = r["one_to_n"].get(suffix)
            if not a:
                cells.append(("—", ""))
                continue
            if a.get("tpir_default_tau") is None:
                cells.append(("<span class='muted'>no default τ</span>", ""))
                continue
            fpir = ("no non-mated probe" if a.get("fpir_default_tau") is None
                    else f"FPIR {pct(a['fpir_default_tau'])}")
            sample = (" <span class='muted'>(a sample)</span>"
                      if a.get("dataset_name") not in (None, "orl", "lfw") else "")
            cells.append((f"TPIR {pct(a['tpir_default_tau'])}, {fpir}<br><span class='muted'>τ = "
                          f"{a['default_tau']:g}; {num(a.get('mated_probes'))} + "
                          f"{num(a.get('nonmated_probes'))} probes</span>{sample}", ""))
        out.append([(f"<b>{esc(r['dataset'].upper())}</b>", ""), (f"<code>{esc(r['backend'])}</code>", ""),
                    (verif, ""), *cells])
    return _table([("dataset", ""), ("backend", ""), ("verification (plaintext)", "lower EER is better"),
                   ("HERS 1:N at default τ", "higher TPIR, lower FPIR"),
                   ("IDFace (CKKS) 1:N at default τ", "higher TPIR, lower FPIR"),
                   ("CryptoMask 1:N (1 bit) at default τ", "higher TPIR, lower FPIR")], out, "backends")


def _comparison(rows: list[dict]) -> str:
    out = []
    for r in rows:
        pq = "yes" if r["post_quantum"] else "no"
        acc = "".join(f"<div><b>{ds.upper()}:</b> {_accuracy(r[f'accuracy_{ds}'])}</div>" for ds in ("orl", "lfw"))
        out.append([
            (f"<b>{esc(r['label'])}</b> ({esc(r['task'])})<br><span class='muted ids'>jobs: "
             f"{', '.join(map(job_id, r['jobs'])) or 'none ran'}</span>", ""),
            (f"{esc(human_seconds(r['latency_s']))}<br><span class='muted'>{esc(r['latency_note'])}</span>", ""),
            (f"{esc(human_bytes(r['bytes']))}<br><span class='muted'>{esc(r['bytes_note'])}</span>", ""),
            (f"{esc(human_bytes(r['storage_bytes_per_identity']))}<br>"
             f"<span class='muted'>{esc(r['storage_note'])}</span>", ""),
            (f"{esc(num(r['security_bits']))} bits<br>post-quantum: <span class='{pq}'>{pq}</span> "
             f"<span class='muted'>({esc(r['post_quantum_note'])})</span>", ""),
            (esc(r["learns"]), ""),
            (acc, ""),
        ])
    return _table([("protocol (task)", ""), ("latency", "lower is better"), ("bytes", "lower is better"),
                   ("storage / identity", "lower is better"), ("security", "higher bits are better"),
                   ("who learns what", ""), ("accuracy vs plaintext", "fewer differing decisions are better")],
                  out, "comparison")


def _jobs(jobs: list[dict]) -> str:
    rows = []
    for j in jobs:
        cls = {"error": "bad", "skipped": "bad"}.get(j["status"], "ok")
        note = f"<br><span class='muted'>{esc(j['note'])}</span>" if j["note"] else ""
        rows.append([(f"<code>{job_id(j['id'])}</code>", ""),
                     (f"<span class='{cls}'>{esc(j['status'])}</span>{note}", ""),
                     (esc(num(j["seconds"], "s")), "num"), (f"<code>{esc(j['command'])}</code>", "")])
    return _table([("job", ""), ("status", ""), ("wall time", ""), ("command (same library call and arguments)", "")],
                  rows, "jobs")


def _counts(jobs: list[dict]) -> str:
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j["status"]] = counts.get(j["status"], 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))


def _figure(p: dict) -> str:
    """A plot, not lazy and with its size: the plots come first and are on screen as the page opens."""
    size = f' width="{p["width"]}" height="{p["height"]}"' if p.get("width") else ""
    wide = ' class="wide"' if p.get("width", 0) > 1000 else ""
    jobs = esc(", ".join(p["jobs"][:6])) + (" …" if len(p["jobs"]) > 6 else "")
    return (f'<figure{wide}><a href="{esc(p["file"])}"><img src="{esc(p["file"])}" alt="{esc(p["alt"])}"{size}></a>'
            f"<figcaption>{esc(p['title'])} <span class='ids'>— from {jobs}</span></figcaption></figure>")


def render(data: dict) -> str:
    m = data["machine"]
    nav = "".join(f'<li><a href="#paper-{esc(s["paper"])}">Seed {esc(s["seed"])}: '
                  f'{esc(PAPER_NAMES.get(s["paper"], s["paper"]))}</a></li>' for s in data["papers"])
    figures = "".join(_figure(p) for p in data["plots"])
    failed = [j for j in data["jobs"] if j["status"] == "error"]
    warn = (f"<p class='bad'>{len(failed)} job(s) failed: {esc(', '.join(j['id'] for j in failed))} — see "
            "<a href='#jobs'>Jobs</a>.</p>" if failed else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{esc(data['title'])} — {esc(data['mode'])}</title>
<style>{CSS}</style></head>
<body><main>
<h1>{esc(data['title'])} <span class="muted">({esc(data['mode'])})</span></h1>
<p id="status" class="muted">{len(data['jobs'])} jobs: {_counts(data['jobs'])}; generated {esc(data['generated'])} on
 {esc(m['cores'])} cores (<a href="#run">this run</a>)</p>
{warn}
<nav><ul><li><a href="#plots">Plots</a></li><li><a href="#backends">Face backends</a></li>
<li><a href="#comparison">Cross-protocol comparison</a></li>{nav}
<li><a href="#run">This run</a></li><li><a href="#jobs">Jobs</a></li></ul></nav>
<section id="plots"><h2>Plots</h2>
<div class="plots">{figures or "<p>No plot: no job produced data for one.</p>"}</div></section>
<section id="backends"><h2>Face backends side by side</h2>
<p class="muted">The same datasets, probes and protocols with each face backend: <code>privface eval --backend
B</code> (SFace is <code>privface eval</code>'s default). 1:N at each backend's default τ, calibrated on LFW
identities held out of every evaluation (<code>python -m privface.eval.default_tau</code>), never on these probes.
The paper reproductions below run on dlib-resnet128, as the papers' own figures do.</p>
{_backends(data.get('backends') or [])}</section>
<section id="comparison"><h2>Cross-protocol comparison</h2>
<p class="muted">Latency and bytes measured now on this machine (1:1 at the protocols' default parameters,
1:N at the largest gallery measured); security bits and leakage from the protocol catalogue
(<code>privface protocols</code>); accuracy from <code>privface eval</code> against the plaintext baseline.
Sizes in SI units (1 kB = 1,000 B) throughout the page.</p>
<p id="baseline"><b>Plaintext baseline</b> (dlib ResNet-128, float templates):
{_baseline(data.get('baseline') or {})}</p>
{_comparison(data['comparison'])}
<p class="muted">Every figure in this table and in the paper sections below is measured with
<code>--backend dlib-resnet128</code>.</p></section>
<p class="note">Every figure on this page is in <a href="report.json">report.json</a> with the job that
measured it and the <code>privface</code> command that prints the same figure. Paper figures are quoted from the
papers' text (<code>privface/report/papers.json</code>); "ours ÷ paper" compares different hardware, threads and
often security levels — read the two settings before the ratio. Beside each ratio, in words and colour: ▲ ours
better (faster, smaller or more accurate), ▼ ours worse, = within 5 %.</p>
{''.join(_paper_section(s) for s in data['papers'])}
<section id="run"><h2>This run</h2>
<dl class="kv" id="machine">
<dt>generated</dt><dd>{esc(data['generated'])}, {esc(num(data['wall_seconds'], 's'))} wall time</dd>
<dt>commit</dt><dd><code>{esc(data['commit'])}</code></dd>
<dt>machine</dt><dd>{esc(m['cpu_model'])}, {esc(m['cores'])} cores; {esc(m['platform'])}; Python {esc(m['python'])}</dd>
<dt>load average</dt><dd>at start {esc(' / '.join(map(str, m['loadavg_start'])))}, at end
 {esc(' / '.join(map(str, m['loadavg_end'])))} (1, 5, 15 min)</dd>
<dt>datasets</dt><dd>{esc(data['data'])}</dd>
</dl></section>
<section id="jobs"><h2>Jobs</h2>{_jobs(data['jobs'])}</section>
</main></body></html>
"""


def write_json(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
