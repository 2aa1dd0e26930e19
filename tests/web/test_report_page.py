"""The `privface report` page in headless Chromium at desktop (1280×900) and phone (390×844) width: it loads with no
console error; no table is wider than the screen and no cell is hidden (issue 35 B7: the tables wrap, and on a phone
stack each row as "column: value" lines); the plots are loaded and on screen before any scrolling."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from privface.report import build, html, jobs
from tests.helpers.static_server import serve

from .browser import ROOT, run

pytestmark = pytest.mark.browser
SHOTS = Path(os.environ.get("PRIVFACE_SCREENSHOTS") or ROOT / "reports" / "screenshots").resolve()
DESKTOP = {"width": 1280, "height": 900}
MOBILE = {"width": 390, "height": 844}


def _outcome(job_id, result):
    return jobs.Outcome(jobs.Job(job_id, job_id, f"privface {job_id} --json", "job_identify"), result, "ok", 2.0)


def _pair_eval(ds, n, differ):
    return {"dataset": ds, "backend": "dlib-resnet128", "eer": 0.012, "eer_quantized": 0.0125, "mismatches": differ,
            "pairs_run": n, "pairs_total": 79800, "genuine_pairs": n // 10, "impostor_pairs": n - n // 10,
            "accuracy_10fold": 0.9805 if ds != "orl" else None}


def outcomes():
    """Made-up job results with every column of every table filled, as long as a real run's."""
    out = [_outcome(f"bench.identify.{s}.n{n}", {"scheme": s, "n": n, "dim": 512, "identify_s": t * n / 1024,
                                                 "comm_bytes": b, "storage_bytes": 2048 * n, "threads": 2})
           for s, t, b in (("plain", 1e-4, 0), ("hers", 0.12, 131076), ("idface-ckks", 0.03, 262148),
                           ("idface-paillier", 0.4, 1024), ("cryptomask", 1.1, 4193735)) for n in (1024, 4096, 16384)]
    out.append(_outcome("bench.gsm.l128-m16", {"ell": 128, "m": 16, "paillier_bits": 3072, "pi1_ms": 20.5,
                                               "pi2_ms": 40.0, "pi3_ms": 120.0, "pi1_m1_bytes": 8464,
                                               "pi1_t2d_bytes": 516, "pi1_total_bytes": 8980, "pi2_m1_bytes": 13584,
                                               "pi2_total_bytes": 14360, "pi2_reused_m1_bytes": 776,
                                               "pi3_m1_bytes": 13584, "pi3_total_bytes": 128425, "repeat": 2}))
    for mode in ("basic", "secure-comparison"):
        out.append(_outcome(f"bench.im2020.{mode}", {"security_bits": 112, "jl_modulus_bits": 2048, "k": 128,
                                                     "transport": "http", "workers": 2, "repeat": 3,
                                                     "c2_encrypt_ms": 30.1, "s1_blind_esed_ms": 9.5,
                                                     "c3_decrypt_ms": 120.7, "s2_unblind_ms": 0.02, "network_ms": 4.1,
                                                     "total_ms": 164.4, "auth_bytes": 45312, "enrol_bytes": 22116,
                                                     "s3_compare_ms": 310.0, "compare_bytes": 1_812_004}))
    out.append(_outcome("bench.kolberg", [{"scheme": s, "dim": 512, "security_bits": 128, "keygen_ms": 300.0,
                                           "encrypt_ms": 4.0, "compare_ms": 30.0, "key_bytes": 400_000,
                                           "template_bytes": 140_000} for s in ("ckks", "bfv", "ntru")]))
    curve = {"far": [1e-4, 1e-3, 1e-2, 0.1, 1.0], "tar": [0.9, 0.95, 0.985, 0.998, 1.0]}
    for ds, n in (("orl", 200), ("lfw-sample", 200)):
        key = "orl" if ds == "orl" else "lfw"
        out.append(_outcome(f"eval.{key}.plain", {"dataset": ds, "eer": 0.01, "auc": 0.999, "genuine_pairs": 1800,
                                                  "impostor_pairs": 78000, "roc_curve": curve,
                                                  "tar_at_far": {"1e-2": 0.985}}))
        for suffix in ("im2020", "im2020-sc", "gsm-pi1", "gsm-pi2", "gsm-pi3", "kolberg-ckks", "kolberg-bfv",
                       "kolberg-ntru"):
            out.append(_outcome(f"eval.{key}.{suffix}", _pair_eval(ds, n, 1)))
        for suffix in ("hers", "idface-ckks", "idface-paillier"):
            out.append(_outcome(f"eval.{key}.{suffix}", {
                "dataset": ds, "rank1_plaintext": 0.975, "rank1_encrypted": 0.975, "mismatches": 0,
                "mated_probes": 40, "nonmated_probes": 40, "tpir_encrypted": {"1e-2": {"fpir": 0.01, "tpir": 0.9}}}))
    out.append(_outcome("eval.lfw.cryptomask", {
        "dataset": "lfw-sample", "detect_mated_plaintext": 0.95, "detect_mated_encrypted": 0.95,
        "detect_nonmated_plaintext": 0.05, "detect_nonmated_encrypted": 0.05, "mismatches_plaintext": 0,
        "mated_probes": 40, "nonmated_probes": 40}))
    one_to_n = {"default_tau": 0.5481, "tpir_default_tau": 0.899, "fpir_default_tau": 0.0018, "mated_probes": 6285,
                "nonmated_probes": 3249}
    for ds, key in (("orl", "orl"), ("lfw-sample", "lfw")):  # the backends table with both backends filled
        out.append(_outcome(f"eval.{key}.sface.plain", {"dataset": ds, "eer": 0.00053, "genuine_pairs": 1800,
                                                        "impostor_pairs": 78000, "accuracy_10fold": 0.9933,
                                                        "accuracy_std": 0.0042}))
        for suffix in ("hers", "idface-ckks", "cryptomask"):
            out.append(_outcome(f"eval.{key}.sface.{suffix}", {"dataset": ds, **one_to_n}))
    for o in out:
        if o.job.id.split(".")[-1] in ("hers", "idface-ckks", "cryptomask") and "default_tau" not in o.result:
            o.result.update(default_tau=0.9619, tpir_default_tau=0.296, fpir_default_tau=0.0012)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A report page (figures from made-up job results) served at http://127.0.0.1:PORT/app/."""
    root = tmp_path_factory.mktemp("site")
    out = root / "app"
    out.mkdir()
    data = build.build(outcomes(), out, mode="quick", commit="0" * 40, started=0.0, load_start=[1.5, 1.2, 0.9],
                       data_note="PRIVFACE_DATA=/data (ORL, LFW).")
    (out / "index.html").write_text(html.render(data), encoding="utf-8")
    (out / "report.json").write_text(html.write_json(data), encoding="utf-8")
    with serve(root) as url:
        yield url


