"""Tests for privface.eval.metrics and privface.eval.report."""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from privface.eval import metrics as m
from privface.eval.report import write_report


def _scored(n_gen: int = 300, n_imp: int = 3000, shift: float = 1.0, seed: int = 1):
    rng = np.random.default_rng(seed)
    d = np.r_[rng.normal(0.0, 1.0, n_gen), rng.normal(shift, 1.0, n_imp)]
    g = np.r_[np.ones(n_gen, bool), np.zeros(n_imp, bool)]
    return d, g


# ----------------------------------------------------------------------------- ROC / AUC


def test_roc_hand_example_with_ties():
    d = np.array([0.1, 0.2, 0.2, 0.5, 0.9])
    g = np.array([True, True, False, False, True])
    far, tar, thr = m.roc(d, g)
    np.testing.assert_array_equal(thr, [-np.inf, 0.1, 0.2, 0.5, 0.9])
    np.testing.assert_allclose(far, [0, 0, 0.5, 1, 1])
    np.testing.assert_allclose(tar, [0, 1 / 3, 2 / 3, 2 / 3, 1])


def test_roc_large_is_fast_and_monotone():
    d, g = _scored(2000, 78000)
    t0 = time.perf_counter()
    far, tar, thr = m.roc(d, g)
    assert time.perf_counter() - t0 < 0.5
    assert np.all(np.diff(far) >= 0) and np.all(np.diff(tar) >= 0) and np.all(np.diff(thr) > 0)
    assert (far[0], tar[0], far[-1], tar[-1]) == (0, 0, 1, 1)


@pytest.mark.parametrize("rounding", [None, 1, 0])  # 0/1 decimals -> heavy ties
def test_auc_matches_sklearn(rounding):
    d, g = _scored(500, 2000, shift=1.5)
    if rounding is not None:
        d = np.round(d, rounding)
    assert m.auc(d, g) == pytest.approx(roc_auc_score(g, -d), abs=1e-12)


# ----------------------------------------------------------------------------- EER


def test_eer_perfect_separation():
    d = np.array([0.1, 0.3, 0.2, 0.7, 0.9])
    g = np.array([True, True, True, False, False])
    rate, thr = m.eer(d, g)
    assert rate == 0.0
    assert thr == pytest.approx((0.3 + 0.7) / 2)
    assert m.far_frr(d, g, thr) == (0.0, 0.0)


def test_eer_identical_distributions():
    vals = np.arange(10.0)
    d = np.r_[vals, vals]
    g = np.r_[np.ones(10, bool), np.zeros(10, bool)]
    rate, thr = m.eer(d, g)
    assert rate == pytest.approx(0.5)
    assert thr == pytest.approx(4.5)  # halfway between the bracketing thresholds 4 and 5


def test_eer_all_tied():
    d = np.zeros(6)
    g = np.array([True, False] * 3)
    assert m.eer(d, g) == (pytest.approx(0.5), 0.0)


def test_eer_hand_computed_interpolation():
    # genuine 1, 2, 4; impostor 3, 5. ROC points (threshold: FAR, FRR):
    #   -inf: 0, 1 | 1: 0, 2/3 | 2: 0, 1/3 | 3: 1/2, 1/3 | 4: 1/2, 0 | 5: 1, 0
    # FRR - FAR changes sign between t=2 (1/3) and t=3 (-1/6): a = (1/3) / (1/2) = 2/3,
    # EER = 0 + 2/3 * 1/2 = 1/3, threshold = 2 + 2/3.
    d = np.array([1.0, 2.0, 4.0, 3.0, 5.0])
    g = np.array([True, True, True, False, False])
    rate, thr = m.eer(d, g)
    assert rate == pytest.approx(1 / 3)
    assert thr == pytest.approx(2 + 2 / 3)


def test_eer_exact_crossing_on_a_point():
    # genuine 1, 3; impostor 2, 4: at t=2 FAR = FRR = 1/2 -> threshold midway to next distance.
    d = np.array([1.0, 3.0, 2.0, 4.0])
    g = np.array([True, True, False, False])
    assert m.eer(d, g) == (pytest.approx(0.5), pytest.approx(2.5))


def test_eer_inverted_scorer_is_one():
    d = np.array([5.0, 6.0, 1.0, 2.0])
    g = np.array([True, True, False, False])
    assert m.eer(d, g)[0] == pytest.approx(1.0)


