"""Encoder/decoder driven by ``schema.json`` (the only description of the format).

Frame: magic | version u8 | type id u16 | the message's fields in schema order. Decoding checks the
frame, every length against its schema maximum, value ranges and patterns, and that the fields use up
the input exactly; any violation is a ``WireError`` and nothing else.

Fixed-width integers (schema type ``uint``, issue 39): a value whose width is a protocol fact — a Paillier ciphertext
mod N², a residue mod N — travels as exactly ``width × times`` big-endian bytes, left-padded with zeros, so a message's
size depends on the key and never on the random values it carries. The width is a number in the schema or names an
earlier ``width`` field of the message (a u16: the byte width of N); ``decode(..., widths=...)`` refuses a message
whose width field differs from the one the receiver's key gives. Retired type ids (schema ``retired``) are refused
with the reason and the version that replaced them.

Frame stream (one HTTP body carrying several messages, schema "stream"): u32 big-endian length | frame, repeated.
``framed`` writes one; ``FrameReader`` reads them one at a time from any ``read(n)`` (a socket-backed HTTP body
included), each refused before it is read if its length passes the caller's bound, so a reader holds one frame.
"""
from __future__ import annotations

import dataclasses
import json
import re
import struct
from importlib import resources
from typing import Any, ClassVar

from ..errors import PrivfaceError


class WireError(PrivfaceError):
    """Bytes that are not a well-formed message of the expected type (or a value that cannot be encoded)."""


def _load_schema() -> dict:
    return json.loads(resources.files(__package__).joinpath("schema.json").read_text("utf-8"))


SCHEMA = _load_schema()
MAGIC: bytes = SCHEMA["magic"].encode("ascii")
VERSION: int = SCHEMA["version"]
MAX_MESSAGE_BYTES: int = SCHEMA["max_message_bytes"]
_HEADER = len(MAGIC) + 3
_FIXED = {"u8": ">B", "u16": ">H", "u32": ">I", "u64": ">Q", "i32": ">i", "bool": ">B"}
_FIXED_RANGE = {"u8": (0, 2**8 - 1), "u16": (0, 2**16 - 1), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1),
                "i32": (-(2**31), 2**31 - 1)}


def _resolve(spec) -> dict:
    """A field type: a named entry of ``types`` or an inline {type, max, of, pattern} object."""
    spec = SCHEMA["types"][spec] if isinstance(spec, str) else spec
    out = dict(spec)
    if "of" in out:
        out["of"] = _resolve(out["of"])
    if "pattern" in out:
        out["regex"] = re.compile(out["pattern"])
    return out


_BY_NAME = {m["name"]: (m["id"], [(f, _resolve(t)) for f, t in m["fields"]]) for m in SCHEMA["messages"]}
_BY_ID = {tid: name for name, (tid, _) in _BY_NAME.items()}
_RETIRED = {int(tid): why for tid, why in SCHEMA.get("retired", {}).items()}
if len(_BY_ID) != len(_BY_NAME) or set(_RETIRED) & set(_BY_ID):
    raise RuntimeError("wire schema: duplicate or retired message type ids")


def _check_widths() -> None:
    """Every ``uint`` names a literal width or a ``width`` field that comes before it in its message."""
    for name, (_, fields) in _BY_NAME.items():
        seen: set[str] = set()
        for f, spec in fields:
            inner = spec
            while inner["type"] in ("list", "optional"):
                inner = inner["of"]
            if inner["type"] == "uint" and isinstance(inner["width"], str) and inner["width"] not in seen:
                raise RuntimeError(f"wire schema: {name}.{f} needs the width field {inner['width']!r} before it")
            if spec["type"] == "width":
                seen.add(f)


_check_widths()


def _uint_size(spec: dict, ctx: dict | None) -> int:
    """The byte size of a ``uint``: its literal width, or its message's width field, times ``times``."""
    width = spec["width"]
    if isinstance(width, str):
        if ctx is None or width not in ctx:
            raise WireError(f"a uint of width {width!r} outside a message that has that field")
        width = ctx[width]
    return int(width) * spec.get("times", 1)


# ---------------------------------------------------------------- encoding


