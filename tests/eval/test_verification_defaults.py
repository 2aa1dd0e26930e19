"""verification_defaults: the procedure reproduces every shipped dlib-resnet128 1:1 default from ORL, and the sface
entry it wrote is what the sface backend uses."""
import json
from importlib import resources

import pytest

from privface.faces import sface


def _shipped() -> dict:
    return json.loads(resources.files("privface.eval").joinpath("verification_defaults.json").read_text())["backends"]


def test_sface_backend_uses_its_calibrated_threshold():
    entry = _shipped()["sface"]
    assert sface.DEFAULT_THRESHOLD == round(entry["threshold"], 3)
    assert entry["source"]["backend_options"]["model"] == sface.SHA256[:16]
    assert entry["source"]["undetected"] == 0 and entry["source"]["impostor_pairs"] == 78000


@pytest.mark.slow
@pytest.mark.dataset
def test_reproduces_the_shipped_dlib_defaults(data_root):
    from privface.eval.verification_defaults import compute
    from privface.protocols.gsm.params import DEFAULT_COS_THRESHOLD
    from privface.protocols.im2020.params import DEFAULT_TAU
    from privface.protocols.kolberg.params import DEFAULT_THRESHOLDS

    got = compute("orl", {"name": "dlib-resnet128"}, str(data_root))
    assert got["im2020_tau"] == DEFAULT_TAU
    assert round(got["gsm_cos_threshold"]["m=16"], 4) == DEFAULT_COS_THRESHOLD
    assert round(got["kolberg"]["ckks"], 4) == DEFAULT_THRESHOLDS["ckks"]
    assert got["kolberg"]["bfv"] == DEFAULT_THRESHOLDS["bfv"] and got["kolberg"]["ntru"] == DEFAULT_THRESHOLDS["ntru"]
