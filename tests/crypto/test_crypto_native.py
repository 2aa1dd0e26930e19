"""The native extension's build check: it embeds the hash of the crate it was built from, and a checkout whose
crate differs is refused at import with the fix in the message."""
from __future__ import annotations

import shutil

import pytest

from privface.crypto import native


def test_extension_matches_the_checkouts_crate():
    assert native.CRATE.is_dir()
    assert native.ext.SOURCE_HASH == native.source_hash()


def test_a_changed_crate_is_a_clear_error(tmp_path, monkeypatch):
    crate = tmp_path / "native"
    shutil.copytree(native.CRATE, crate, ignore=shutil.ignore_patterns("target"))
    assert native.source_hash(crate) == native.ext.SOURCE_HASH
    with open(crate / "src" / "lib.rs", "a") as f:
        f.write("// edited\n")
    assert native.source_hash(crate) != native.ext.SOURCE_HASH
    monkeypatch.setattr(native, "CRATE", crate)
    with pytest.raises(native.NativeBuildError, match="make install"):
        native._load()
    (crate / "src" / "lib.rs").unlink()  # a file removed changes the hash too
    assert native.source_hash(crate) != native.ext.SOURCE_HASH