def test_eer_gaussian_close_to_theory():
    # two unit-variance normals 2 apart: EER = Phi(-1) ~ 0.1587
    d, g = _scored(20000, 20000, shift=2.0, seed=3)
    assert m.eer(d, g)[0] == pytest.approx(0.1587, abs=0.01)


# ----------------------------------------------------------------------------- FAR/FRR, TAR@FAR


def test_far_frr():
    d = np.array([0.1, 0.4, 0.3, 0.6])
    g = np.array([True, True, False, False])
    assert m.far_frr(d, g, 0.35) == (0.5, 0.5)
    assert m.far_frr(d, g, 0.4) == (0.5, 0.0)  # "<=" accepts at the threshold
    assert m.far_frr(d, g, 0.0) == (0.0, 1.0)


def test_tar_at_far_keys_and_monotone():
    d, g = _scored(1000, 20000, shift=3.0)
    targets = (1e-4, 3e-4, 1e-3, 1e-2, 0.1, 1.0)
    res = m.tar_at_far(d, g, targets)
    assert list(res) == ["1e-4", "3e-4", "1e-3", "1e-2", "1e-1", "1e0"]
    vals = list(res.values())
    assert all(a <= b for a, b in zip(vals, vals[1:]))
    assert vals[-1] == 1.0
    assert set(m.tar_at_far(d, g)) == {"1e-4", "1e-3", "1e-2"}


def test_tar_at_far_is_conservative():
    # impostors at 1..10 (10 pairs), genuine at 0.5, 2.5, 4.5
    d = np.r_[np.arange(1.0, 11.0), [0.5, 2.5, 4.5]]
    g = np.r_[np.zeros(10, bool), np.ones(3, bool)]
    res = m.tar_at_far(d, g, (0.1, 0.2, 0.25, 0.3))
    # FAR <= 0.1 allows 1 false accept: largest threshold is 1.0 (t=2 would be FAR 0.2)
    assert res["1e-1"] == pytest.approx(1 / 3)
    assert res["2e-1"] == pytest.approx(2 / 3)  # t = 2.5 (FAR 0.2)
    assert res["2.5e-1"] == pytest.approx(2 / 3)
    assert res["3e-1"] == pytest.approx(2 / 3)


def test_tar_at_far_too_few_impostors_uses_far_zero_point():
    d = np.r_[np.arange(1.0, 11.0), [0.5, 0.7, 4.5]]
    g = np.r_[np.zeros(10, bool), np.ones(3, bool)]
    # 10 impostors cannot resolve 1e-3: the FAR = 0 operating point (t just below 1.0) is used
    assert m.tar_at_far(d, g, (1e-3,)) == {"1e-3": pytest.approx(2 / 3)}


# ----------------------------------------------------------------------------- k-fold accuracy


def _folds(n: int, k: int = 10) -> np.ndarray:
    return np.arange(n) % k


def test_best_accuracy_threshold():
    d = np.array([0.1, 0.2, 0.9, 0.5, 0.6, 0.7])
    g = np.array([True, True, True, False, False, False])
    t, acc = m.best_accuracy_threshold(d, g)
    assert t == pytest.approx(0.35)
    assert acc == pytest.approx(5 / 6)


def test_kfold_separable_is_perfect():
    rng = np.random.default_rng(4)
    g = rng.random(6000) < 0.5
    d = np.where(g, rng.uniform(0, 1, 6000), rng.uniform(1.5, 3, 6000))
    mean, std = m.kfold_accuracy(d, g, _folds(6000))
    assert (mean, std) == (1.0, 0.0)


def test_kfold_random_is_chance_and_fast():
    rng = np.random.default_rng(5)
    g = np.repeat([True, False], 3000)
    d = rng.random(6000)
    t0 = time.perf_counter()
    mean, std = m.kfold_accuracy(d, g, _folds(6000))
    assert time.perf_counter() - t0 < 0.5
    assert mean == pytest.approx(0.5, abs=0.05)
    assert 0 <= std < 0.1


def test_kfold_matches_naive_loop():
    d, g = _scored(300, 300, shift=1.0, seed=6)
    folds = np.random.default_rng(6).permutation(_folds(600))
    accs = []
    for f in range(10):
        tr, te = folds != f, folds == f
        u = np.unique(d[tr])
        cands = (u[1:] + u[:-1]) / 2
        tr_acc = [np.mean((d[tr] <= c) == g[tr]) for c in cands]
        c = cands[int(np.argmax(tr_acc))]
        accs.append(np.mean((d[te] <= c) == g[te]))
    assert m.kfold_accuracy(d, g, folds) == (pytest.approx(np.mean(accs)),
                                             pytest.approx(np.std(accs)))


