"""Galleries made with `privface gallery enrol` defaults refuse strangers (issue 17 §12).

A gallery of 40 real faces (ORL ``sN/1.pgm``), enrolled with the CLI's default settings, then identification of
15 people who are not in it (LFW identities of the evaluation part, one image each): at the calibrated default
τ nobody is accepted; the enrolled photos themselves still are, under their own id. With the former synthetic
defaults (cosine 0.5; ⌊min(α, β)/4⌋) every stranger was accepted under someone's name.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from privface.eval.datasets import load_identification
from privface.scale import identify

pytestmark = [pytest.mark.slow, pytest.mark.dataset]


def _strangers(data_root, n=15):
    ds = load_identification("lfw", data_root)  # evaluation part: disjoint from the calibration identities
    names, counts = np.unique(ds.ids, return_counts=True)
    single = set(names[counts == 1][:n])
    return [p for p, i in zip(ds.paths, ds.ids) if i in single]


@pytest.mark.parametrize("scheme", ["hers", "idface-ckks", "cryptomask"])
def test_default_tau_refuses_strangers(scheme, data_root, backend, tmp_path):
    faces = tmp_path / "faces"
    faces.mkdir()
    for k in range(1, 41):
        (faces / f"s{k}.pgm").symlink_to(data_root / "orl" / "images" / f"s{k}" / "1.pgm")
    url = f"sqlite:///{tmp_path}/g.db"
    r = subprocess.run([sys.executable, "-m", "privface.cli", "gallery", "enrol", "--scheme", scheme,
                        "--gallery", url, "--backend", "dlib-resnet128", "--json", str(faces)],  # dlib's τ and probes
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["n"] == 40
    strangers = _strangers(data_root)
    assert len(strangers) == 15
    for path in strangers:
        out = identify(backend.embed(str(path)), url)
        assert out["id"] is None and out.get("match", False) is False, (path.name, out)
        assert "held-out LFW identities" in out["tau_source"] and out["tau"] > 0.9 * (scheme != "idface-ckks")
    for k in (3, 17, 40):
        out = identify(backend.embed(str(faces / f"s{k}.pgm")), url)
        assert out["id"] == (None if scheme == "cryptomask" else f"s{k}") and out.get("match", True), out
