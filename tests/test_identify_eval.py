"""Encrypted 1:N identification on LFW vs plaintext (issue 7 goal: idface rank-1 loss ≤ 1 percentage
point — not met at d = 128, see the README; the goal test is a strict xfail).

Slow (CI runs it with --runslow): a fixed seeded subset — the whole gallery (one image of each of LFW's 1 680
identities with ≥ 2 images) and a seeded 2 000 mated + 2 000 non-mated probes — through the real CKKS parameters.
"""
import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.dataset]


def privface(*args):
    r = subprocess.run([sys.executable, "-m", "privface.cli", *args], capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def lfw(data_root, *args):
    return privface("eval", "--dataset", "lfw", "--data-root", str(data_root), "--probes", "2000", "--json", *args)


@pytest.fixture(scope="module")
def idface(data_root):
    return lfw(data_root, "--protocol", "idface")


def test_lfw_split(idface):
    assert idface["images"] == 13233 and idface["identities_enrolled"] == 1680
    assert idface["mated_probes"] + idface["nonmated_probes"] >= 3960 and idface["undetected"] <= 40
    assert idface["blocks"] == 1 and idface["security_bits"] >= 128


def test_idface_keeps_the_transformed_answer_and_its_measured_rank1(idface):
    """Regression guard at the measured level (README: rank-1 0.803 vs plaintext 0.897 at α = β = 85)."""
    assert idface["centring"].startswith("shipped (orl") and (idface["alpha"], idface["beta"]) == (85, 85)
    assert idface["rank1_plaintext"] >= 0.88, idface["rank1_plaintext"]
    assert idface["mismatches_transformed"] == 0  # the decrypted answer is the exact ⟨T_α, T_β⟩ argmax
    assert idface["rank1_encrypted"] >= 0.78 and idface["accuracy_loss_pp"] <= 11, idface
    for f in ("1e-2", "1e-3"):
        assert idface["tpir_plaintext"][f]["fpir"] <= float(f)
        assert idface["tpir_encrypted"][f]["fpir"] <= float(f)


@pytest.mark.xfail(strict=True, reason="issue 7 goal not met at d = 128: T_85/T_85 on centred dlib embeddings "
                   "loses ~9 points of rank-1 on LFW (README); an XPASS means the goal is reached")
def test_idface_loses_at_most_one_point_of_rank1(idface):
    assert idface["accuracy_loss_pp"] <= 1.0, idface["accuracy_loss_pp"]


def test_idface_without_centring_does_not_separate_dlib_faces(data_root):
    raw = lfw(data_root, "--protocol", "idface", "--centring", "none", "--beta", "15")
    assert raw["accuracy_loss_pp"] > 20, raw["accuracy_loss_pp"]


def test_hers_has_no_loss(data_root):
    hers = lfw(data_root, "--protocol", "hers")
    assert hers["accuracy_loss_pp"] == 0 and hers["mismatches"] <= 2, hers
