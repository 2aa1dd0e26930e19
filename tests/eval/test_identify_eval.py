"""Encrypted 1:N identification on LFW vs plaintext (issue 7 goal: idface rank-1 loss ≤ 1 percentage
point — met at d = 128 with the tight-frame lift into D = 2048, the eval's default; without it T_85/T_85
loses ~9 points, see docs/protocols/idface.md).

Slow (CI runs it with --runslow): a fixed seeded subset of LFW's evaluation part — the whole gallery (one image
of each of its 1 370 identities with ≥ 2 images) and a seeded 2 000 mated + 2 000 non-mated probes — through the
real CKKS parameters. At the gallery default τ (calibrated on held-out identities) FPIR stays ≤ 1e-2 (issue 17).
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
    """The figures these tests guard are dlib's (docs/protocols/idface.md), so the backend is named: `privface eval`
    defaults to sface since issue 36."""
    return privface("eval", "--dataset", "lfw", "--data-root", str(data_root), "--probes", "2000", "--json",
                    "--backend", "dlib-resnet128", *args)


@pytest.fixture(scope="module")
def idface(data_root):
    return lfw(data_root, "--protocol", "idface")


def test_lfw_split(idface):
    assert idface["images"] == 10905 and idface["dataset_part"] == "evaluation"
    assert idface["identities_enrolled"] == 1370
    assert idface["mated_probes"] + idface["nonmated_probes"] >= 3960 and idface["undetected"] <= 40
    assert idface["blocks"] == 1 and idface["security_bits"] >= 128


def test_idface_keeps_the_transformed_answer_and_its_measured_rank1(idface):
    """Regression guard at the measured level (docs/protocols/idface.md: lifted to D = 2048, rank-1 0.8965 vs
    plaintext 0.897)."""
    assert idface["centring"].startswith("shipped (orl") and (idface["alpha"], idface["beta"]) == (1365, 1365)
    assert (idface["lift"], idface["lift_seed"]) == (2048, 3)
    assert idface["rank1_plaintext"] >= 0.88, idface["rank1_plaintext"]
    assert idface["mismatches_transformed"] == 0  # the decrypted answer is the exact ⟨T_α, T_β⟩ argmax
    assert idface["rank1_encrypted"] >= 0.88, idface
    for f in ("1e-2", "1e-3"):
        assert idface["tpir_plaintext"][f]["fpir"] <= float(f)
        assert idface["tpir_encrypted"][f]["fpir"] <= float(f)


def test_idface_default_tau_refuses_strangers(idface):
    assert idface["default_tau"] > 0 and "held-out LFW identities" in idface["default_tau_source"]
    # dlib at τ(1 370) from the 95 % confidence bound (issue 37) accepts ≈ 7 % of mated probes (0.0665 measured; 0.17
    # at the point estimate): the check is that strangers are refused and mated probes still get through at all
    assert idface["fpir_default_tau"] <= 0.01 and idface["tpir_default_tau"] > 0.03, idface


def test_idface_loses_at_most_one_point_of_rank1(idface):
    """Issue 7's goal, with the lift (D = 2048)."""
    assert idface["accuracy_loss_pp"] <= 1.0, idface["accuracy_loss_pp"]


def test_idface_unlifted_loses_several_points(data_root):
    """Why the lift is the default for d = 128 (docs/protocols/idface.md: T_85/T_85 rank-1 0.803, 9.4 points lost)."""
    raw = lfw(data_root, "--protocol", "idface", "--lift", "0")
    assert raw["lift"] is None and (raw["alpha"], raw["beta"]) == (85, 85) and raw["mismatches_transformed"] == 0
    assert 5 <= raw["accuracy_loss_pp"] <= 11, raw["accuracy_loss_pp"]


def test_idface_without_centring_does_not_separate_dlib_faces(data_root):
    raw = lfw(data_root, "--protocol", "idface", "--centring", "none", "--lift", "0", "--beta", "15")
    assert raw["accuracy_loss_pp"] > 20, raw["accuracy_loss_pp"]


def test_hers_has_no_loss(data_root):
    hers = lfw(data_root, "--protocol", "hers")
    assert hers["accuracy_loss_pp"] == 0 and hers["mismatches"] <= 2, hers
    assert hers["fpir_default_tau"] <= 0.01 and hers["tpir_default_tau"] > 0.2, hers
