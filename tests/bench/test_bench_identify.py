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
              "comm_bytes", "peak_rss_mb"):
        assert k in row
    assert row["scheme"] == scheme and row["n"] == n and row["answer_equals_plaintext"] is True


def test_cli_bench_identify_comma_list_threads_and_rounds(capsys):
    """`--scheme cryptomask,hers`: both rows from one gallery, with rounds, threads and cs_peak_rss_mb;
    cryptomask's rounds do not grow with the gallery (Alg. 3 in one batch)."""
    import json

    from privface.cli import main

    rounds = []
    for n in (200, 700):
        assert main(["bench", "identify", "--scheme", "cryptomask,hers", "--n", str(n), "--dim", "128", "--repeat",
                     "1", "--threads", "1", "--insecure-test-params", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [r["scheme"] for r in rows] == ["cryptomask", "hers"]
        for r in rows:
            assert r["n"] == n and r["threads"] == 1 and r["cs_peak_rss_mb"] > 0 and r["answer_equals_plaintext"]
        assert rows[1]["rounds"] == 1 and rows[0]["rounds"] > 1
        rounds.append(rows[0]["rounds"])
    assert rounds[0] == rounds[1]
    assert main(["bench", "identify", "--scheme", "cryptomask,nope", "--n", "10", "--json"]) != 0
    assert "comma list" in capsys.readouterr().err
