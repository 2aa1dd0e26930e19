"""Accuracy on the real datasets (slow: CI runs them with --runslow).

The bounds are regression guards set just above what this pipeline measures (see the README's
accuracy table); the issue's goals (ORL EER ≤ 0.37 %, LFW-grey ≥ 99.2 %) are met only where the
README says so: the 38 Olivetti subjects of the ORL copy (s1 and s2 of this copy are later,
unconstrained photos of two other people; with them the EER is ~0.8 %).
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


@pytest.fixture(scope="module")
def orl(data_root):
    return privface("eval", "--dataset", "orl", "--data-root", str(data_root), "--json")


def test_orl_every_image_detected(orl):
    assert orl["images"] == 400 and orl["subjects"] == 40 and orl["undetected"] == 0
    assert orl["genuine_pairs"] == 1800 and orl["impostor_pairs"] == 78000


def test_orl_eer(orl):
    assert orl["eer"] <= 0.009, orl["eer"]
    assert orl["rank1"] >= 0.99, orl["rank1"]


def test_orl_quantized_templates_keep_accuracy(orl):
    assert abs(orl["eer_quantized"] - orl["eer"]) <= 0.0005


def test_orl_olivetti_subjects_meet_the_paper(data_root, tmp_path):
    """The 38 subjects of the original Olivetti set (s3…s40): EER at or below seed 000's 0.37 %."""
    src = data_root / "orl" / "images"
    for k in range(3, 41):
        (tmp_path / f"s{k}").symlink_to(src / f"s{k}", target_is_directory=True)
    out = privface("eval", "--dataset", str(tmp_path), "--json")
    assert out["images"] == 380 and out["undetected"] == 0
    assert out["eer"] <= 0.0037, out["eer"]


def test_lfw_10fold_accuracy(data_root):
    lfw = privface("eval", "--dataset", "lfw", "--data-root", str(data_root), "--json")
    assert lfw["images"] == 7701 and lfw["genuine_pairs"] == 3000 and lfw["impostor_pairs"] == 3000
    assert lfw["undetected"] == 0
    assert lfw["accuracy_10fold"] >= 0.985, lfw["accuracy_10fold"]
