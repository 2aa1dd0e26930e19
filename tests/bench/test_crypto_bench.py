"""`privface bench crypto` end to end (subprocess), on toy key sizes so that it takes seconds."""
import json
import subprocess
import sys


def test_bench_crypto_json_rows():
    r = subprocess.run([sys.executable, "-m", "privface.cli", "bench", "crypto", "--json", "--insecure-test-params",
                        "--repeat", "3"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert isinstance(rows, list) and all({"scheme", "bits", "op", "median_ms"} <= set(row) for row in rows)
    assert all(row["median_ms"] > 0 for row in rows)
    ops = {(row["scheme"], row["op"]) for row in rows}
    for scheme in ("paillier", "joye-libert"):
        for op in ("keygen", "encrypt", "encrypt_owner", "decrypt", "add", "scalar_mul"):
            assert (scheme, op) in ops
    assert ("paillier", "encrypt_pool") in ops
    by_op = {(row["scheme"], row["op"]): row for row in rows}
    for scheme in ("cf-paillier", "cf-joye-libert"):
        assert by_op[(scheme, "dec2_esed_k128_serial")]["base_decryptions"] == 129
        assert by_op[(scheme, "dec2_sed_original_k128_serial")]["base_decryptions"] == 257
        assert by_op[(scheme, "dec2_esed_k128_parallel")]["speedup"] > 0
    assert by_op[("packing-ternary", "decode2")]["n"] > by_op[("packing-gsm", "decode2")]["n"]
    gc = {op: by_op[("gc-compare", op)] for op in ("im2020_garble", "im2020_ot", "im2020_evaluate", "im2020_total")}
    assert all(row["bits"] == 64 and row["bytes"] > 0 for row in gc.values())
    assert gc["im2020_total"]["bytes"] > gc["im2020_garble"]["bytes"] >= 32 * gc["im2020_garble"]["and_gates"]


def test_bench_crypto_table():
    r = subprocess.run([sys.executable, "-m", "privface.cli", "bench", "crypto", "--insecure-test-params",
                        "--repeat", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["scheme", "bits", "op", "median"]
    assert any("dec2_esed_k128_parallel" in line and "speedup=" in line for line in lines)


def test_bench_lattice_json_rows():
    """seed 002 Tab. 2–3 keys for ckks/bfv/ntru at dims 512 and 128; sizes within the paper's template sizes."""
    r = subprocess.run([sys.executable, "-m", "privface.cli", "bench", "lattice", "--json", "--repeat", "3"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    keys = {"scheme", "dim", "security_bits", "keygen_ms", "encrypt_ms", "compare_ms", "key_bytes", "template_bytes"}
    assert all(set(row) == keys for row in rows)
    assert ({(row["scheme"], row["dim"]) for row in rows}
            == {(s, d) for s in ("ckks", "bfv", "ntru") for d in (512, 128)})
    assert all(row["security_bits"] >= 128 and row["compare_ms"] > 0 for row in rows)
    limit = {"ckks": 516_000, "bfv": 132_000, "ntru": 5_500}
    assert all(row["template_bytes"] <= limit[row["scheme"]] for row in rows)
