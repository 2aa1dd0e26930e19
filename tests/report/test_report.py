"""`privface report`: the paper-data file, the HTML/JSON writers, and the command end to end on a tiny job set
(toy parameters, no datasets)."""
from __future__ import annotations

import html as htmllib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from privface.cli import main
from privface.report import build, html, jobs, papers


def test_every_paper_row_cites_and_parses():
    data = papers.load()
    per_paper = {name: 0 for name in papers.PAPERS}
    for row in data["rows"]:
        per_paper[row["paper"]] += 1
        assert row["where"] and row["quote"] and row["quantity"]
        assert papers.quoted_number(row["quote"]) == row["value"]
        assert row["unit"] in papers.UNITS
        if "ours" in row:
            assert papers.UNITS[row["ours"]["unit"]][0] == papers.UNITS[row["unit"]][0]
    assert all(n >= 5 for n in per_paper.values()), per_paper
    for name in papers.PAPERS:
        assert data["papers"][name]["setting"]


def test_every_ours_names_a_planned_job():
    ids = {j.id for mode in ("quick", "full") for j in jobs.plan(mode)}
    for row in papers.load()["rows"]:
        if "ours" in row:
            job = row["ours"]["job"]
            assert job in ids or any(i.startswith(job + ".n") for i in ids), job


PAPERS_DIR = Path(os.environ.get("PRIVFACE_PAPERS", "/work/shared/papers"))


@pytest.mark.skipif(not PAPERS_DIR.is_dir(), reason="the papers' text copies are not here ($PRIVFACE_PAPERS)")
def test_every_quote_is_in_its_paper():
    data = papers.load()
    texts = {name: (PAPERS_DIR / p["file"]).read_text() for name, p in data["papers"].items()}
    missing = [(r["paper"], r["quote"]) for r in data["rows"] if r["quote"] not in texts[r["paper"]]]
    assert not missing


@pytest.mark.parametrize("bad", [{"quote": "12.5"}, {"unit": "furlong"}, {"where": ""}])
def test_validate_rejects_a_bad_row(bad):
    data = json.loads(json.dumps(papers.load()))
    data["rows"][0].update(bad)
    with pytest.raises(ValueError):
        papers.validate(data)


def test_quoted_numbers():
    assert papers.quoted_number("1,082") == 1082
    assert papers.quoted_number("0.063 ± 0.0005s") == 0.063
    assert papers.quoted_number("a total of 142KB") == 142
    assert papers.convert(33.64, "KiB", "B") == pytest.approx(33.64 * 1024)


def test_resolve_takes_the_largest_gallery_and_scales():
    row = {"unit": "s", "value": 2.0, "ours": {"job": "bench.identify.x", "field": "identify_s", "unit": "s",
                                              "n": 1024}}
    res = {"bench.identify.x.n256": {"identify_s": 1.0}, "bench.identify.x.n512": {"identify_s": 3.0}}
    got = papers.resolve(row, res)
    assert got["value"] == 6.0 and got["extrapolated_from"] == 512 and got["job"] == "bench.identify.x.n512"
    res["bench.identify.x.n512"].update(blocks=1, templates_per_block=300)  # 1024 needs 4 blocks of 300
    assert papers.resolve(row, res)["value"] == 12.0


def _outcome(job_id, result, status="ok"):
    return jobs.Outcome(jobs.Job(job_id, job_id, f"privface {job_id}", "job_identify"), result, status, 1.0)


def test_writers_agree(tmp_path):
    outcomes = [
        _outcome("bench.identify.hers.n1024", {"scheme": "hers", "n": 1024, "dim": 512, "identify_s": 0.125,
                                               "comm_bytes": 131076, "storage_bytes": 67108864, "enrol_s": 12.0,
                                               "threads": 2}),
        _outcome("bench.kolberg", [{"scheme": "ntru", "dim": 512, "security_bits": 199, "keygen_ms": 40.0,
                                    "encrypt_ms": 3.5, "compare_ms": 1.25, "key_bytes": 2100,
                                    "template_bytes": 4321}]),
        _outcome("eval.orl.plain", None, "skipped"),
    ]
    data = build.build(outcomes, tmp_path, mode="quick", commit="abc123", started=0.0, load_start=[1.0, 2.0, 3.0],
                       data_note="PRIVFACE_DATA is not set")
    page = html.render(data)
    back = json.loads(html.write_json(data))
    assert back["commit"] == "abc123" and back["machine"]["loadavg_start"] == [1.0, 2.0, 3.0]
    for name in papers.PAPERS:
        assert f'data-paper="{name}"' in page
    assert 'id="comparison"' in page and "PRIVFACE_DATA is not set" in page
    ntru = next(r for r in back["papers"] if r["paper"] == "kolberg")["rows"]
    row = next(r for r in ntru if r["quantity"] == "NTRU comparison (distance, decryption, decision)")
    assert row["ours"] == 1.25 and row["ratio"] == pytest.approx(1.25 / 23)
    assert html.num(row["ours"], row["unit"]) in page
    hers = next(r for r in back["comparison"] if r["label"] == "HERS (CKKS)")
    assert hers["latency_s"] == 0.125 and hers["storage_bytes_per_identity"] == 65536
    assert html.human_seconds(0.125) in page and html.human_bytes(65536) in page
    assert (tmp_path / "identify_scaling.png").is_file()
    assert "<script" not in page and "http://" not in page and "https://" not in page


