"""IDFace centring (protocols/idface/centring.py), the identification split and TPIR (eval/identify_eval.py,
eval/metrics.py). Fast: synthetic templates, toy CKKS behind insecure_test_params."""
import numpy as np
import pytest

from privface.crypto.lattice import CKKS, LatticeParams, generate_lattice_keypair
from privface.errors import TemplateError
from privface.eval import metrics
from privface.eval.identify_eval import split
from privface.protocols.hers import KeyServer, LocalServer, identify
from privface.protocols.idface import IDFaceCKKS, IDFaceCKKSKey, IDFaceParams, t_alpha
from privface.protocols.idface.centring import centre, mean_of, shipped_mean, shipped_provenance

rng = np.random.default_rng(11)
TOY_CKKS = LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36)


def offset_faces(people=60, shots=3, d=128, offset=3.0, spread=0.35):
    """dlib-like embeddings: a large common offset plus an identity direction plus per-shot noise."""
    common = offset * rng.standard_normal(d) / np.sqrt(d)
    ident = rng.standard_normal((people, d)) / np.sqrt(d)
    x = common + np.repeat(ident, shots, axis=0) + spread * rng.standard_normal((people * shots, d)) / np.sqrt(d)
    return x, np.repeat(np.arange(people), shots), common


def rank1_transformed(x, ids, alpha, beta, mean=None):
    """Gallery = first shot of each person, probes = the rest, scores ⟨T_α(x), T_β(y)⟩ (first index on ties)."""
    p = IDFaceParams(x.shape[1], alpha, beta, mean)
    g = np.array([np.flatnonzero(ids == k)[0] for k in np.unique(ids)])
    probes = np.setdiff1d(np.arange(len(ids)), g)
    s = p.enrol_transform(x[g]).astype(int) @ p.query_transform(x[probes]).astype(int).T
    return float(np.mean(ids[g][np.argmax(s, axis=0)] == ids[probes]))


def test_centre_subtracts_the_mean_of_unit_templates_and_renormalises():
    x = rng.standard_normal((5, 16)) * 3
    mu = mean_of(rng.standard_normal((50, 16)))
    c = centre(x, mu)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    expect = (u - mu) / np.linalg.norm(u - mu, axis=1, keepdims=True)
    assert np.allclose(c, expect) and np.allclose(np.linalg.norm(c, axis=1), 1.0)
    assert np.allclose(centre(7 * x, mu), c)  # scale of the input does not matter


def test_mean_of_is_the_mean_of_unit_rows():
    x = np.array([[2.0, 0.0], [0.0, 5.0]])
    assert np.allclose(mean_of(x), [0.5, 0.5])


@pytest.mark.parametrize("x, mean", [
    (np.ones((2, 4)), np.zeros(3)),                        # dimension mismatch
    (np.array([[np.nan, 1.0]]), np.zeros(2)),              # NaN template
    (np.ones((1, 2)), np.array([np.inf, 0.0])),            # infinite mean
    (np.array([[1.0, 0.0]]), np.array([1.0, 0.0])),        # template equals the mean
    (np.zeros((1, 2)), np.array([0.1, 0.0])),              # zero template
    (np.ones((2, 2)), np.ones((2, 2))),                    # mean is not one vector
])
def test_centre_refuses_bad_input(x, mean):
    with pytest.raises(TemplateError):
        centre(x, mean)


def test_shipped_mean_is_a_128d_dlib_mean_from_a_disjoint_dataset():
    mu = shipped_mean("dlib-resnet128")
    prov = shipped_provenance("dlib-resnet128")
    assert mu.shape == (128,) and np.all(np.isfinite(mu))
    assert prov["dataset"] == "orl" and prov["images"] == 400  # not LFW, the identification eval set
    assert 0.5 < np.linalg.norm(mu) < 1  # the common offset of dlib embeddings (unit templates)
    with pytest.raises(TemplateError):
        shipped_mean("no-such-backend")


