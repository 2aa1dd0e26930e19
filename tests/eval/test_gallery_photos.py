"""`privface eval --gallery-photos K` (issue 37): K photos fused per identity, figures at the default τ(N).

The fast tests check the splits on synthetic data and that bad options are usage errors; the slow ones run ORL
(40 subjects, LFW non-mated probes) through the real encrypted schemes with toy keys and a small probe sample.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privface.eval.gallery_photos import evaluate, lfw_split, orl_split

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def _unit_rows(n, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, 8))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_orl_split_fuses_the_first_photos_and_probes_the_others():
    ids = np.repeat(["s1", "s2", "s10"], 4)
    found = np.ones(12, bool)
    found[1] = False  # s1's second photo has no face: its third is enrolled instead
    x = _unit_rows(12)
    names, t, mated, owner = orl_split(x, ids, found, 2)
    assert names == ["s1", "s2", "s10"] and list(mated) == [3, 6, 7, 10, 11] and list(owner) == [0, 1, 1, 2, 2]
    want = x[[0, 2]].mean(axis=0)
    assert np.allclose(t[0], want / np.linalg.norm(want)) and np.allclose(np.linalg.norm(t, axis=1), 1)


def test_lfw_split_probes_identities_with_four_photos_after_the_third():
    ids = np.array(["a"] * 5 + ["b"] * 2 + ["c"] + ["d"] * 4)
    names, t, mated, owner, non, probed = lfw_split(_unit_rows(12), ids, np.ones(12, bool), 1)
    assert (names, probed) == (["a", "d", "b"], 2)
    assert list(mated) == [3, 4, 11] and list(owner) == [0, 0, 1] and list(non) == [7]


@pytest.mark.parametrize("args, msg", [
    (["--protocol", "plain"], "goes with --protocol hers, idface or cryptomask"),
    (["--protocol", "hers", "--tau", "3"], "τ is the gallery default"),
    (["--protocol", "hers", "--scheme", "paillier"], "--scheme"),
])
def test_bad_options_are_usage_errors(args, msg):
    r = subprocess.run([sys.executable, "-m", "privface.cli", "eval", "--dataset", "orl", "--gallery-photos", "1",
                        *args], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode != 0 and msg in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.dataset
@pytest.mark.parametrize("protocol, scheme", [("hers", "ckks"), ("idface", "paillier"), ("cryptomask", "ckks")])
def test_orl_at_tau_40_finds_the_enrolled_and_refuses_strangers(protocol, scheme, data_root):
    out = evaluate("orl", {"name": "sface"}, protocol=protocol, scheme=scheme, photos=3, nonmated=60,
                   encrypted_probes=20, data_root=data_root, insecure_test_params=True)
    row = out["rows"][0]
    assert (out["identities_enrolled"], out["mated_probes"], out["encrypted_probes"]) == (40, 280, 40)
    assert row["n"] == 40 and "N = 40" in row["default_tau_source"]
    assert row["tpir_default_tau_plaintext"] >= 0.98 and row["fpir_default_tau_plaintext"] <= 1 / 60
    assert row["tpir_default_tau_encrypted"] >= 0.95 and row["fpir_default_tau_encrypted"] == 0
    if protocol == "cryptomask":
        assert row["mismatches"] == 0
    else:  # the decrypted scores give the plaintext FNIR on the same probes
        assert abs(row["encrypted"]["fnir"] - row["plaintext_same_probes"]["fnir"]) <= 0.05


@pytest.mark.slow
@pytest.mark.dataset
def test_cli_json(data_root):
    r = subprocess.run([sys.executable, "-m", "privface.cli", "eval", "--dataset", "orl", "--protocol", "hers",
                        "--gallery-photos", "1", "--backend", "sface", "--nonmated", "30", "--probes", "5",
                        "--insecure-test-params", "--json", "--data-root", str(data_root)],
                       capture_output=True, text=True, env=ENV, timeout=1800)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["gallery_photos"] == 1 and out["mated_probes"] == 360 and out["default_tau_figures"].startswith("plain")
    assert out["tpir_default_tau"] >= 0.95 and out["fpir_default_tau"] <= 1 / 30