def test_command_end_to_end_on_tiny_jobs(tmp_path, monkeypatch, capsys):
    """The CLI on a few toy-parameter jobs: a section per paper, the comparison table, report.json = the page; a
    second run reuses every cached result."""
    monkeypatch.delenv("PRIVFACE_DATA", raising=False)
    out = tmp_path / "r"
    only = ["--only", "bench.identify.plain", "--only", "bench.identify.hers.n64", "--only", "bench.im2020.basic",
            "--only", "bench.gsm", "--only", "eval.orl.plain"]
    assert main(["report", "--out", str(out), "--jobs-mode", "tiny", "--no-progress", *only]) == 0
    page = (out / "index.html").read_text()
    data = json.loads((out / "report.json").read_text())
    status = {j["id"]: j["status"] for j in data["jobs"]}
    assert status == {"bench.identify.plain.n64": "ok", "bench.identify.plain.n256": "ok",
                      "bench.identify.hers.n64": "ok", "bench.im2020.basic": "ok", "bench.gsm.l128-m16": "ok",
                      "eval.orl.plain": "skipped"}
    for name in papers.PAPERS:
        assert f'<section id="paper-{name}"' in page
    assert '<section id="comparison">' in page and 'class="comparison"' in page
    assert "PRIVFACE_DATA is not set" in page
    # every measured figure of the paper tables is on the page as shown
    shown = 0
    for sec in data["papers"]:
        for row in sec["rows"]:
            if row["ours"] is not None:
                assert htmllib.escape(html.shown(row, "ours")) in page, row
                shown += 1
    assert shown >= 10  # im2020 Table I and the gsm rows at ℓ = 128
    for row in data["comparison"]:
        assert htmllib.escape(html.human_bytes(row["bytes"])) in page
        assert re.search(re.escape(htmllib.escape(row["label"])), page)
    for p in data["plots"]:
        assert (out / p["file"]).is_file() and p["file"] in page
    cached = list((out / "cache").glob("*.json"))
    assert len(cached) == 5
    capsys.readouterr()
    assert main(["report", "--out", str(out), "--jobs-mode", "tiny", "--no-progress", *only]) == 0
    again = json.loads((out / "report.json").read_text())
    assert {j["id"]: j["status"] for j in again["jobs"] if j["status"] != "skipped"} == dict.fromkeys(
        [k for k, v in status.items() if v == "ok"], "cached")


