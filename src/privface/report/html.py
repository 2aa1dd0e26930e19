"""index.html from the report's data (build.build): one self-contained page — inline CSS, the PNGs beside it, no
script — readable from phone to desktop width (tables scroll sideways inside their own box)."""
from __future__ import annotations

import html
import json
import math

CSS = """
:root { --fg: #1b1f24; --muted: #5b6470; --line: #d7dce2; --bg: #fff; --head: #f3f5f8; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); }
main { max-width: 1180px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.3em; }
h2 { font-size: 1.25em; margin: 1.6em 0 0.4em; padding-top: 0.4em; border-top: 2px solid var(--line); }
h3 { font-size: 1.05em; margin: 1.2em 0 0.3em; }
p, li { max-width: 80ch; }
.muted, .note { color: var(--muted); font-size: 0.9em; }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; border: 1px solid var(--line); border-radius: 6px;
          margin: 0.5em 0 1em; }
table { border-collapse: collapse; width: 100%; font-size: 0.86em; }
th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--head); position: sticky; top: 0; white-space: nowrap; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.wide { min-width: 16em; }
tr:last-child td { border-bottom: 0; }
.bad { color: #a4001d; font-weight: 600; }
.ok { color: #116329; }
.yes { color: #116329; font-weight: 600; } .no { color: #8a4b00; font-weight: 600; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 0.88em; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0.4em 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; overflow-wrap: anywhere; }
code { font-size: 0.9em; overflow-wrap: anywhere; }
nav ul { padding-left: 1.2em; columns: 2 16em; }
@media (max-width: 600px) {
  main { padding: 10px; } body { font-size: 14px; } h1 { font-size: 1.3em; }
  table { font-size: 0.8em; } th, td { padding: 4px 5px; }
  dl.kv { grid-template-columns: 1fr; } dl.kv dt { margin-top: 4px; }
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
    return f"{s} {unit}".strip()


def human_bytes(b) -> str:
    if b is None:
        return "—"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= f:
            return f"{b / f:.3g} {unit}"
    return f"{int(b)} B"


def human_seconds(s) -> str:
    if s is None:
        return "—"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def ratio(x) -> str:
    if x is None:
        return "—"
    return f"{x:.3g}×"


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """Cells are HTML already (escaped by the caller)."""
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "\n".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    return (f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>\n{body}\n'
            "</tbody></table></div>")


def td(x, cls: str = "") -> str:
    return f'<td class="{cls}">{x}</td>' if cls else f"<td>{x}</td>"


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
        ours = num(r["ours"], r["unit"]) + (" <span class='muted'>(extrapolated)</span>" if r["extrapolated_from"]
                                             else "")
        rows.append([
            td(esc(r["quantity"]), "wide"),
            td(esc(num(r["paper_value"], r["unit"])), "num"),
            td(f"{esc(r['where'])}<br><span class='muted'>quoted: “{esc(r['quote'])}”</span>"),
            td(shown_paper, "wide"),
            td(ours if measured else "—", "num"),
            td(shown_ours, "wide"),
            td(esc(ratio(r["ratio"])), "num"),
        ])
    table = _table(["quantity", "paper", "where in the paper", "paper's setting", "ours now", "our setting / command",
                    "ours ÷ paper"], rows, "paper")
    return (f'<section id="paper-{esc(sec["paper"])}" class="paper" data-paper="{esc(sec["paper"])}">'
            f"<h2>Seed {esc(sec['seed'])}: {esc(PAPER_NAMES.get(sec['paper'], sec['paper']))}</h2>"
            f"<p class='muted'>{esc(sec['title'])} — <code>{esc(sec['file'])}</code></p>"
            f"<p><b>Paper's setting:</b> {esc(sec['setting'])}</p>{table}</section>")


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


def _comparison(rows: list[dict]) -> str:
    out = []
    for r in rows:
        out.append([
            td(f"<b>{esc(r['label'])}</b><br><span class='muted'>jobs: {esc(', '.join(r['jobs']) or 'none ran')}"
               "</span>"), td(esc(r["task"])),
            td(f"{esc(human_seconds(r['latency_s']))}<br><span class='muted'>{esc(r['latency_note'])}</span>"),
            td(f"{esc(human_bytes(r['bytes']))}<br><span class='muted'>{esc(r['bytes_note'])}</span>"),
            td(f"{esc(human_bytes(r['storage_bytes_per_identity']))}<br>"
               f"<span class='muted'>{esc(r['storage_note'])}</span>"),
            td(esc(r["security_bits"]), "num"),
            td(f"<span class='{'yes' if r['post_quantum'] else 'no'}'>{'yes' if r['post_quantum'] else 'no'}</span>"
               f"<br><span class='muted'>{esc(r['post_quantum_note'])}</span>"),
            td(esc(r["learns"]), "wide"),
            td(_accuracy(r["accuracy_orl"]), "wide"),
            td(_accuracy(r["accuracy_lfw"]), "wide"),
        ])
    return _table(["protocol", "task", "latency", "bytes", "storage / identity", "security bits", "post-quantum",
                   "who learns what", "accuracy vs plaintext: ORL", "accuracy vs plaintext: LFW"], out, "comparison")


def _jobs(jobs: list[dict]) -> str:
    rows = []
    for j in jobs:
        cls = {"error": "bad", "skipped": "bad"}.get(j["status"], "ok")
        rows.append([td(f"<code>{esc(j['id'])}</code>"), td(f"<span class='{cls}'>{esc(j['status'])}</span>"),
                     td(esc(num(j["seconds"], "s")), "num"), td(f"<code>{esc(j['command'])}</code>", "wide"),
                     td(esc(j["note"]))])
    return _table(["job", "status", "wall time", "command (same library call and arguments)", "note"], rows, "jobs")


def _counts(jobs: list[dict]) -> str:
    counts: dict[str, int] = {}
    for j in jobs:
        counts[j["status"]] = counts.get(j["status"], 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))


def render(data: dict) -> str:
    m = data["machine"]
    nav = "".join(f'<li><a href="#paper-{esc(s["paper"])}">Seed {esc(s["seed"])}: '
                  f'{esc(PAPER_NAMES.get(s["paper"], s["paper"]))}</a></li>' for s in data["papers"])
    figures = "".join(f'<figure><img src="{esc(p["file"])}" alt="{esc(p["alt"])}" loading="lazy">'
                      f"<figcaption>{esc(p['title'])} — from {esc(', '.join(p['jobs'][:6]))}"
                      f"{' …' if len(p['jobs']) > 6 else ''}</figcaption></figure>" for p in data["plots"])
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
<p id="status" class="muted">{len(data['jobs'])} jobs: {_counts(data['jobs'])}</p>
<dl class="kv" id="machine">
<dt>generated</dt><dd>{esc(data['generated'])}, {esc(num(data['wall_seconds'], 's'))} wall time</dd>
<dt>commit</dt><dd><code>{esc(data['commit'])}</code></dd>
<dt>machine</dt><dd>{esc(m['cpu_model'])}, {esc(m['cores'])} cores; {esc(m['platform'])}; Python {esc(m['python'])}</dd>
<dt>load average</dt><dd>at start {esc(' / '.join(map(str, m['loadavg_start'])))}, at end
 {esc(' / '.join(map(str, m['loadavg_end'])))} (1, 5, 15 min)</dd>
<dt>datasets</dt><dd>{esc(data['data'])}</dd>
</dl>
{warn}
<p class="note">Every figure below is on this page and in <a href="report.json">report.json</a> with the job that
measured it and the <code>privface</code> command that prints the same figure. Paper figures are quoted from the
papers' text (<code>privface/report/papers.json</code>); "ours ÷ paper" compares different hardware, threads and
often security levels — read the two settings before the ratio.</p>
<nav><ul><li><a href="#comparison">Cross-protocol comparison</a></li><li><a href="#plots">Plots</a></li>{nav}
<li><a href="#jobs">Jobs</a></li></ul></nav>
<section id="comparison"><h2>Cross-protocol comparison</h2>
<p class="muted">Latency and bytes measured now on this machine (1:1 at the protocols' default parameters,
1:N at the largest gallery measured); security bits and leakage from the protocol catalogue
(<code>privface protocols</code>); accuracy from <code>privface eval</code> against the plaintext baseline.</p>
<p id="baseline"><b>Plaintext baseline</b> (dlib ResNet-128, float templates):
{_baseline(data.get('baseline') or {})}</p>
{_comparison(data['comparison'])}</section>
<section id="plots"><h2>Plots</h2>{figures or "<p>No plot: no job produced data for one.</p>"}</section>
{''.join(_paper_section(s) for s in data['papers'])}
<section id="jobs"><h2>Jobs</h2>{_jobs(data['jobs'])}</section>
</main></body></html>
"""


def write_json(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)