def _enc(spec: dict, v, out: bytearray, where: str, ctx: dict | None = None) -> None:
    t = spec["type"]
    if t in _FIXED:
        if t == "bool":
            if not isinstance(v, bool):
                raise WireError(f"{where}: expected bool, got {type(v).__name__}")
            v = int(v)
        elif isinstance(v, bool) or not isinstance(v, int):
            raise WireError(f"{where}: expected an integer, got {type(v).__name__}")
        else:
            lo, hi = _FIXED_RANGE[t]
            if not lo <= v <= hi:
                raise WireError(f"{where}: {v} does not fit {t}")
        out += struct.pack(_FIXED[t], v)
    elif t in ("bytes", "str"):
        if t == "str":
            if not isinstance(v, str):
                raise WireError(f"{where}: expected str, got {type(v).__name__}")
            if "regex" in spec and not spec["regex"].fullmatch(v):
                raise WireError(f"{where}: value does not match {spec['pattern']}")
            v = v.encode("utf-8")
        elif not isinstance(v, (bytes, bytearray)):
            raise WireError(f"{where}: expected bytes, got {type(v).__name__}")
        if len(v) > spec["max"]:
            raise WireError(f"{where}: {len(v)} bytes exceed the maximum {spec['max']}")
        out += struct.pack(">I", len(v)) + bytes(v)
    elif t == "bigint":
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise WireError(f"{where}: expected a non-negative integer, got {type(v).__name__}")
        v = int(v)
        if v < 0:
            raise WireError(f"{where}: bigint must be non-negative")
        raw = v.to_bytes((v.bit_length() + 7) // 8, "big")
        if len(raw) > spec["max"]:
            raise WireError(f"{where}: integer of {len(raw)} bytes exceeds the maximum {spec['max']}")
        out += struct.pack(">H", len(raw)) + raw
    elif t == "width":
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= spec["max"]:
            raise WireError(f"{where}: a byte width must be an integer in [1, {spec['max']}], got {v!r}")
        out += struct.pack(">H", v)
    elif t == "uint":
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise WireError(f"{where}: expected a non-negative integer, got {type(v).__name__}")
        v, size = int(v), _uint_size(spec, ctx)
        if v < 0 or v.bit_length() > 8 * size:
            raise WireError(f"{where}: integer does not fit the field's {size} bytes")
        out += v.to_bytes(size, "big")
    elif t == "list":
        if not isinstance(v, (list, tuple)):
            raise WireError(f"{where}: expected a list, got {type(v).__name__}")
        if len(v) > spec["max"]:
            raise WireError(f"{where}: {len(v)} items exceed the maximum {spec['max']}")
        out += struct.pack(">I", len(v))
        for i, item in enumerate(v):
            _enc(spec["of"], item, out, f"{where}[{i}]", ctx)
    elif t == "optional":
        if v is None:
            out += b"\x00"
        else:
            out += b"\x01"
            _enc(spec["of"], v, out, where, ctx)
    else:
        raise WireError(f"{where}: unknown wire type {t!r} in the schema")


def encode(name: str, values: dict[str, Any]) -> bytes:
    """The frame of message ``name`` with the given field values."""
    if name not in _BY_NAME:
        raise WireError(f"unknown message type {name!r}")
    tid, fields = _BY_NAME[name]
    if set(values) != {f for f, _ in fields}:
        raise WireError(f"{name}: fields {sorted(values)} differ from the schema's {[f for f, _ in fields]}")
    out = bytearray(MAGIC + struct.pack(">BH", VERSION, tid))
    for f, spec in fields:
        _enc(spec, values[f], out, f"{name}.{f}", values)
    if len(out) > MAX_MESSAGE_BYTES:
        raise WireError(f"{name}: {len(out)} bytes exceed the message maximum {MAX_MESSAGE_BYTES}")
    return bytes(out)


# ---------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int, where: str) -> bytes:
        if self.pos + n > len(self.data):
            raise WireError(f"{where}: message truncated (needs {n} more bytes at offset {self.pos})")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str, where: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), where))[0]


def _dec(spec: dict, r: _Reader, where: str, ctx: dict | None = None):
    t = spec["type"]
    if t in _FIXED:
        v = r.unpack(_FIXED[t], where)
        if t == "bool":
            if v > 1:
                raise WireError(f"{where}: bool must be 0 or 1, got {v}")
            return bool(v)
        return v
    if t in ("bytes", "str"):
        n = r.unpack(">I", where)
        if n > spec["max"]:
            raise WireError(f"{where}: length {n} exceeds the maximum {spec['max']}")
        raw = r.take(n, where)
        if t == "bytes":
            return raw
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise WireError(f"{where}: not valid UTF-8") from e
        if "regex" in spec and not spec["regex"].fullmatch(s):
            raise WireError(f"{where}: value does not match {spec['pattern']}")
        return s
    if t == "bigint":
        n = r.unpack(">H", where)
        if n > spec["max"]:
            raise WireError(f"{where}: integer of {n} bytes exceeds the maximum {spec['max']}")
        raw = r.take(n, where)
        if raw[:1] == b"\x00":
            raise WireError(f"{where}: integer has a leading zero byte (not minimal)")
        return int.from_bytes(raw, "big")
    if t == "width":
        v = r.unpack(">H", where)
        if not 1 <= v <= spec["max"]:
            raise WireError(f"{where}: byte width {v} outside [1, {spec['max']}]")
        return v
    if t == "uint":
        return int.from_bytes(r.take(_uint_size(spec, ctx), where), "big")
    if t == "list":
        n = r.unpack(">I", where)
        if n > spec["max"]:
            raise WireError(f"{where}: {n} items exceed the maximum {spec['max']}")
        return [_dec(spec["of"], r, f"{where}[{i}]", ctx) for i in range(n)]
    if t == "optional":
        flag = r.unpack(">B", where)
        if flag > 1:
            raise WireError(f"{where}: optional flag must be 0 or 1, got {flag}")
        return _dec(spec["of"], r, where, ctx) if flag else None
    raise WireError(f"{where}: unknown wire type {t!r} in the schema")


