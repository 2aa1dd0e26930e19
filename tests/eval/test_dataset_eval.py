"""Accuracy on the real datasets (slow: CI runs them with --runslow).

The bounds are regression guards set just above what this pipeline measures (see the accuracy
table in docs/lab-notes.md). ORL: all 400 images of the corrected copy (40 Olivetti subjects) at or below seed 000's
0.37 % EER; LFW-grey: the 10-fold accuracy measured on this greyscale copy.
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
    """All 400 images, all 79 800 pairs: EER at or below seed 000's 0.37 %."""
    assert orl["eer"] <= 0.0037, orl["eer"]
    assert orl["rank1"] >= 0.99, orl["rank1"]


def test_orl_default_backend_is_sface(orl):
    """Issue 36: `privface eval` runs SFace by default, seven times fewer ORL errors than dlib's 0.367 %."""
    assert orl["backend"] == "sface" and orl["eer"] <= 0.0006, orl["eer"]


def test_orl_quantized_templates_keep_accuracy(orl):
    assert abs(orl["eer_quantized"] - orl["eer"]) <= 0.0005


def test_lfw_10fold_accuracy(data_root):
    lfw = privface("eval", "--dataset", "lfw", "--data-root", str(data_root), "--json")
    assert lfw["images"] == 7701 and lfw["genuine_pairs"] == 3000 and lfw["impostor_pairs"] == 3000
    assert lfw["undetected"] == 0
    assert lfw["accuracy_10fold"] >= 0.985, lfw["accuracy_10fold"]
