"""verification_defaults: the procedure reproduces dlib-resnet128's shipped NTRU threshold and norm range from ORL,
and the sface entry of faces.thresholds is what the sface backend and the protocols use."""
import pytest

from privface.faces import sface
from privface.faces.thresholds import DEFAULT_THRESHOLDS, squared_quantized
from privface.protocols.gsm.params import default_cos_threshold
from privface.protocols.im2020.params import default_tau
from privface.protocols.im2020.parties import norm_range
from privface.protocols.kolberg import KolbergParams


def test_sface_defaults_come_from_its_entry():
    point = DEFAULT_THRESHOLDS["sface"]
    assert sface.SFaceBackend().threshold == point.distance
    assert sface.SFaceLm68Backend().threshold == DEFAULT_THRESHOLDS["sface-lm68"].distance
    assert default_tau("sface") == squared_quantized(point.distance, 128)
    assert default_cos_threshold("sface") == point.cosine
    assert KolbergParams("ntru", backend="sface").tau == point.ntru == 120
    assert KolbergParams("bfv", backend="sface").tau == default_tau("sface")
    assert norm_range("sface") == (0.9, 1.1) and norm_range("dlib-resnet128") == (1.0, 2.0)
    with pytest.raises(ValueError, match="no default threshold for face backend 'pca'"):
        default_tau("pca")


@pytest.mark.slow
@pytest.mark.dataset
@pytest.mark.parametrize("backend", ["dlib-resnet128", "sface", "sface-lm68"])
def test_reproduces_the_shipped_ntru_threshold_and_norm_range(data_root, backend):
    from privface.eval.verification_defaults import compute

    got, point = compute("orl", {"name": backend}, str(data_root)), DEFAULT_THRESHOLDS[backend]
    assert got["ntru"] == point.ntru
    lo, hi = got["template_norm_range"]
    assert point.norm_range[0] < lo and hi < point.norm_range[1]
