"""The page's fixed-norm quantiser (web/src/templates/fixedNorm.ts) gives Python's template bit for bit
(seed 004 §3 Fig. 1: ‖u‖ = ζ exactly), so a gsm template made from a photo in the page is the Python one."""
from __future__ import annotations

import numpy as np
import pytest

from privface.errors import TemplateError
from privface.templates import fixed_norm
from tests.web.node_driver import GSM_DRIVER, NodeDriver


@pytest.fixture(scope="module")
def node():
    d = NodeDriver(GSM_DRIVER)
    yield d
    d.close()


def _cases():
    rng = np.random.default_rng(3904)
    for ell, m in [(4, 2), (4, 8), (4, 16), (5, 20), (16, 4), (16, 8), (128, 16), (256, 16), (64, 24)]:
        for _ in range(4):
            yield rng.normal(size=ell), m
        x = rng.normal(size=ell)
        x[rng.random(ell) < 0.7] = 0.0  # mostly zeros: the greedy moves get stuck, the four-squares step runs
        if np.any(x):
            yield x, m
        yield np.abs(rng.normal(size=ell)).astype(np.float32).astype(np.float64), m  # a float32 embedding, widened


def test_page_quantiser_equals_python(node, monkeypatch):
    finished = []
    real_finish = fixed_norm._finish
    monkeypatch.setattr(fixed_norm, "_finish", lambda *a: finished.append(1) or real_finish(*a))
    count = 0
    for x, m in _cases():
        got = node(cmd="fixed_norm", x=[float(v) for v in x], m=m)
        try:
            want = fixed_norm.fixed_norm_template(x, m)
        except TemplateError:
            assert got.get("type") == "TemplateError", got  # both give up on the same input
            continue
        assert "u" in got, got
        assert got["u"] == [int(v) for v in want], (len(x), m)
        assert sum(v * v for v in got["u"]) == fixed_norm.zeta(m) ** 2
        count += 1
    assert count >= 40 and finished, "the cases must reach the four-squares step too"


def test_page_quantiser_refuses_bad_input(node):
    for x, m in [([0.0, 0.0, 0.0, 0.0], 8), ([], 8), ([1.0, 2.0, 3.0, 4.0], 1), ([1.0, 2.0, 3.0, 4.0], 40)]:
        out = node(cmd="fixed_norm", x=x, m=m)
        assert out.get("type") == "TemplateError", out
