"""The CLI end to end, as a user runs it (subprocess), on photos that ship in installed packages."""
import json
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
    people = {"hopper": demo_data.enrolled_photo(), "collins": demo_data.impostor_photos()["astronaut (Eileen Collins)"]}
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
    same = json.loads(run("compare", hopper, hopper, "--json").stdout)
    assert same["match"] is True and same["distance"] == 0 and same["threshold"] == 0.6
    other = json.loads(run("compare", hopper, str(demo_data.impostor_photos()["cameraman"]), "--json").stdout)
    assert other["match"] is False and other["distance"] > 0.6


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
    assert out["correct"] == out["total"] == 6
    assert {a["genuine"] for a in out["attempts"]} == {True, False}


def test_train_pca_then_compare_with_it(mini_dataset, tmp_path):
    model = tmp_path / "pca.npz"
    out = json.loads(run("train-pca", "--dataset", str(mini_dataset), "-k", "4", "--out", str(model), "--json").stdout)
    assert out["k"] == 4 and out["images"] == 8 and model.is_file()
    hopper = str(mini_dataset / "hopper" / "0.png")
    same = json.loads(run("compare", hopper, hopper, "--backend", "pca", "--model", str(model), "--json").stdout)
    assert same["backend"] == "pca" and same["distance"] == 0 and same["match"] is True
    r = run("compare", hopper, hopper, "--backend", "pca", "--model", str(tmp_path / "missing.npz"), check=False)
    assert r.returncode == 2 and "no such PCA model file" in r.stderr
