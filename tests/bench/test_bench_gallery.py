"""`privface bench gallery` (issue 37 item 5): a real enrolment and real add / remove / update on a fresh store;
the row has the documented keys and the gallery ends with the identities it should hold. Toy CKKS."""
import json
import subprocess
import sys

import pytest

from privface.bench.gallery import bench_gallery


@pytest.mark.parametrize("scheme", ["hers", "idface-ckks", "idface-paillier", "cryptomask"])
def test_bench_gallery_row(scheme):
    row = bench_gallery(scheme, 300, 128, batch=20, repeat=2, insecure_test_params=True)
    erasing = True  # the removes erase
    withdrawing = scheme != "cryptomask"  # and the row adds 2 removes without erasure (withdraw_s)
    assert row["n"] == 300 and row["identities_after"] == 300 + 2 + 20 - 2 - 2 * withdrawing  # adds, minus removed
    assert row["erased"] is erasing and (row["withdraw_s"] is not None) is withdrawing
    if erasing:
        assert row["remove_bytes_to_key"] > 0 and row["remove_bytes_from_key"] > 0
        assert row["erase_hiding_bits"] is None or row["erase_hiding_bits"] >= 40
    for key in ("enrol_s", "add_one_s", "add_batch_s", "add_per_identity_s", "remove_s", "update_s"):
        assert row[key] > 0, key
    assert len(row["load_average"]) == 3


def test_bench_gallery_cli_json():
    r = subprocess.run([sys.executable, "-m", "privface.cli", "bench", "gallery", "--scheme", "hers", "--n", "100",
                        "--dim", "16", "--repeat", "1", "--insecure-test-params", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["scheme"] == "hers"


def test_bench_gallery_keep_reuses_the_enrolled_gallery(tmp_path):
    """``keep``: the second run enrols nothing, changes identities still present (fresh names for its adds) and
    ends with the counts both runs' changes give; a kept directory of other settings is refused."""
    keep = str(tmp_path / "kept")
    first = bench_gallery("hers", 200, 16, batch=5, repeat=1, insecure_test_params=True, keep=keep)
    second = bench_gallery("hers", 200, 16, batch=5, repeat=1, insecure_test_params=True, keep=keep)
    assert first["reused"] is False and first["enrol_s"] > 0
    assert second["reused"] is True and second["enrol_s"] is None and second["erased"] is True
    assert first["identities_after"] == 200 + 1 + 5 - 2 and second["identities_after"] == 200 + 2 * (1 + 5 - 2)
    with pytest.raises(ValueError, match="another bench gallery"):
        bench_gallery("hers", 300, 16, batch=5, repeat=1, insecure_test_params=True, keep=keep)
