"""One versioned binary codec for every protocol message (docs/architecture.md, "The wire format").

The format is defined by the language-neutral ``schema.json`` next to this file; ``codec`` encodes and
decodes by reading it. Protocol messages are dataclasses deriving from ``Message``.
"""
from .codec import (
    MAX_MESSAGE_BYTES,
    VERSION,
    FrameReader,
    Message,
    WireError,
    decode,
    encode,
    framed,
    framed_size,
    message_type,
)

__all__ = ["MAX_MESSAGE_BYTES", "VERSION", "FrameReader", "Message", "WireError", "decode", "encode", "framed",
           "framed_size", "message_type"]