# ----------------------------------------------------------------------------- identification


def test_rank1_hand_built():
    gallery = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    gids = np.array(["a", "b", "c"])
    probes = np.array([[1.0, 0.0], [9.0, 1.0], [6.0, 5.0], [0.0, 8.0]])
    pids = np.array(["a", "b", "c", "c"])  # third probe is nearer to "b" -> miss
    assert m.rank1(gallery, gids, probes, pids) == pytest.approx(3 / 4)


def test_rank1_leave_one_out():
    emb = np.array([[0.0], [0.1], [5.0], [5.2], [2.4], [9.0]])
    ids = np.array([0, 0, 1, 1, 0, 2])  # sample 4 (2.4) is nearest to 0.1 (2.3 < 2.6): a hit
    assert m.rank1_leave_one_out(emb, ids) == 1.0  # id 2 is a singleton and is not counted
    ids2 = np.array([0, 0, 1, 1, 1, 2])  # sample 4 now labelled 1 but nearest is id 0
    assert m.rank1_leave_one_out(emb, ids2) == pytest.approx(4 / 5)


def test_rank1_leave_one_out_chunked_matches():
    rng = np.random.default_rng(7)
    ids = np.repeat(np.arange(40), 10)
    emb = rng.normal(size=(400, 16)) + 3 * rng.normal(size=(40, 16))[ids]
    assert m.rank1_leave_one_out(emb, ids, chunk=37) == m.rank1_leave_one_out(emb, ids)
    assert m.rank1(emb, ids, emb, ids) == 1.0  # probe is in the gallery


def test_all_pairs_and_distances():
    ids = np.array([1, 2, 1, 3])
    i, j, gen = m.all_pairs(ids)
    assert len(i) == 6 and np.all(i < j)
    assert gen.sum() == 1 and (i[gen][0], j[gen][0]) == (0, 2)
    emb = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0], [1.0, 1.0]])
    dist = m.pair_distances(emb, i, j, chunk=4)
    np.testing.assert_allclose(dist, np.linalg.norm(emb[i] - emb[j], axis=1))
    assert dist[gen][0] == 1.0


def test_all_pairs_orl_size():
    i, j, gen = m.all_pairs(np.repeat(np.arange(40), 10))
    assert len(i) == 400 * 399 // 2 and gen.sum() == 40 * 45


# ----------------------------------------------------------------------------- summary


def test_summarize_and_to_dict():
    d, g = _scored()
    res = m.summarize(d, g)
    assert (res.genuine_pairs, res.impostor_pairs) == (300, 3000)
    assert res.auc == pytest.approx(roc_auc_score(g, -d))
    assert (res.eer, res.eer_threshold) == m.eer(d, g)
    dd = res.to_dict()
    assert set(dd) == {"eer", "eer_threshold", "auc", "tar_at_far", "genuine_pairs",
                       "impostor_pairs"}
    dd["tar_at_far"]["1e-4"] = -1.0
    assert res.tar_at_far["1e-4"] != -1.0
    with pytest.raises(AttributeError):
        res.eer = 0.0  # type: ignore[misc]


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("fn", [m.roc, m.auc, m.eer, m.tar_at_far, m.summarize,
                                m.best_accuracy_threshold,
                                lambda d, g: m.far_frr(d, g, 0.5),
                                lambda d, g: m.kfold_accuracy(d, g, np.arange(len(d)) % 2)])
@pytest.mark.parametrize("d, g, msg", [
    ([0.1, 0.2, 0.3], [True, False], "differ in length"),
    ([], [], "empty"),
    ([0.1, 0.2], [True, True], "no impostor"),
    ([0.1, 0.2], [False, False], "no genuine"),
    ([0.1, np.nan], [True, False], "NaN"),
    ([0.1, 0.2], ["a", "b"], "boolean"),
])
def test_validation(fn, d, g, msg):
    with pytest.raises(ValueError, match=msg):
        fn(np.asarray(d, dtype=float), np.asarray(g))


