"""Dataset loaders and the embedding cache, on small folders the tests build."""

import numpy as np
import pytest

from privface.errors import DatasetError
from privface.eval import datasets
from privface.eval.cache import EmbeddingCache


def _touch_images(folder, names):
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_bytes(b"x")


def test_folder_per_identity(tmp_path):
    _touch_images(tmp_path / "alice", ["1.jpg", "2.png"])
    _touch_images(tmp_path / "bob", ["a.pgm", "notes.txt"])
    ds = datasets.load(str(tmp_path))
    assert [p.name for p in ds.paths] == ["1.jpg", "2.png", "a.pgm"]
    assert list(ds.ids) == ["alice", "alice", "bob"] and ds.subjects == 2 and ds.pairs is None


def test_folder_needs_two_identities(tmp_path):
    _touch_images(tmp_path / "alice", ["1.jpg"])
    with pytest.raises(DatasetError, match="two identities"):
        datasets.load_folder(tmp_path)


def test_orl_layout_natural_order(tmp_path):
    for s in (1, 2, 10):
        _touch_images(tmp_path / "orl" / "images" / f"s{s}", [f"{k}.pgm" for k in (1, 2, 10)])
    ds = datasets.load("orl", tmp_path)
    assert list(dict.fromkeys(ds.ids)) == ["s1", "s2", "s10"]
    assert [p.name for p in ds.paths[:3]] == ["1.pgm", "2.pgm", "10.pgm"]


def _lfw(tmp_path, lines, first="1 2"):
    base = tmp_path / "lfw"
    for name in ("Ann_A", "Bob_B"):
        _touch_images(base / "images" / name, [f"{name}_{i:04d}.jpg" for i in (1, 2, 3)])
    (base / "pairs.txt").write_text("\n".join([first, *lines]) + "\n")


def test_lfw_pairs_protocol(tmp_path):
    _lfw(tmp_path, ["Ann_A\t1\t2", "Bob_B 1 3", "Ann_A 1 Bob_B 2", "Ann_A 3 Bob_B 1"])
    ds = datasets.load("lfw", tmp_path)
    assert ds.pairs.shape == (4, 2) and list(ds.genuine) == [True, True, False, False]
    assert list(ds.folds) == [0, 0, 0, 0]
    assert ds.paths[ds.pairs[0, 0]].name == "Ann_A_0001.jpg"
    assert len(ds.paths) == 6  # each image once


@pytest.mark.parametrize("lines, first, message", [
    (["Ann_A 1 2"], "1 2", "expected 4 pair lines"),
    (["Ann_A 1 2", "Bob_B 1 3", "Ann_A 1 2", "Ann_A 3 Bob_B 1"], "1 2", "malformed"),
    (["Ann_A 1 9", "Bob_B 1 3", "Ann_A 1 Bob_B 2", "Ann_A 3 Bob_B 1"], "1 2", "missing"),
    (["x"], "ten 300", "first line"),
])
def test_lfw_pairs_errors(tmp_path, lines, first, message):
    _lfw(tmp_path, lines, first)
    with pytest.raises(DatasetError, match=message):
        datasets.load_lfw(tmp_path)


def test_data_root_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVFACE_DATA", raising=False)
    with pytest.raises(DatasetError, match="PRIVFACE_DATA"):
        datasets.data_root()
    with pytest.raises(DatasetError, match="not a directory"):
        datasets.data_root(tmp_path / "nope")
    with pytest.raises(DatasetError, match="ORL not found"):
        datasets.load("orl", tmp_path)
    with pytest.raises(DatasetError, match="unknown dataset"):
        datasets.load("casia", tmp_path)


def test_cache_round_trip_and_isolation_by_options(tmp_path):
    path = tmp_path / "c.sqlite"
    c = EmbeddingCache({"backend": "x", "jitter": 0}, path)
    v = np.arange(4, dtype=np.float32)
    c.put_many([("h1", "hog", v), ("h2", "", None)])
    c.close()
    c = EmbeddingCache({"jitter": 0, "backend": "x"}, path)  # same options, other order
    got = c.get_many(["h1", "h2", "h3"])
    assert got["h1"][0] == "hog" and np.array_equal(got["h1"][1], v)
    assert got["h2"] == ("", None) and "h3" not in got
    assert EmbeddingCache({"backend": "x", "jitter": 1}, path).get_many(["h1"]) == {}
    assert oct(path.stat().st_mode & 0o777) == "0o600"