def test_atomic_write_leaves_no_temporary(tmp_path):
    jobs.write_atomically(tmp_path / "a.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_failed_job_is_reported_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "job_identify", lambda **kw: 1 / 0)
    job = jobs.Job("bench.identify.plain.n4", "t", "privface t", "job_identify", {"scheme": "plain"})
    [o] = jobs.run_jobs([job], tmp_path, "c", progress=False)
    assert o.status == "error" and "ZeroDivisionError" in o.note
    assert not list(tmp_path.glob("*.json"))  # nothing cached: the next run tries again


# ---------------------------------------------------------------- issue 35 B7: what a reader of the page tripped over


def test_shown_quotes_have_the_papers_symbols():
    """The text copies print ± as "£" or "+" (OCR of seed 003's Tab. 2) and keep LaTeX ("$76 (\\pm 1)$"): the page shows
    the symbols, and the number read from the quote is still the row's value."""
    assert papers.shown_quote("0.063 £ 0.0005s") == "0.063 ± 0.0005 s"
    assert papers.shown_quote("48.9 + 0.20s") == "48.9 ± 0.20 s"
    assert papers.shown_quote("198 £+ 0.73s") == "198 ± 0.73 s"
    assert papers.shown_quote("$76 (\\pm 1)$") == "76 (±1)"
    assert papers.shown_quote("618 ( $\\pm 26$ )") == "618 (±26)"
    assert papers.shown_quote("up to $\\sim 5\\times$") == "up to ∼5×"
    assert papers.shown_quote("9642%") == "96.42%"
    assert papers.shown_quote("a total of 142KB") == "a total of 142KB"
    for row in papers.load()["rows"]:
        shown = papers.shown_quote(row["quote"])
        assert not re.search(r"[£$\\]", shown), shown
        assert papers.quoted_number(shown) == row["value"]


def _filled_outcomes():
    """im2020 (its bytes quoted in KiB), kolberg (KB and MB), identify (GB) and an ORL eval (a % row)."""
    im = {"security_bits": 112, "jl_modulus_bits": 2048, "k": 128, "transport": "http", "workers": 2, "repeat": 3,
          "c2_encrypt_ms": 30.1, "s1_blind_esed_ms": 9.5, "c3_decrypt_ms": 765.0, "s2_unblind_ms": 0.02,
          "network_ms": 4.1, "total_ms": 164.4, "auth_bytes": 45312, "enrol_bytes": 22116}
    kolberg = [{"scheme": s, "dim": 512, "security_bits": 128, "keygen_ms": 300.0, "encrypt_ms": 4.0,
                "compare_ms": 30.0, "key_bytes": 400_000, "template_bytes": 140_000} for s in ("ckks", "bfv", "ntru")]
    return [_outcome("bench.im2020.basic", im), _outcome("bench.kolberg", kolberg),
            _outcome("bench.identify.hers.n1024", {"scheme": "hers", "n": 1024, "dim": 512, "identify_s": 0.125,
                                                   "comm_bytes": 131076, "storage_bytes": 67108864, "enrol_s": 12.0}),
            _outcome("eval.orl.plain", {"dataset": "orl", "eer": 0.011, "eer_quantized": 0.0125, "auc": 0.9995,
                                        "genuine_pairs": 1800, "impostor_pairs": 78000})]


@pytest.fixture
def filled_page(tmp_path):
    data = build.build(_filled_outcomes(), tmp_path, mode="quick", commit="abc", started=0.0, load_start=[],
                       data_note="PRIVFACE_DATA=/data")
    return data, html.render(data)


def _outside_quotes(page: str) -> str:
    return re.sub(r"<q>.*?</q>", "", page)


def test_page_quotes_show_symbols_not_ocr_or_latex(filled_page):
    data, page = filled_page
    assert "£" not in page and "\\pm" not in page and "\\times" not in page and "$" not in page
    assert "0.063 ± 0.0005 s" in page and "76 (±1)" in page
    # report.json keeps the text copy's characters (test_every_quote_is_in_its_paper) beside what the page shows
    row = next(r for s in data["papers"] for r in s["rows"] if r["quote"] == "0.063 £ 0.0005s")
    assert row["quote_shown"] == "0.063 ± 0.0005 s"


def test_page_has_one_unit_system(filled_page):
    """Sizes in SI units only (kB = 1000 B): im2020's KiB figures are converted, kolberg's KB written kB."""
    data, page = filled_page
    text = _outside_quotes(page)
    assert not re.search(r"\d\s*(KiB|MiB|GiB|KB|Kb)\b", text), re.findall(r".{30}(?:KiB|MiB|GiB|KB)\b", text)
    assert re.search(r"\d\s?kB\b", text)
    auth = next(r for s in data["papers"] for r in s["rows"] if r["quantity"] == "bytes of one authentication")
    assert auth["unit"] == "KiB" and auth["shown"]["unit"] == "kB"
    assert auth["shown"]["paper"] == pytest.approx(33.64 * 1.024) and auth["shown"]["ours"] == pytest.approx(45.312)
    assert html.num(auth["shown"]["paper"], "kB") in page


def test_every_ratio_says_which_way_is_better(filled_page):
    data, page = filled_page
    cells = re.findall(r'<td data-label="ours ÷ paper[^"]*" class="num ratio"><div>(.*?)</div></td>', page)
    measured = [c for c in cells if c != "—"]
    assert len(measured) >= 15
    for c in measured:
        assert re.fullmatch(r"[\d.e+-]+×<span class=\"verdict (better|worse|same)\">(ours (faster|slower|smaller|"
                            r"larger|better|worse)|about the same)</span>", c), c
    rows = {r["quantity"]: r for s in data["papers"] for r in s["rows"]}
    assert rows["C3 client level-2 decryption"]["verdict"] == {"class": "same", "words": "about the same"}
    assert rows["C2 client encryption of Γ′"]["verdict"] == {"class": "better", "words": "ours faster"}
    assert rows["bytes of one authentication"]["verdict"] == {"class": "worse", "words": "ours larger"}
    assert rows["ORL EER (plaintext system)"]["verdict"] == {"class": "worse", "words": "ours worse"}  # 1.25 > 0.37
    assert rows["ORL AUC"]["verdict"]["class"] == "same"
    assert rows["NTRU template encryption"]["verdict"] == {"class": "better", "words": "ours faster"}
    # the comparison table's columns say which way is better too
    assert page.count("lower is better") >= 3


def test_a_rate_row_must_say_which_way_is_better():
    data = json.loads(json.dumps(papers.load()))
    row = next(r for r in data["rows"] if r["quantity"] == "ORL EER (plaintext system)")
    del row["better"]
    with pytest.raises(ValueError, match="better"):
        papers.validate(data)


def test_jobs_table_has_no_empty_column(filled_page):
    """The note sits under the status (cached from …, the error, why skipped); no column of empty cells."""
    data, page = filled_page
    jobs_table = page[page.index('<table class="jobs">'):]
    jobs_table = jobs_table[:jobs_table.index("</table>")]
    head = re.findall(r"<th>(.*?)</th>", jobs_table)
    assert "note" not in head
    cells = re.findall(r'<td data-label="([^"]*)"[^>]*><div>(.*?)</div></td>', jobs_table)
    for label in set(lab for lab, _ in cells):
        assert any(v.strip() for lab, v in cells if lab == label), label


def test_plots_are_not_lazy_and_have_their_size(filled_page):
    data, page = filled_page
    assert 'loading="lazy"' not in page
    for p in data["plots"]:
        assert f'width="{p["width"]}" height="{p["height"]}"' in page and p["width"] > 100


def test_pages_are_written_as_utf8_whatever_the_locale(tmp_path):
    """The page says charset=utf-8: it is written as UTF-8 even where the locale's encoding is ASCII or Latin-1."""
    out = tmp_path / "index.html"
    text = "0.063 ± 0.0005 s, Π₃ → ∼5×"
    code = ("import sys; from pathlib import Path; from privface.report.jobs import write_atomically; "
            f"write_atomically(Path(sys.argv[1]), {ascii(text)}, 0o644)")  # ascii: the command line is ASCII here
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    proc = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert out.read_bytes().decode("utf-8") == text


def test_cryptomask_section_compares_with_hers_per_gallery_size(tmp_path):
    """Seed 001 Fig. 2 / Fig. 3: per N measured by both schemes, W, WO and HERS's time and bytes and the ratios,
    taken from the bench results (a size only one scheme measured is left out)."""
    cm = {"scheme": "cryptomask", "n": 4096, "dim": 128, "identify_s": 2.0, "comm_bytes": 600_000,
          "answer_equals_plaintext": True, "variant": "w",
          "wo": {"variant": "wo", "identify_s": 0.5, "comm_bytes": 100_000, "answer_equals_plaintext": True}}
    hers = {"scheme": "hers", "n": 4096, "dim": 128, "identify_s": 1.0, "comm_bytes": 200_000}
    outcomes = [_outcome("bench.identify.cryptomask.n4096", cm), _outcome("bench.identify.hers.n4096", hers),
                _outcome("bench.identify.hers.n1024", {**hers, "n": 1024})]
    data = build.build(outcomes, tmp_path, mode="quick", commit="abc", started=0.0, load_start=[], data_note="")
    sec = next(s for s in data["papers"] if s["paper"] == "cryptomask")
    (row,) = sec["versus"]
    assert (row["n"], row["w_time_ratio"], row["wo_time_ratio"], row["w_bytes_ratio"], row["wo_bytes_ratio"]) == (
        4096, 2.0, 0.5, 3.0, 0.5)
    page = html.render(data)
    assert "cryptomask-vs-hers" in page and html.human_bytes(600_000) in page and "0.5×" in page
    assert (tmp_path / "cryptomask_vs_hers.png").is_file()
    empty = build.build(outcomes[1:], tmp_path, mode="quick", commit="abc", started=0.0, load_start=[], data_note="")
    assert next(s for s in empty["papers"] if s["paper"] == "cryptomask")["versus"] == []


def _ident(tau, tpir, fpir, dataset="lfw"):
    return {"dataset": dataset, "default_tau": tau, "tpir_default_tau": tpir, "fpir_default_tau": fpir,
            "mated_probes": 5000, "nonmated_probes": 3000, "identities_enrolled": 1559}


def test_backends_side_by_side(tmp_path):
    """Issue 36: dlib (the paper-reproduction jobs) and SFace (their own jobs) in one table, on ORL and LFW:
    verification EER / 10-fold accuracy and the 1:N TPIR/FPIR at the default τ."""
    outcomes = [
        _outcome("eval.orl.plain", {"dataset": "orl", "eer": 0.00367, "genuine_pairs": 1800, "impostor_pairs": 78000}),
        _outcome("eval.orl.sface.plain", {"dataset": "orl", "eer": 0.000526, "genuine_pairs": 1800,
                                          "impostor_pairs": 78000}),
        _outcome("eval.lfw.plain", {"dataset": "lfw", "eer": 0.0141, "accuracy_10fold": 0.9868,
                                    "genuine_pairs": 3000, "impostor_pairs": 3000}),
        _outcome("eval.lfw.sface.plain", {"dataset": "lfw", "eer": 0.00933, "accuracy_10fold": 0.99333,
                                          "accuracy_std": 0.0042, "genuine_pairs": 3000, "impostor_pairs": 3000}),
        _outcome("eval.lfw.hers", _ident(0.9557, 0.2987, 0.0021)),
        _outcome("eval.lfw.sface.hers", _ident(0.5481, 0.8876, 0.0024)),
        _outcome("eval.lfw.sface.cryptomask", _ident(0.5481, 0.9312, None)),
    ]
    data = build.build(outcomes, tmp_path, mode="quick", commit="abc", started=0.0, load_start=[],
                       data_note="PRIVFACE_DATA=/data")
    rows = {(r["dataset"], r["backend"]): r for r in data["backends"]}
    assert set(rows) == {("orl", "dlib-resnet128"), ("orl", "sface"), ("lfw", "dlib-resnet128"), ("lfw", "sface")}
    assert rows["orl", "sface"]["eer"] == 0.000526 and rows["orl", "dlib-resnet128"]["eer"] == 0.00367
    assert rows["lfw", "sface"]["accuracy_10fold"] == 0.99333
    assert rows["lfw", "dlib-resnet128"]["one_to_n"]["hers"]["tpir_default_tau"] == 0.2987
    assert rows["lfw", "sface"]["one_to_n"]["hers"]["tpir_default_tau"] == 0.8876
    assert rows["lfw", "sface"]["jobs"] == ["eval.lfw.sface.plain", "eval.lfw.sface.hers", "eval.lfw.sface.cryptomask"]
    page = html.render(data)
    section = page[page.index('<section id="backends">'):page.index('<section id="comparison">')]
    for figure in ("0.05\u00a0%", "0.37\u00a0%", "99.33\u00a0%", "98.68\u00a0%", "TPIR 88.76\u00a0%, FPIR 0.24\u00a0%",
                   "TPIR 29.87\u00a0%, FPIR 0.21\u00a0%", "TPIR 93.12\u00a0%, no non-mated probe"):
        assert figure in section, figure
    assert section.count("<code>sface</code>") == 2 and section.count("<code>dlib-resnet128</code>") == 2
    assert json.loads(html.write_json(data))["backends"] == data["backends"]


def test_plan_runs_every_backend_and_commands_name_theirs():
    """Each backend's plaintext and 1:N evals are planned on ORL and LFW; every eval command names its backend
    (`privface eval` defaults to sface, the paper reproductions are dlib's) and im2020, gsm, kolberg over every pair say
    --pairs all (the CLI samples 2 000 by default)."""
    full = {j.id: j for j in jobs.plan("full")}
    for ds in ("orl", "lfw"):
        assert full[f"eval.{ds}.sface.plain"].args["backend"] == "sface"
        assert full[f"eval.{ds}.sface.hers"].args["backend"] == "sface"
        assert f"eval.{ds}.hers" in full and "backend" not in full[f"eval.{ds}.hers"].args
    assert "eval.lfw.sface.cryptomask" in full and "eval.orl.sface.cryptomask" not in full
    for j in full.values():
        if j.id.startswith("eval."):
            backend = j.args.get("backend", jobs.SPEC["name"])
            assert f"--backend {backend}" in j.command, j.command
    assert "--pairs all" in full["eval.orl.im2020"].command
    assert "--pairs all" not in full["eval.orl.gsm-pi1"].command  # a 2 000-pair sample, said as --pairs 2000