def message_type(data) -> str:
    """The message name in a frame's header (checks magic, version and type id only)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"a message must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(data)} bytes exceeds the maximum {MAX_MESSAGE_BYTES}")
    if len(data) < _HEADER:
        raise WireError(f"message truncated: {len(data)} bytes, the header alone has {_HEADER}")
    if data[:len(MAGIC)] != MAGIC:
        raise WireError("not a privface wire message (bad magic)")
    version, tid = struct.unpack(">BH", data[len(MAGIC):_HEADER])
    if version != VERSION:
        raise WireError(f"unsupported wire version {version} (this build speaks {VERSION})")
    if tid in _RETIRED:
        raise WireError(f"message type id {tid} is retired: {_RETIRED[tid]}")
    if tid not in _BY_ID:
        raise WireError(f"unknown message type id {tid}")
    return _BY_ID[tid]


def decode(data, expected: str | None = None, widths: dict[str, int] | None = None) -> tuple[str, dict[str, Any]]:
    """(name, field values) of one frame; ``expected`` names the only acceptable message type; ``widths`` maps
    width fields (e.g. ``n_bytes``) to the value the receiver's key gives — another value is refused."""
    name = message_type(data)
    if expected is not None and name != expected:
        raise WireError(f"expected a {expected} message, got {name}")
    r = _Reader(bytes(data))
    r.pos = _HEADER
    values: dict[str, Any] = {}
    for f, spec in _BY_NAME[name][1]:
        values[f] = _dec(spec, r, f"{name}.{f}", values)
        if spec["type"] == "width" and widths is not None and f in widths and values[f] != widths[f]:
            raise WireError(f"{name}.{f}: integers of {values[f]} bytes where this key's are {widths[f]} bytes")
    if r.pos != len(r.data):
        raise WireError(f"{name}: {len(r.data) - r.pos} trailing bytes after the last field")
    return name, values


# ---------------------------------------------------------------- frame streams

PREFIX_BYTES = 4


def framed(frame: bytes) -> bytes:
    """One frame of a frame stream: its u32 big-endian length, then the frame."""
    if len(frame) > MAX_MESSAGE_BYTES:
        raise WireError(f"frame of {len(frame)} bytes exceeds the message maximum {MAX_MESSAGE_BYTES}")
    return struct.pack(">I", len(frame)) + frame


def framed_size(frame_bytes: int) -> int:
    """The bytes a frame of ``frame_bytes`` takes in a frame stream."""
    return PREFIX_BYTES + frame_bytes


class FrameReader:
    """The frames of a frame stream from ``read(n)`` (returns at most n bytes, b"" at the end). ``frame(limit)``
    → the next frame (WireError if its length passes ``limit`` or the message maximum — checked before it is read
    — or if the stream ends inside it); ``end()`` checks that nothing follows. ``bytes``: bytes read so far."""

    def __init__(self, read) -> None:
        self._read, self.bytes = read, 0

    def _exact(self, n: int, what: str) -> bytes:
        parts, got = [], 0
        while got < n:
            b = self._read(n - got)
            if not b:
                raise WireError(f"frame stream truncated: {what} needs {n - got} more bytes")
            parts.append(b)
            got += len(b)
        self.bytes += n
        return b"".join(parts)

    def frame(self, limit: int = MAX_MESSAGE_BYTES) -> bytes:
        (n,) = struct.unpack(">I", self._exact(PREFIX_BYTES, "a frame length"))
        if n > min(limit, MAX_MESSAGE_BYTES):
            raise WireError(f"frame of {n} bytes exceeds the {min(limit, MAX_MESSAGE_BYTES)} allowed here")
        return self._exact(n, "a frame")

    def end(self) -> None:
        if self._read(1):
            raise WireError("frame stream: bytes after the last expected frame")


class Message:
    """Base of the protocol message dataclasses: ``WIRE_NAME`` names the schema entry, fields match it."""

    WIRE_NAME: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, Any]]  # every subclass is a dataclass

    def to_bytes(self) -> bytes:
        return encode(self.WIRE_NAME, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})

    @classmethod
    def from_bytes(cls, data, widths: dict[str, int] | None = None):
        return cls(**decode(data, cls.WIRE_NAME, widths)[1])
