"""The native core: the Rust extension module ``privface_native``, built by maturin from the crate ``native/``
(its own distribution, ``privface-native``, which ``make install`` installs next to privface).

Only hot loops live there (Joye–Libert's discrete logarithm, half-gates garbling and evaluation, …); the
modules of this package call them through ``ext`` below. There is no Python fallback: a missing extension,
or one built from other sources than the checkout's, is an ``NativeBuildError`` at import, naming the fix
(``make install``). The extension embeds the SHA-256 of its crate's sources (native/build.rs); when this
module sits in a checkout (an editable install, or PYTHONPATH=src) the same hash is computed over the
checkout's crate and the two must agree.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

CRATE = Path(__file__).resolve().parents[3] / "native"
"""The crate in a checkout (absent in an installed wheel, where nothing can be stale)."""


class NativeBuildError(ImportError):
    """The native extension is missing or was built from other sources than the checkout's."""


def source_hash(crate: Path = CRATE) -> str:
    """SHA-256 of build.rs, Cargo.toml, Cargo.lock and every file under src/, sorted by relative path, each
    hashed as ``path \\0 length \\0 bytes`` — the same digest build.rs embeds."""
    files = [crate / "build.rs", crate / "Cargo.toml", crate / "Cargo.lock", *(p for p in (crate / "src").rglob("*")
                                                                                  if p.is_file())]
    h = hashlib.sha256()
    for rel, path in sorted((p.relative_to(crate).as_posix(), p) for p in files):
        data = path.read_bytes()
        h.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def _load() -> ModuleType:
    try:
        import privface_native as _native
    except ImportError as e:
        raise NativeBuildError(
            "privface's native extension (privface_native, Rust crate native/) is not installed: run "
            f"`make install` (or `pip install ./native`); it needs cargo ({e})"
        ) from e
    if (CRATE / "Cargo.toml").is_file():
        want = source_hash(CRATE)
        if _native.SOURCE_HASH != want:
            raise NativeBuildError(
                f"privface's native extension ({_native.__file__}) was built from other sources than this "
                f"checkout's native/ (built {_native.SOURCE_HASH[:12]}, sources {want[:12]}): run `make install`"
            )
    return _native


ext = _load()