@pytest.mark.parametrize("name,viewport", [("desktop", DESKTOP), ("mobile", MOBILE)])
def test_report_page_fits_the_screen(site, name, viewport):
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"report-{name}.png"
    results = run(site, [{"do": "goto"}, {"do": "layout"}, {"do": "screenshot", "path": str(shot)}], timeout=180,
                  viewport=viewport)
    assert results[0]["http"] == 200
    assert results[-1]["errors"] == []
    lay = results[1]["layout"]
    width = lay["viewport"]["width"]
    assert lay["document_width"] <= width
    assert len(lay["tables"]) >= 7  # the comparison, one per paper, the jobs
    for t in lay["tables"]:
        # no sideways scroll box hiding columns: the table fits its box and the box the screen
        assert t["scroll_width"] <= t["client_width"] and t["right"] <= width + 0.5, (t["class"], t["scroll_width"])
        for c in t["cells"]:
            assert c["shown"] and c["width"] > 0 and c["right"] <= width + 0.5, (t["class"], c)
            assert c["label"], t["class"]  # a stacked cell names its column
    imgs = lay["images"]
    assert len(imgs) == 5  # identification scaling, cryptomask against hers (seed 001 Fig. 2/3), 1:1 bytes, ORL, LFW
    assert all(i["loaded"] and i["loading"] != "lazy" for i in imgs), imgs
    assert imgs[0]["top"] < lay["viewport"]["height"] / 2  # the first plot shows as the page opens
    with Image.open(shot) as img:
        assert img.size[0] == width  # full-page shot: no horizontal overflow of the page
