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
