"""τ for fused galleries (issue 37): one curve per photo count, FPIR(τ) = 1 − Π_k (1 − p_k(τ))^{N_k} solved for
the target, and the photo counts the key store records (``tau_photos_seen``), which S_local cannot lower.

The solver is checked on synthetic curves (exact log-linear quantiles, so a brute-force scan has a known answer)
and on the shipped calibration; the gallery part runs real toy-parameter SEAL galleries."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privface.scale import NpySource, enrol, identify
from privface.scale import layout as lay
from privface.scale import tau_curve as tc
from privface.scale.lifecycle import add, info, update, withdraw
from privface.scale.sources import ArraySource, photo_histogram

LN10 = math.log(10)
P = [10 ** (-k / 4) for k in range(4, 21)]  # 1e-1 … 1e-5


def _curve(shift: float) -> dict:
    """q(p) = 0.2 + shift + 0.04·(−log10 p): log-linear, so interpolation and tail are exact."""
    q = [round(0.2 + shift + 0.04 * -math.log10(p), 6) for p in P]
    b = LN10 / 0.04
    return {"p": P, "q": q, "tail": [b * (0.2 + shift), b], "comparisons": 10 ** 6}


SYNTH = {"backends": {"toy": {"dim": 4, "source": {"identities": 9, "command": "test"}, "settings": {
    "hers": {"step": 1e-4, **_curve(0.0), "by_photos": {"2": _curve(0.02), "3": _curve(0.05)}},
    "old": {"step": 1e-4, **_curve(0.0)}}}}}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(tc, "_doc", lambda: SYNTH)


def _brute(mix: dict, step: float = 1e-4) -> float:
    """The smallest grid score strictly above every score whose FPIR exceeds the target (a scan)."""
    curves = tc.photo_curves("toy", 4, "hers")
    grid = np.arange(2000, 12000) * step
    ok = [tc.fpir_of_mix(curves, mix, float(s))[0] <= tc.TARGET_FPIR for s in grid]
    return float(grid[int(np.argmax(ok))])


def test_exceed_rate_inverts_score_at_on_the_shipped_curves():
    for backend in ("sface", "dlib-resnet128"):
        for key, setting in tc._doc()["backends"][backend]["settings"].items():
            for curve in [setting, *setting.get("by_photos", {}).values()]:
                for p in (0.05, 1e-3, 3e-5, 1e-7):
                    q, ex = tc.score_at(curve, p)
                    if len(set(curve["q"])) < len(curve["q"]) or (ex and curve["tail"][1] > 1e8):
                        continue  # flat runs (idface's integer score): no unique inverse
                    back, ex2 = tc.exceed_rate(curve, q)
                    assert ex == ex2 and math.isclose(back, p, rel_tol=1e-6), (backend, key, p)


@pytest.mark.parametrize("mix", [{1: 40}, {3: 40}, {1: 30, 3: 10}, {1: 500, 2: 300, 3: 200}, {1: 5, 0: 3},
                                 {2: 7, 9: 2}])
def test_solver_matches_brute_force_and_holds_the_target(toy, mix):
    tau, src = tc.tau_for_mix("toy", 4, "hers", mix)
    curves = tc.photo_curves("toy", 4, "hers")
    assert tc.fpir_of_mix(curves, mix, tau)[0] <= tc.TARGET_FPIR < tc.fpir_of_mix(curves, mix, tau - 2e-4)[0]
    assert abs(tau - _brute(mix)) <= 1e-4 + 1e-9, (tau, _brute(mix))
    assert src["n"] == sum(mix.values()) and src["photos"] == {str(k): v for k, v in sorted(mix.items())}


def test_one_photo_count_is_the_closed_form(toy):
    for k in (1, 2, 3):
        for n in (1, 40, 10 ** 4):
            got = tc.tau_for_mix("toy", 4, "hers", {k: n})[0]
            q = 0.2 + {1: 0, 2: 0.02, 3: 0.05}[k] + 0.04 * -math.log10(tc.per_comparison_rate(n))
            assert q < got <= q + 1e-4 + 1e-9
            assert got == tc.tau_for_n("toy", 4, "hers", n, photos=k)[0]


def test_tau_is_monotone_in_every_count_and_in_the_photos(toy):
    base = {1: 100, 2: 50, 3: 20}
    t0 = tc.tau_for_mix("toy", 4, "hers", base)[0]
    for k in base:
        assert tc.tau_for_mix("toy", 4, "hers", {**base, k: base[k] + 50})[0] >= t0
    moved = tc.tau_for_mix("toy", 4, "hers", {1: 99, 2: 50, 3: 21})[0]  # one identity with more photos
    assert moved >= t0
    assert tc.tau_for_mix("toy", 4, "hers", {1: 170})[0] <= t0 <= tc.tau_for_mix("toy", 4, "hers", {3: 170})[0]
    # above the cap and not known: the strictest curve (here k = 3's)
    assert tc.tau_for_mix("toy", 4, "hers", {9: 40})[0] == tc.tau_for_mix("toy", 4, "hers", {0: 40})[0] \
        == tc.tau_for_mix("toy", 4, "hers", {3: 40})[0]


def test_a_version_1_setting_reads_as_one_curve(toy):
    assert tc.photo_curves("toy", 4, "old").keys() == {1}
    assert tc.tau_for_mix("toy", 4, "old", {3: 40})[0] == tc.tau_for_mix("toy", 4, "old", {1: 40})[0]


def test_bounded_mix_never_claims_fewer_photos_than_were_seen():
    assert tc.bounded_mix(None, 7) == {1: 7}  # made before counts were recorded: one photo each, as then
    seen = {"1": 10, "3": 4}
    assert tc.bounded_mix(seen, 14) == {3: 4, 1: 10}
    assert tc.bounded_mix(seen, 5) == {3: 4, 1: 1}  # removals: the ones with fewer photos are assumed gone
    assert tc.bounded_mix(seen, 16) == {3: 4, 1: 10, tc.WORST: 2}  # added where the key store did not see it
    assert tc.bounded_mix({"0": 2, "1": 3}, 3) == {tc.WORST: 2, 1: 1}


def test_shipped_calibration_has_a_curve_per_photo_count_and_fused_scores_higher():
    for key in ("hers", "cryptomask"):
        setting = tc._doc()["backends"]["sface"]["settings"][key]
        curves = tc.photo_curves("sface", 128, key)
        assert max(curves) == tc._doc()["backends"]["sface"]["source"]["photos_cap"] >= 3
        for c in setting["by_photos"].values():
            assert c["identities"] >= 50 and c["q"] == sorted(c["q"])
        t = [tc.tau_for_n("sface", 128, key, 100, photos=k)[0] for k in sorted(curves)]
        assert t[2] > t[0], t  # three photos: a higher τ than one


def _key_meta(url):
    with lay.open_store(lay.default_key_store(url)) as keys:
        return json.loads(keys.get(lay.KEY, "default.meta"))


def _rows(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, 128))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_photo_histogram_of_the_sources(tmp_path):
    np.save(tmp_path / "a.npy", _rows(3, 0).astype(np.float32))
    assert photo_histogram(NpySource([tmp_path / "a.npy"])) == {1: 3}
    assert photo_histogram(ArraySource(["x", "y", "z"], _rows(3, 1), photos=[3, 1, 3])) == {3: 2, 1: 1}
    with pytest.raises(Exception, match="one count"):
        ArraySource(["x"], _rows(1, 1), photos=[0])


def test_the_key_store_records_photo_counts_and_tau_follows_add_update_remove(tmp_path):
    """Enrol 6 one-photo identities, add 3 of three photos, update one to two photos, remove two: the key store's
    counts only grow, τ is the mix's at every step, and `gallery info` / identify show it."""
    url = f"sqlite:///{tmp_path}/g.db"
    x = _rows(12, 2)

    def tau(mix):
        return tc.tau_for_mix("sface", 128, "hers", mix)[0]

    enrol(url, ArraySource([f"a{i}" for i in range(6)], x[:6]), "hers", insecure_test_params=True, backend="sface")
    meta = _key_meta(url)
    assert meta["tau_photos_seen"] == {"1": 6} and meta["tau"] == tau({1: 6})
    got = add(url, ArraySource(["b0", "b1", "b2"], x[6:9], photos=[3, 3, 3]))
    assert (got["tau_n"], got["tau"], got["tau_photos"]) == (9, tau({1: 6, 3: 3}), {"1": 6, "3": 3})
    assert got["tau"] > tc.tau_for_n("sface", 128, "hers", 9)[0]  # fused identities raise τ
    assert _key_meta(url)["tau_photos_seen"] == {"1": 6, "3": 3}
    got = update(url, ArraySource(["a0"], x[9:10], photos=[2]))
    assert got["tau_n"] == 9 and _key_meta(url)["tau_photos_seen"] == {"1": 6, "2": 1, "3": 3}
    assert got["tau"] == tau({3: 3, 2: 1, 1: 5})
    got = withdraw(url, ["a1", "a2"])
    assert got["tau_n"] == 7 and got["tau"] == tau({3: 3, 2: 1, 1: 3})  # a removal never lowers the counts
    assert _key_meta(url)["tau_photos_seen"] == {"1": 6, "2": 1, "3": 3}
    shown = info(url)
    assert (shown["tau"], shown["tau_photos"]) == (got["tau"], {"1": 3, "2": 1, "3": 3})
    out = identify(x[7], url)
    assert out["id"] == "b1" and out["tau"] == got["tau"] and out["tau_photos"] == shown["tau_photos"]


def test_identities_added_out_of_the_key_stores_sight_count_as_the_strictest(tmp_path):
    """S_local adds where the key store is not (here: keys in a non-default file), claiming nothing or anything:
    S_key's τ counts the identities beyond those it saw with the strictest curve."""
    url, keys = f"sqlite:///{tmp_path}/g.db", f"sqlite:///{tmp_path}/elsewhere.db"
    x = _rows(8, 3)
    enrol(url, ArraySource([f"a{i}" for i in range(5)], x[:5]), "hers", key_store_url=keys,
          insecure_test_params=True, backend="sface")
    add(url, ArraySource(["b0", "b1", "b2"], x[5:], photos=[1, 1, 1]))  # claims one photo each: not believed
    out = identify(x[6], url, key_store_url=keys)
    assert out["id"] == "b1" and out["tau_photos"] == {"0": 3, "1": 5}
    assert out["tau"] == tc.tau_for_mix("sface", 128, "hers", {1: 5, tc.WORST: 3})[0]
    assert out["tau"] > tc.tau_for_n("sface", 128, "hers", 8)[0]
