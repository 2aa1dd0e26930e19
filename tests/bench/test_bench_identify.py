"""`privface bench identify --json`: one object with the documented keys; the answer equals plaintext."""
import pytest


@pytest.mark.parametrize("scheme", ["plain", "hers", "idface-ckks", "idface-paillier", "cryptomask"])
def test_cli_bench_identify_json(scheme, capsys):
    import json

    from privface.cli import main

    n = 60 if scheme == "idface-paillier" else 300
    assert main(["bench", "identify", "--scheme", scheme, "--n", str(n), "--dim", "128", "--repeat", "1",
                 "--insecure-test-params", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    for k in ("scheme", "n", "dim", "enrol_s", "identify_s", "plaintext_identify_s", "ratio", "storage_bytes",
              "comm_bytes", "peak_rss_mb", "cs_peak_rss_mb", "rounds", "threads"):
        assert k in row
    assert row["scheme"] == scheme and row["n"] == n and row["answer_equals_plaintext"] is True
    assert row["rounds"] >= (2 if scheme == "cryptomask" else 1 if scheme != "plain" else 0)


def test_cli_bench_identify_runs_a_comma_list_back_to_back_in_child_processes(capsys):
    """`--scheme cryptomask,hers`: a JSON list in the order given, one row per scheme on the same gallery, each from
    its own process (its own peak memory), with the thread cap applied."""
    import json
    import os

    from privface.cli import main

    assert main(["bench", "identify", "--scheme", "cryptomask,hers", "--n", "300", "--dim", "128", "--repeat", "1",
                 "--threads", "1", "--insecure-test-params", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["scheme"] for r in rows] == ["cryptomask", "hers"]
    assert all(r["threads"] == 1 and r["answer_equals_plaintext"] is True for r in rows)
    assert rows[0]["plaintext_identify_s"] > 0 and rows[0]["rounds"] > rows[1]["rounds"] == 1
    assert "PRIVFACE_THREADS" not in os.environ  # the cap was the children's, not left in this process


def test_bench_identify_refuses_unknown_or_repeated_schemes():
    from privface.bench.identify import parse_schemes
    from privface.errors import PrivfaceError

    assert parse_schemes("cryptomask,hers") == ["cryptomask", "hers"]
    for bad in ("cryptomask,rsa", "hers,hers", "", "hers,"):
        with pytest.raises(PrivfaceError):
            parse_schemes(bad)
