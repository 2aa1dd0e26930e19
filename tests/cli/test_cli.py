"""The CLI end to end, as a user runs it (subprocess), on photos that ship in installed packages."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from privface import demo_data


def run(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "privface.cli", *args], capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def mini_dataset(tmp_path_factory):
    """Two identities × four images: Grace Hopper and Eileen Collins, each with altered copies."""
    root = tmp_path_factory.mktemp("mini")
    people = {"hopper": demo_data.enrolled_photo(),
              "collins": demo_data.impostor_photos()["astronaut (Eileen Collins)"]}
    for name, path in people.items():
        im = Image.open(path).convert("RGB")
        (root / name).mkdir()
        variants = [im, ImageOps.mirror(im), ImageEnhance.Brightness(im).enhance(0.75),
                    im.resize((im.width // 2, im.height // 2))]
        for k, v in enumerate(variants):
            v.save(root / name / f"{k}.png")
    return root


def test_embed_json(tmp_path):
    r = run("embed", str(demo_data.enrolled_photo()), "--json")
    out = json.loads(r.stdout)
    assert out["dim"] == 128 and len(out["faces"]) == 1
    assert len(out["faces"][0]["embedding"]) == 128 and len(out["faces"][0]["box"]) == 4


def test_compare_genuine_and_impostor():
    hopper = str(demo_data.enrolled_photo())
    cameraman = str(demo_data.impostor_photos()["cameraman"])
    same = json.loads(run("compare", hopper, hopper, "--json").stdout)  # the default backend: sface (issue 36)
    assert same["match"] is True and same["distance"] == 0 and same["threshold"] == 1.12  # faces.thresholds
    assert same["backend"] == "sface"
    other = json.loads(run("compare", hopper, cameraman, "--json").stdout)
    assert other["match"] is False and other["distance"] > 1.12
    dlib = json.loads(run("compare", hopper, cameraman, "--backend", "dlib-resnet128", "--json").stdout)
    assert dlib["backend"] == "dlib-resnet128" and dlib["threshold"] == 0.53
    assert dlib["match"] is False and dlib["distance"] > 0.6


def test_compare_bad_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.jpg"
    bad.write_bytes(b"\x00" * 100)
    r = run("compare", str(bad), str(demo_data.enrolled_photo()), check=False)
    assert r.returncode == 2 and "not an image" in r.stderr and "Traceback" not in r.stderr
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (120, 120), dtype=np.uint8)).save(noise)
    r = run("compare", str(noise), str(demo_data.enrolled_photo()), check=False)
    assert r.returncode == 2 and "no face found" in r.stderr


def test_eval_folder_dataset_json_and_report(mini_dataset, tmp_path):
    rep = tmp_path / "rep"
    out = json.loads(run("eval", "--dataset", str(mini_dataset), "--json", "--report", str(rep)).stdout)
    for key in ("dataset", "backend", "protocol", "images", "subjects", "undetected", "genuine_pairs",
                "impostor_pairs", "eer", "auc", "threshold", "threshold_quantized", "tar_at_far", "seconds"):
        assert key in out, key
    assert out["images"] == 8 and out["subjects"] == 2 and out["undetected"] == 0
    assert out["genuine_pairs"] == 12 and out["impostor_pairs"] == 16
    assert out["eer"] == 0 and out["auc"] == 1.0 and out["rank1"] == 1.0
    assert set(out["tar_at_far"]) == {"1e-4", "1e-3", "1e-2"}
    assert {p.name for p in rep.iterdir()} == {"roc.png", "det.png", "hist.png", "summary.md"}
    again = json.loads(run("eval", "--dataset", str(mini_dataset), "--json").stdout)
    assert again["embedded_now"] == 0 and again["eer"] == out["eer"]  # second run served from the cache


def test_eval_without_data_root_says_how_to_fix(monkeypatch):
    monkeypatch.delenv("PRIVFACE_DATA", raising=False)
    r = run("eval", "--dataset", "orl", check=False)
    assert r.returncode == 2 and "PRIVFACE_DATA" in r.stderr


def test_demo_runs_and_decides_correctly():
    r = run("demo", "--json")
    out = json.loads(r.stdout)
    assert out["correct"] == out["total"] == 6 and out["backend"] == "sface"  # the default backend (issue 36)
    assert {a["genuine"] for a in out["attempts"]} == {True, False}
    assert out["protocol"] == "im2020" and out["transport"] == "http" and out["security_bits"] == 112
    assert all(a["decision"] == ("accept" if a["genuine"] else "reject") for a in out["attempts"])
    assert all(a["bytes_sent"] > 30_000 and a["network_ms"] >= 0 for a in out["attempts"])


def test_train_pca_then_compare_with_it(mini_dataset, tmp_path):
    model = tmp_path / "pca.npz"
    out = json.loads(run("train-pca", "--dataset", str(mini_dataset), "-k", "4", "--out", str(model), "--json").stdout)
    assert out["k"] == 4 and out["images"] == 8 and model.is_file()
    hopper = str(mini_dataset / "hopper" / "0.png")
    same = json.loads(run("compare", hopper, hopper, "--backend", "pca", "--model", str(model), "--json").stdout)
    assert same["backend"] == "pca" and same["distance"] == 0 and same["match"] is True
    r = run("compare", hopper, hopper, "--backend", "pca", "--model", str(tmp_path / "missing.npz"), check=False)
    assert r.returncode == 2 and "no such PCA model file" in r.stderr


def test_protocols_catalogue():
    rows = {d["name"]: d for d in json.loads(run("protocols", "--json").stdout)}
    im, gsm = rows["im2020"], rows["gsm"]
    assert set(gsm["modes"]) == {"pi1", "pi2", "pi3"} and gsm["modes"]["pi1"]["leakage"]["device"]
    assert im["name"] == "im2020" and "leakage" in im["modes"]["basic"]
    secure = im["modes"]["secure-comparison"]
    assert secure["status"].startswith("implemented") and secure["leakage"]["server"] == ["decision r", "subject ID"]
    assert "threat" in run("protocols").stdout


def test_eval_through_im2020_matches_plaintext(mini_dataset):
    out = json.loads(run("eval", "--dataset", str(mini_dataset), "--protocol", "im2020", "--pairs", "10",
                         "--insecure-test-params", "--json").stdout)
    assert out["protocol"] == "im2020" and out["pairs_total"] == 28 and out["pairs_run"] == 10
    assert out["genuine_pairs"] == 5 and out["impostor_pairs"] == 5
    # eval's default backend is sface (issue 36), and its τ is sface's: ⌊(1.12·128)²⌋
    assert out["mismatches"] == 0 and out["score_mismatches"] == 0 and out["tau"] == 20552
    r = run("eval", "--dataset", str(mini_dataset), "--pairs", "10", check=False)
    assert r.returncode == 2 and "im2020 only" in r.stderr
    again = json.loads(run("eval", "--dataset", str(mini_dataset), "--protocol", "im2020", "--pairs", "10",
                           "--insecure-test-params", "--json").stdout)  # the default checkpoint: nothing to redo
    assert again["pairs_resumed"] == 10 and again["eer_quantized"] == out["eer_quantized"]
    assert again["checkpoint"] == out["checkpoint"] and "/checkpoints/im2020-" in out["checkpoint"]
    r = run("eval", "--dataset", str(mini_dataset), "--protocol", "im2020", "--insecure-test-params",
            "--mode", "secure-comparison", check=False)
    assert r.returncode == 2 and "--pairs N" in r.stderr


def test_eval_through_kolberg_decides_at_the_backends_threshold(mini_dataset):
    """Issue 36: kolberg's eval decides at the --backend's shared default (set on held-out data), not at the EER
    threshold of the pairs it evaluates (which set τ on the evaluation's own probes)."""
    from privface.protocols.kolberg.params import default_thresholds

    for backend in ("sface", "dlib-resnet128"):
        out = json.loads(run("eval", "--dataset", str(mini_dataset), "--protocol", "kolberg", "--scheme", "ntru",
                             "--backend", backend, "--json").stdout)
        assert out["threshold_protocol"] == default_thresholds(backend)["ntru"], backend
        assert out["threshold_source"] == f"{backend} default (faces.thresholds)"
        assert out["mismatches"] == 0 and out["pairs_run"] == out["pairs_total"] == 28
        assert out["pairs_sampled"] is None


def test_eval_pairs_default_and_all():
    """im2020, gsm and kolberg sample 2 000 pairs unless told --pairs all (all ORL pairs: hours)."""
    import argparse

    from privface.cli.eval import DEFAULT_PAIRS, _pairs, _pairs_arg

    def ns(protocol, pairs=None, yes=False):
        return argparse.Namespace(protocol=protocol, pairs=pairs, yes=yes)

    assert _pairs(ns("im2020")) == DEFAULT_PAIRS["im2020"] == 2000 and _pairs(ns("gsm")) == 2000
    assert _pairs(ns("kolberg")) == 2000 and _pairs(ns("plain")) is None
    assert _pairs(ns("gsm", "all")) is None and _pairs(ns("im2020", yes=True)) is None
    assert _pairs(ns("gsm", 300)) == 300 and _pairs_arg("all") == "all" and _pairs_arg("12") == 12
    for bad in ("0", "-3", "many"):
        with pytest.raises(argparse.ArgumentTypeError):
            _pairs_arg(bad)
    r = run("eval", "--dataset", "orl", "--protocol", "gsm", "--pairs", "0", check=False)
    assert r.returncode == 2 and "'all'" in r.stderr


@pytest.mark.parametrize("variant", ["pi1", "pi2", "pi3"])
def test_eval_through_gsm_matches_plaintext(mini_dataset, variant):
    pairs = "4" if variant == "pi3" else "10"
    out = json.loads(run("eval", "--dataset", str(mini_dataset), "--protocol", "gsm", "--variant", variant,
                         "--pairs", pairs, "--insecure-test-params", "--m", "8", "--json").stdout)
    assert out["protocol"] == "gsm" and out["variant"] == variant and out["pairs_run"] == int(pairs)
    assert out["mismatches"] == 0 and out["accepted"] == out["plain_accepted"] and out["zeta"] == 127
    assert 0 < out["cos_threshold_eer"] <= 1 and out["threshold_ip"] == math.ceil(out["cos_threshold"] * 127**2)
    r = run("eval", "--dataset", str(mini_dataset), "--variant", "pi2", check=False)
    assert r.returncode == 2 and "gsm only" in r.stderr


def test_bench_gsm_json_has_the_issue_keys():
    out = json.loads(run("bench", "gsm", "--ell", "16", "--m", "8", "--insecure-test-params", "--paillier-bits",
                         "1024", "--repeat", "1", "--json").stdout)
    for key in ("ell", "m", "paillier_bits", "pi1_enc_ms", "pi1_ms", "pien_enc_ms", "pien_ms", "pi2_ms", "pi3_ms",
                "pi1_m1_bytes", "pi1_t2d_bytes", "pi2_m1_bytes", "pi2_d2t_bytes", "pi2_t2d_bytes", "pi3_m1_bytes",
                "pi3_d2t_bytes", "pi3_t2d_bytes", "pien_d2sp_bytes", "pien_sp2d_bytes"):
        assert key in out
    assert (out["ell"], out["m"], out["paillier_bits"]) == (16, 8, 1024)
    assert out["pien_ms"] > 0 and out["pien_d2sp_bytes"] > out["pien_sp2d_bytes"] > 0
    assert out["pi3_ms"] > 0 and out["pi2_d2t_bytes"] < out["pi2_t2d_bytes"]
    assert out["pi1_m1_bytes"] > out["pi1_ciphertexts"] * 256
    r = run("bench", "gsm", "--ell", "16", check=False)
    assert r.returncode == 2 and "--m" in r.stderr


def test_bench_im2020_json_smoke():
    (row,) = json.loads(run("bench", "im2020", "--insecure-test-params", "--no-face", "--repeat", "1",
                            "--transport", "in-process", "--json").stdout)
    for key in ("security_bits", "k", "c1_face_ms", "c2_encrypt_ms", "s1_blind_esed_ms", "c3_decrypt_ms",
                "s2_unblind_ms", "network_ms", "total_ms", "auth_bytes", "enrol_bytes", "transport"):
        assert key in row, key
    assert row["k"] == 128 and row["accepted"] is True and row["transport"] == "in-process"
    assert row["paper_auth_bytes"] == 268 * 128 + 140 and row["auth_bytes"] > 0
    out = json.loads(run("bench", "im2020-attacks", "--insecure-test-params", "--trials", "2000",
                         "--he-trials", "1", "--hbcs-pairs", "1", "--json").stdout)
    assert all(r.get("accepted", 0) == 0 for r in out["experiments"])
    assert out["hbcs"]["equal"] is True and out["hbcs"]["randomizer_pairs"] == 1
    r = run("bench", "im2020-attacks", "--insecure-test-params", "--mode", "secure-comparison", check=False)
    assert r.returncode == 2 and "basic mode" in r.stderr


def test_bench_im2020_over_http_has_the_same_keys_and_bytes():
    (local,) = json.loads(run("bench", "im2020", "--insecure-test-params", "--no-face", "--repeat", "1",
                              "--transport", "in-process", "--json").stdout)
    (http,) = json.loads(run("bench", "im2020", "--insecure-test-params", "--no-face", "--repeat", "2",
                             "--json").stdout)  # HTTP is the default transport
    assert set(http) == set(local) and http["transport"] == "http" and http["accepted"] is True
    # the same frames (bigints are minimal-length, so sizes vary by a few bytes between runs: a 14-byte AuthFinish
    # may be 13 bytes, hence the absolute slack)
    assert http["auth_bytes_by_message"] == pytest.approx(local["auth_bytes_by_message"], rel=0.01, abs=2)
    assert http["enrol_bytes"] == pytest.approx(local["enrol_bytes"], rel=0.01, abs=2)
    assert http["network_ms"] > 0 and http["s1_blind_esed_ms"] > 0 and http["s2_unblind_ms"] > 0
    parts = ("c2_encrypt_ms", "s1_blind_esed_ms", "c3_decrypt_ms", "s2_unblind_ms", "network_ms")
    assert http["total_ms"] == pytest.approx(sum(http[k] for k in parts), abs=0.01)


@pytest.mark.parametrize("transport", ["in-process", "http"])
def test_bench_im2020_secure_comparison_adds_its_cost(transport):
    (row,) = json.loads(run("bench", "im2020", "--insecure-test-params", "--no-face", "--repeat", "1",
                            "--mode", "secure-comparison", "--transport", transport, "--json").stdout)
    assert row["mode"] == "secure-comparison" and row["accepted"] is True and row["compare_bits"] == 48
    assert list(row["auth_bytes_by_message"]) == ["AuthStart", "AuthChallenge", "CompareRequest",
                                                  "CompareChallenge", "CompareFinish", "AuthResult"]
    by = row["auth_bytes_by_message"]
    assert row["compare_bytes"] == (by["CompareRequest"] + by["CompareChallenge"] + by["CompareFinish"]
                                    + by["AuthResult"])
    assert row["s3_compare_ms"] > 0 and row["compare_bytes"] > 10_000  # 48 OT pairs and the garbled tables
    parts = ("c2_encrypt_ms", "s1_blind_esed_ms", "c3_decrypt_ms", "s3_compare_ms", "network_ms")
    assert row["total_ms"] == pytest.approx(sum(row[k] for k in parts), abs=0.01)
