"""ISO/IEC 24745 unlinkability of kolberg's protected templates (eval/kolberg_unlinkability.py): a linkage
classifier on ciphertext features scores AUC ∈ [0.45, 0.55] on every scheme, while the same classifier on the
plaintext templates links them (AUC ≫ 0.55) — so the assertion can fail.

Default size: 100 subjects × 5 templates → 1 000 mated, 8 000 non-mated pairs, AUC standard error under the
null ≈ 0.010 (measured spread ≈ 0.013), so [0.45, 0.55] is ±4–5 SE (chance failure < 1 in 10^4 per score)."""
from __future__ import annotations

import numpy as np
import pytest

from privface.bench import kolberg_unlinkability as ku

SCHEMES = ("ckks", "bfv", "ntru")


def _check(row: dict) -> None:
    assert row["auc_se_null"] <= 0.01
    for score in ku.SCORES:
        assert 0.45 <= row[f"auc_{score}"] <= 0.55, (score, row)
    assert row["plaintext_auc_correlation"] > 0.95, row  # the control: the classifier does link plaintexts


@pytest.mark.parametrize("scheme", SCHEMES)
def test_protected_templates_of_one_subject_are_unlinkable(scheme):
    _check(ku.linkage_auc(scheme, dim=128, subjects=100))


def test_classifier_detects_a_parity_leak():
    """A 'protected template' that carries the message bits in its coefficients' parity (the NTRU p | q flaw)
    is linked by the parity score although its values look uniform."""
    rng = np.random.default_rng(5)
    x = ku.samples(50, 4, 128, 0.5, rng)
    bits = (x > 0).astype(np.int64)
    words = [(2 * rng.integers(0, 2048, b.size) + b, 4096) for b in bits]
    subject = np.repeat(np.arange(50), 4)
    i, j, mated = ku.pairs(subject, 16, rng)
    scores = ku.pair_scores(words, [np.asarray(w, "<u2").tobytes() for w, _ in words], i, j)
    from privface.eval.metrics import auc

    assert auc(-scores["parity_agreement"], mated) > 0.9
    assert 0.4 < auc(-scores["correlation"], mated) < 0.6  # the values alone do not show it


def test_pairs_are_mated_exactly_within_a_subject():
    subject = np.repeat(np.arange(10), 4)
    i, j, mated = ku.pairs(subject, 5, np.random.default_rng(0))
    assert mated.sum() == 10 * 6 and (~mated).sum() == 40 * 5
    assert np.array_equal(subject[i] == subject[j], mated)
    assert (i != j).all()


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("noise", [0.5, 0.0])
def test_unlinkable_at_512_dims_same_embedding_or_two_images(scheme, noise):
    """512-D, 200 subjects × 5; noise 0: the same embedding enrolled five times."""
    row = ku.linkage_auc(scheme, dim=512, subjects=200, noise=noise, seed=7)
    assert row["auc_se_null"] <= 0.007
    for score in ku.SCORES:
        assert 0.45 <= row[f"auc_{score}"] <= 0.55, (score, row)
    assert row["plaintext_auc_correlation"] > 0.95
