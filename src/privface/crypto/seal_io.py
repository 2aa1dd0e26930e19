"""Bytes in and out of ``tenseal.sealapi`` objects (internal to ``lattice``).

The sealapi binding saves and loads SEAL objects through file paths only; these helpers go through a
private temporary file (in /dev/shm when it exists). ``save`` uses SEAL's default compression (zstd).

``data_array`` reads the words of a serialized Ciphertext/Plaintext back as a numpy array (zstd via
``zstandard``). ``plaintext_bytes`` writes a SEAL ``Plaintext`` directly in SEAL's uncompressed serialization format
(SEALHeader · parms_id · coeff_count · scale · DynArray), which is the only way the binding offers to
set raw RNS/NTT plaintext data (``lattice`` needs it for uniform masks and coefficient read-outs).
"""
from __future__ import annotations

import os
import struct
import tempfile

import numpy as np

from ..errors import CryptoError

SEAL_MAGIC = 0xA15E
_HEADER = struct.Struct("<HBBBBHQ")  # magic, header size, version major, minor, compr mode, reserved, size
COMPR_NONE, COMPR_ZLIB, COMPR_ZSTD = 0, 1, 2
_TMPDIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
_VERSION: tuple[int, int] | None = None


def save(obj) -> bytes:
    """SEAL's serialization of ``obj`` (zstd-compressed by SEAL)."""
    fd, path = tempfile.mkstemp(prefix="pf-seal-", dir=_TMPDIR)
    os.close(fd)
    try:
        obj.save(path)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def check_header(blob: bytes, what: str) -> None:
    """Refuse anything that is not exactly one SEAL object with a known compression mode."""
    if len(blob) < _HEADER.size:
        raise CryptoError(f"{what}: truncated SEAL object ({len(blob)} bytes)")
    magic, hsize, _, _, compr, _, size = _HEADER.unpack_from(blob)
    if magic != SEAL_MAGIC or hsize != _HEADER.size:
        raise CryptoError(f"{what}: not a SEAL object (bad magic/header)")
    if compr not in (COMPR_NONE, COMPR_ZLIB, COMPR_ZSTD):
        raise CryptoError(f"{what}: unknown SEAL compression mode {compr}")
    if size != len(blob):
        raise CryptoError(f"{what}: SEAL object says {size} bytes, got {len(blob)}")


def load(obj, context, blob: bytes, what: str):
    """``obj.load(context, …)`` from bytes; SEAL validates the data against ``context``. Returns ``obj``."""
    check_header(blob, what)
    fd, path = tempfile.mkstemp(prefix="pf-seal-", dir=_TMPDIR)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        obj.load(context, path)
    except (RuntimeError, ValueError, TypeError) as e:
        raise CryptoError(f"{what}: SEAL refused the data ({e})") from None
    finally:
        os.unlink(path)
    return obj


def _version() -> tuple[int, int]:
    global _VERSION
    if _VERSION is None:
        import tenseal.sealapi as sealapi
        raw = save(sealapi.Plaintext(1))
        _VERSION = (raw[3], raw[4])
    return _VERSION


def _header(size: int) -> bytes:
    major, minor = _version()
    return _HEADER.pack(SEAL_MAGIC, _HEADER.size, major, minor, COMPR_NONE, 0, size)


def dynarray_bytes(data: np.ndarray) -> bytes:
    """An uncompressed SEAL DynArray (SEALHeader · u64 size · words) holding ``data`` as uint64."""
    data = np.ascontiguousarray(data, dtype="<u8")
    inner = struct.pack("<Q", data.size) + data.tobytes()
    return _header(_HEADER.size + len(inner)) + inner


def plaintext_bytes(parms_id, data: np.ndarray, scale: float) -> bytes:
    """An uncompressed SEAL Plaintext holding ``data`` (uint64; RNS·NTT layout when parms_id is set)."""
    data = np.ascontiguousarray(data, dtype="<u8")
    inner = dynarray_bytes(data)
    body = struct.pack("<4Q", *parms_id) + struct.pack("<Qd", data.size, float(scale)) + inner
    return _header(_HEADER.size + len(body)) + body


def load_plaintext(context, parms_id, data: np.ndarray, scale: float):
    import tenseal.sealapi as sealapi
    return load(sealapi.Plaintext(), context, plaintext_bytes(parms_id, data, scale), "plaintext")


def data_array(blob: bytes, count: int, what: str) -> np.ndarray:
    """The ``count`` uint64 words of the DynArray that ends a serialized Ciphertext/Plaintext (any compression).

    SEAL writes the object's fields and then its DynArray (SEALHeader · u64 size · words) last, inside the
    outer header's (possibly zstd-compressed) stream; the size field is checked against ``count``."""
    check_header(blob, what)
    compr = _HEADER.unpack_from(blob)[4]
    body = blob[_HEADER.size:]
    if compr == COMPR_ZSTD:
        import zstandard

        body = zstandard.ZstdDecompressor().decompress(body, max_output_size=8 * count + 4096)
    elif compr == COMPR_ZLIB:
        import zlib

        body = zlib.decompress(body)
    start = len(body) - 8 * count
    if count < 1 or start < 8 or struct.unpack_from("<Q", body, start - 8)[0] != count:
        raise CryptoError(f"{what}: does not end in a DynArray of {count} words")
    return np.frombuffer(body, dtype="<u8", count=count, offset=start)
