"""`privface bench load` (issue 8 §5): concurrent full im2020 authentications against a `privface serve` child
process over loopback HTTP (API keys on). Toy keys here; the figure in docs/lab-notes.md is the 112-bit run."""
import json

from privface.bench.load import KEYS, bench_load
from privface.cli import main


def test_load_run_has_every_key_and_no_errors():
    row = bench_load(concurrency=6, seconds=3, identities=2, insecure_test_params=True)
    assert set(KEYS) <= set(row) and row["protocol"] == "im2020" and row["concurrency"] == 6
    assert row["errors"] == 0 and row["error_kinds"] == {}, row
    assert row["requests"] >= 6 and row["throughput_rps"] > 0
    assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
    assert row["server_peak_rss_mb"] > 20  # the child's VmHWM, not this process's


def test_bench_load_cli_validates_its_arguments(capsys):
    for args in (["--concurrency", "0"], ["--seconds", "-1"], ["--identities", "0"], ["--protocol", "gsm"]):
        assert main(["bench", "load", "--insecure-test-params", "--json", *args]) == 2
        assert "privface: error:" in capsys.readouterr().err
    assert main(["bench", "load", "--insecure-test-params", "--concurrency", "2", "--seconds", "1",
                 "--identities", "1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["concurrency"] == 2 and row["errors"] == 0
