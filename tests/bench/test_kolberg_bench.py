"""`privface bench kolberg` and `bench kolberg-unlinkability` end to end (subprocess, few repeats)."""
import json
import subprocess
import sys

KEYS = {"scheme", "dim", "security_bits", "keygen_ms", "encrypt_ms", "compare_ms", "key_bytes", "template_bytes"}


def _run(*args: str):
    r = subprocess.run([sys.executable, "-m", "privface.cli", "bench", *args], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_bench_kolberg_rows_through_the_parties():
    rows = json.loads(_run("kolberg", "--json", "--repeat", "2"))
    assert [(r["scheme"], r["dim"]) for r in rows] == [(s, d) for d in (512, 128) for s in ("ckks", "bfv", "ntru")]
    assert all(set(r) == KEYS and r["security_bits"] >= 128 for r in rows)
    assert all(r["keygen_ms"] > 0 and r["encrypt_ms"] > 0 and r["compare_ms"] > 0 for r in rows)
    limit = {"ckks": 516_000, "bfv": 132_000, "ntru": 5_500}  # seed 002 Tab. 3
    assert all(r["template_bytes"] <= limit[r["scheme"]] for r in rows)
    by = {(r["scheme"], r["dim"]): r for r in rows}
    assert by[("ntru", 512)]["template_bytes"] == 12 + 5 + 2 * 2 * 1024  # 1536 LSSC bits = 2 blocks of uint16
    assert by[("ntru", 128)]["key_bytes"] < 3_000 < by[("bfv", 128)]["key_bytes"] < by[("ckks", 128)]["key_bytes"]
    # no dimension-dependent keys (sizes differ by a few bytes of zstd output only)
    # SEAL serializes keys zstd-compressed: sizes vary by a few kB between fresh keys, whatever the dimension
    assert abs(by[("ckks", 512)]["key_bytes"] - by[("ckks", 128)]["key_bytes"]) < 0.01 * by[("ckks", 128)]["key_bytes"]


def test_bench_kolberg_filters_and_table():
    rows = json.loads(_run("kolberg", "--json", "--repeat", "1", "--scheme", "ntru", "--dim", "64"))
    assert [(r["scheme"], r["dim"]) for r in rows] == [("ntru", 64)]
    assert _run("kolberg", "--repeat", "1", "--scheme", "bfv", "--dim", "16").splitlines()[0].split()[:2] == \
        ["scheme", "dim"]


def test_bench_kolberg_unlinkability_json():
    (row,) = json.loads(_run("kolberg-unlinkability", "--json", "--scheme", "ntru", "--subjects", "30"))
    assert row["scheme"] == "ntru" and row["mated_pairs"] == 30 * 10
    assert row["plaintext_auc_correlation"] > 0.95
    assert 0.3 < row["auc_correlation"] < 0.7  # 300 mated pairs: SE ≈ 0.017
