"""`privface report`: the paper-data file, the HTML/JSON writers, and the command end to end on a tiny job set
(toy parameters, no datasets)."""
from __future__ import annotations

import html as htmllib
import json
import os
import re
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
                assert htmllib.escape(html.num(row["ours"], row["unit"])) in page, row
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
