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


def test_cli_bench_identify_variant_w_wo_on_one_gallery(capsys):
    """`--scheme cryptomask,hers --variant w,wo` (seed 001 Fig. 2): CryptoMask-W and -WO rows from one enrolled
    gallery, then hers; WO sends only the query and the distances, in one exchange, and names the plaintext's best."""
    import json

    from privface.cli import main

    assert main(["bench", "identify", "--scheme", "cryptomask,hers", "--variant", "w,wo", "--n", "300", "--dim",
                 "128", "--repeat", "1", "--insecure-test-params", "--json"]) == 0
    w, wo, hers = json.loads(capsys.readouterr().out)
    assert (w["variant"], wo["variant"], hers["scheme"]) == ("w", "wo", "hers")
    assert w["enrol_s"] == wo["enrol_s"] and all(r["answer_equals_plaintext"] is True for r in (w, wo, hers))
    assert set(wo["bytes_per_phase"]) == {"query", "distances"} and wo["rounds"] == 1 and wo["best"] == 100
    assert wo["bytes_per_phase"]["distances"] == w["bytes_per_phase"]["distances"] < w["comm_bytes"]
    for r in (w, wo):  # the CS's distance steps, thread-seconds: every step ran, none longer than the phase by far
        steps = r["distance_steps"]
        assert set(steps) == {"products_mac", "products_intt", "drop", "pack", "pack_ntt", "finish"}
        assert steps["pack"] > 0 and steps["products_intt"] > 0 and steps["pack_ntt"] < steps["pack"]
    assert main(["bench", "identify", "--scheme", "hers", "--variant", "wo", "--n", "8", "--json"]) == 2


def test_bench_identify_refuses_unknown_or_repeated_schemes():
    from privface.bench.identify import parse_schemes
    from privface.errors import PrivfaceError

    assert parse_schemes("cryptomask,hers") == ["cryptomask", "hers"]
    for bad in ("cryptomask,rsa", "hers,hers", "", "hers,"):
        with pytest.raises(PrivfaceError):
            parse_schemes(bad)


def test_cli_bench_identify_ray_shards_beside_in_process(tmp_path):
    """`--ray local --shards 1,2` (issue 38): the in-process row, then one row per shard count, each with the
    per-shard load time, resident bytes and IP_DB time, a bit-identical IP_DB message and the same answer. In a child
    process: Ray's gRPC threads must not stay in the test process (tests/scale/test_gallery.py)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), str(root)]))
    r = subprocess.run([sys.executable, "-m", "privface.cli", "bench", "identify", "--scheme", "hers", "--n", "3000",
                        "--dim", "64", "--ray", "local", "--shards", "1,2", "--repeat", "1", "--insecure-test-params",
                        "--json"], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    assert [(row["mode"], row["shards"]) for row in rows] == [("in-process", 0), ("ray", 1), ("ray", 2)]
    assert rows[0]["answer_equals_plaintext"] is True and rows[0]["blocks"] == 3
    assert rows[0]["key_ciphertexts"] == 3 and rows[0]["key_decrypt_same"] is True  # S_key: own process = workers
    assert rows[0]["key_decrypt_ct_per_s"] > 0 and rows[0]["key_decrypt_parallel_ct_per_s"] > 0
    assert abs(rows[0]["resident_bytes_per_identity"] - rows[0]["resident_bytes"] / 3000) < 0.1
    for row in rows[1:]:
        assert row["key_server_s"] > 0 and row["cpu_ratio"] > 0 and row["ip_db_cpu_s"] > 0
        assert row["answer_equals_in_process"] is True and row["resident_bytes"] == rows[0]["resident_bytes"]
        assert [s["blocks"] for s in row["per_shard"]] == ([3] if row["shards"] == 1 else [2, 1])
        assert all(s["load_s"] > 0 and s["ip_db_s"] > 0 and s["resident_bytes"] > 0 and s["ip_db_cpu_s"] > 0
                   for s in row["per_shard"])
        assert row["fanout_overhead_s"] >= 0 or abs(row["fanout_overhead_s"]) < 0.05


def test_bench_identify_ray_needs_hers_and_shards(capsys):
    from privface.bench.sharded import parse_shards
    from privface.cli import main
    from privface.errors import PrivfaceError

    assert parse_shards("1,2") == [1, 2]
    for bad in ("0", "1,1", "", "a"):
        with pytest.raises(PrivfaceError):
            parse_shards(bad)
    for args in (["--scheme", "idface-ckks", "--ray", "local", "--shards", "2"],
                 ["--scheme", "hers", "--ray", "local"]):
        assert main(["bench", "identify", *args, "--n", "10", "--insecure-test-params"]) != 0
        assert "--ray and --shards go together" in capsys.readouterr().err