def test_validation_identification():
    with pytest.raises(ValueError, match="one id per embedding"):
        m.rank1(np.zeros((3, 2)), np.arange(2), np.zeros((1, 2)), np.arange(1))
    with pytest.raises(ValueError, match="dimensions differ"):
        m.rank1(np.zeros((3, 2)), np.arange(3), np.zeros((1, 3)), np.arange(1))
    with pytest.raises(ValueError, match="NaN"):
        m.rank1_leave_one_out(np.array([[0.0], [np.nan]]), np.array([1, 1]))
    with pytest.raises(ValueError, match="2\\+ samples"):
        m.rank1_leave_one_out(np.zeros((3, 2)), np.arange(3))
    with pytest.raises(ValueError, match="distinct folds"):
        m.kfold_accuracy([0.1, 0.2], [True, False], np.zeros(2, int))


def test_zero_one_labels_accepted():
    assert m.auc([0.1, 0.9], np.array([1, 0])) == 1.0


# ----------------------------------------------------------------------------- properties

_pairs = st.integers(min_value=2, max_value=60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 20), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
).filter(lambda t: 0 < sum(t[1]) < len(t[1]))


@settings(max_examples=150, deadline=None)
@given(_pairs)
def test_eer_bounds_property(pair):
    d, g = np.asarray(pair[0], float), np.asarray(pair[1])
    rate, thr = m.eer(d, g)
    assert 0.0 <= rate <= 1.0
    far, tar, _ = m.roc(d, g)
    frr = 1 - tar
    # EER lies on the FAR=FRR crossing of a monotone curve, hence between these bounds
    eps = 1e-12
    assert np.max(np.minimum(far, frr)) - eps <= rate <= np.min(np.maximum(far, frr)) + eps
    assert d.min() <= thr <= d.max()
    if m.auc(d, g) == 1.0:
        assert rate == 0.0


@settings(max_examples=150, deadline=None)
@given(_pairs)
def test_eer_reflects_under_negation(pair):
    # Negating distances reflects the (FAR, FRR) curve through (1/2, 1/2), ties included, so
    # eer(-d) = 1 - eer(d); in particular the better orientation always has EER <= 0.5.
    d, g = np.asarray(pair[0], float), np.asarray(pair[1])
    e1, e2 = m.eer(d, g)[0], m.eer(-d, g)[0]
    assert e1 + e2 == pytest.approx(1.0, abs=1e-12)
    assert min(e1, e2) <= 0.5 + 1e-12
    if m.auc(d, g) >= 0.5:
        assert m.auc(-d, g) <= 0.5


@settings(max_examples=150, deadline=None)
@given(_pairs)
def test_invariance_under_increasing_transform(pair):
    d, g = np.asarray(pair[0], float), np.asarray(pair[1])
    for f in (lambda x: 3 * x + 7, np.exp, lambda x: x**3 - 2):
        assert m.eer(f(d), g)[0] == pytest.approx(m.eer(d, g)[0], abs=1e-12)
        assert m.auc(f(d), g) == pytest.approx(m.auc(d, g), abs=1e-12)
        assert m.tar_at_far(f(d), g, (0.1, 0.5)) == m.tar_at_far(d, g, (0.1, 0.5))


@settings(max_examples=100, deadline=None)
@given(_pairs)
def test_auc_matches_sklearn_property(pair):
    d, g = np.asarray(pair[0], float), np.asarray(pair[1])
    assert m.auc(d, g) == pytest.approx(roc_auc_score(g, -d), abs=1e-12)


# ----------------------------------------------------------------------------- report


def test_write_report(tmp_path):
    d, g = _scored(200, 5000, shift=2.5)
    summary = m.summarize(d, g).to_dict() | {"dataset": "synthetic | test"}
    out = tmp_path / "nested" / "report"
    paths = write_report(out, d, g, "Synthetic run", summary)
    names = [p.name for p in paths]
    assert names == ["roc.png", "det.png", "hist.png", "summary.md"]
    for p in paths[:3]:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.stat().st_size > 1000
    md = (out / "summary.md").read_text()
    assert md.startswith("# Synthetic run")
    assert "| Metric | Value |" in md and "| tar_at_far[1e-3] |" in md
    assert "synthetic \\| test" in md
    for name in names[:3]:
        assert f"]({name})" in md


def test_write_report_small_and_perfect(tmp_path):
    d = np.array([0.1, 0.2, 0.8, 0.9])
    g = np.array([True, True, False, False])
    paths = write_report(tmp_path, d, g, "tiny", {"eer": 0.0})
    assert all(p.exists() for p in paths)