def test_params_validate_and_carry_the_mean():
    mu = rng.standard_normal(128)
    p = IDFaceParams.for_dim(128, 85, mu)
    assert p.mean == tuple(mu) and "mean" not in repr(p)
    x = rng.standard_normal((4, 128))
    assert np.array_equal(p.enrol_transform(x), t_alpha(centre(x, mu), 85))
    assert np.array_equal(IDFaceParams.for_dim(128, 85).enrol_transform(x), t_alpha(x, 85))
    with pytest.raises(TemplateError):
        IDFaceParams(128, 85, 85, tuple(np.zeros(127)))
    with pytest.raises(TemplateError):
        IDFaceParams(128, 85, 85, (np.nan,) * 128)


def test_a_common_offset_breaks_t_alpha_and_centring_restores_it():
    """The LFW finding on synthetic data: with a large common offset the top-α signs coincide across people."""
    x, ids, _ = offset_faces()
    mu = mean_of(x[::3])  # the mean of the enrolled shots
    raw = rank1_transformed(x, ids, 85, 15)
    centred = rank1_transformed(x, ids, 85, 15, mu)
    assert raw < 0.5 and centred > 0.9, (raw, centred)


def test_centred_idface_ckks_answer_equals_the_plaintext_transformed_answer():
    x, ids, _ = offset_faces(people=30, shots=2)
    mu = mean_of(x[::2])
    p = IDFaceParams.for_dim(128, 31, mu)
    pub, sec = generate_lattice_keypair(TOY_CKKS, insecure_test_params=True)
    local, key = LocalServer(IDFaceCKKS(pub, p)), KeyServer(IDFaceCKKSKey(sec, p), tau=-10 ** 9)
    local.enrol([f"p{k}" for k in range(30)], x[::2])
    zg = p.enrol_transform(x[::2]).astype(int)
    for y in x[1::2][:8]:
        expect = int(np.argmax(zg @ p.query_transform(y).astype(int).ravel()))
        assert identify(local, key, y) == f"p{expect}"


def test_split_enrols_one_image_per_repeated_identity():
    ids = np.array(["a", "a", "a", "b", "b", "c", "d", "d"])
    found = np.array([False, True, True, True, True, True, True, False])
    g, mated, nonmated = split(ids, found)
    assert g.tolist() == [1, 3, 6]           # first detected image of a, b, d (d enrolled, no probe left)
    assert mated.tolist() == [2, 4]
    assert nonmated.tolist() == [5]          # c has one image: never enrolled


def test_tpir_at_fpir_hand_example():
    nonmated = np.array([0.9, 0.5, 0.4, 0.3, 0.2, 0.1, 0.1, 0.0, 0.0, 0.0])
    mated = np.array([0.95, 0.6, 0.45, 0.92])
    correct = np.array([True, True, True, False])
    out = metrics.tpir_at_fpir(mated, correct, nonmated, (0.1, 0.0, 1.0))
    assert out["1e-1"] == {"tpir": 0.5, "fpir": 0.1, "threshold": 0.5}   # accept > 0.5: 0.95, 0.6 (0.92 is wrong)
    assert out["0e0"]["threshold"] == 0.9 and out["0e0"]["tpir"] == 0.25
    assert out["1e0"] == {"tpir": 0.75, "fpir": 1.0, "threshold": None}
    with pytest.raises(ValueError):
        metrics.tpir_at_fpir(mated, correct[:2], nonmated)
    with pytest.raises(ValueError):
        metrics.tpir_at_fpir(mated, correct, np.array([]))


def test_cli_refuses_identification_options_elsewhere(capsys):
    from privface.cli import main

    assert main(["eval", "--dataset", "orl", "--protocol", "plain", "--beta", "15"]) != 0
    assert main(["eval", "--dataset", "orl", "--protocol", "hers", "--scheme", "paillier"]) != 0
    assert main(["eval", "--dataset", "orl", "--protocol", "kolberg", "--scheme", "paillier"]) != 0
    err = capsys.readouterr().err
    assert "--beta" in err and "paillier" in err
    for argv in (["--protocol", "plain", "--lift", "1024"], ["--protocol", "hers", "--lift", "2048"]):
        assert main(["eval", "--dataset", "orl", *argv]) != 0
        assert "--lift" in capsys.readouterr().err
