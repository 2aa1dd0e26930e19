"""The README's Python examples run as written: its ```python blocks are extracted and executed, in a folder
holding the photos they name (photos that ship with matplotlib and scikit-image) and, for the 1:1 example, with
a real `privface serve --protocol im2020 --no-auth` (112-bit keys, SQLite) behind the URL the README names."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageEnhance, ImageOps

from privface.demo_data import enrolled_photo, impostor_photos

ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:8000"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", (ROOT / "README.md").read_text(), re.S | re.M)


def test_readme_has_the_two_examples():
    blocks = python_blocks()
    assert len(blocks) == 2, "README.md: one 1:1 verification and one 1:N identification example"
    assert "Im2020Client" in blocks[0] and "privface.identify" in blocks[1]
    assert all(len(b.strip().splitlines()) <= 12 for b in blocks)


@pytest.fixture
def photo_dir(tmp_path, monkeypatch) -> Path:
    enrolled = Image.open(enrolled_photo()).convert("RGB")
    shutil.copy(enrolled_photo(), tmp_path / "me.jpg")
    ImageEnhance.Brightness(ImageOps.mirror(enrolled)).enhance(0.8).save(tmp_path / "me-again.jpg")
    impostors = impostor_photos()
    shutil.copy(impostors["astronaut (Eileen Collins)"], tmp_path / "someone.png")
    faces = tmp_path / "faces"
    faces.mkdir()
    shutil.copy(enrolled_photo(), faces / "grace_hopper.jpg")
    shutil.copy(impostors["astronaut (Eileen Collins)"], faces / "astronaut.png")
    shutil.copy(impostors["cameraman"], faces / "cameraman.png")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_verification_example_runs(photo_dir):
    from privface.service.app import create_app
    from privface.service.bindings.im2020 import Im2020Service
    from privface.service.launch import serve_in_thread
    from privface.store.sqlite import SQLiteStore

    code = python_blocks()[0]
    assert README_URL in code
    with SQLiteStore(photo_dir / "server.db") as store, \
            serve_in_thread(create_app(store, [Im2020Service(store)])) as url:  # 112-bit keys, no API keys
        scope: dict = {}
        exec(compile(code.replace(README_URL, url), "README.md (1:1)", "exec"), scope)
    assert scope["accepted"] is True
    assert scope["rejected"] is False
    assert not (photo_dir / "me.key").exists()  # client.revoke() deleted it


def test_readme_identification_example_runs(photo_dir, capsys):
    scope: dict = {}
    exec(compile(python_blocks()[1], "README.md (1:N)", "exec"), scope)
    assert scope["result"]["id"] == "grace_hopper"
    assert capsys.readouterr().out.strip().splitlines()[-1] == "grace_hopper"
