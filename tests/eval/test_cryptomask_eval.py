"""CryptoMask on LFW (issue 7 deliverable 6): `privface eval --dataset lfw --protocol cryptomask` — the verifier's
1-bit answer equals the plaintext decision on the quantised vectors for every probe, at real parameters.

The LFW run is slow (CI runs it with --runslow): the whole gallery of LFW's evaluation part (1 370 identities)
and a seeded 200 mated + 200 non-mated probes, every one through Alg. 2 + Alg. 3, at the gallery default τ
(calibrated on the held-out identities, not on these probes)."""
import json
import subprocess
import sys

import pytest

from privface.cli import main


def test_eval_cryptomask_refuses_options_of_other_protocols(capsys):
    assert main(["eval", "--dataset", "lfw", "--protocol", "cryptomask", "--beta", "15"]) == 2
    assert "--probes and --cos-threshold" in capsys.readouterr().err
    assert main(["eval", "--dataset", "lfw", "--protocol", "cryptomask", "--cos-threshold", "1.5"]) == 2
    assert "cosine in" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.dataset
def test_cryptomask_bit_equals_the_quantised_plaintext_decision_on_lfw(data_root):
    r = subprocess.run([sys.executable, "-m", "privface.cli", "eval", "--dataset", "lfw", "--data-root", str(data_root),
                        "--protocol", "cryptomask", "--probes", "200", "--json"],
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    print(json.dumps(out))
    assert out["identities_enrolled"] == 1370 and out["mated_probes"] == out["nonmated_probes"] == 200
    assert out["tau"] == out["default_tau"] and "held-out LFW identities" in out["tau_source"]
    assert out["mismatches"] == 0  # the protocol reproduces max ⟨q(a), q(b)⟩ ≥ ts exactly
    assert out["mismatches_plaintext"] <= 0.05 * 400  # quantisation at 2^8 flips only probes next to τ
    assert out["fpir_default_tau"] == out["detect_nonmated_encrypted"] <= 0.01
    assert out["tpir_default_tau"] == out["detect_mated_encrypted"] >= 0.2
    assert out["security_bits"] == 128 and out["comm_bytes"] > 0
