"""What the protocols' parties share: subject-id validation, the garbled-circuit evaluator's step, and the
HTTP clients' parsing of answers."""
from __future__ import annotations

from ..crypto.compare import Evaluator, GarblerMessage
from ..errors import CryptoError, ProtocolError
from ..store.base import StoreError, check_key
from ..wire import Message, WireError


def check_subject_id(protocol: str, subject_id: str) -> None:
    """The store's key rules for a subject id, as a ProtocolError (a bad id in a message)."""
    try:
        check_key(protocol, subject_id)
    except StoreError as e:
        raise ProtocolError(str(e)) from None


def evaluate_garbled(evaluator: Evaluator, garbler_message: bytes, sender: str) -> bytes:
    """Evaluate the garbler's circuit; the output labels (undecoded, for the garbler) as bytes. A malformed
    or inconsistent circuit from ``sender`` is a ProtocolError."""
    try:
        return evaluator.evaluate(GarblerMessage.from_bytes(garbler_message)).to_bytes()
    except CryptoError as e:
        raise ProtocolError(f"bad garbled circuit from the {sender}: {e}") from None


def parse_answer(cls: type[Message], body: bytes):
    """A service's answer decoded as ``cls``; a malformed one is a ProtocolError."""
    try:
        return cls.from_bytes(body)
    except WireError as e:
        raise ProtocolError(f"malformed answer from the service: {e}") from None


def read_message(cls: type[Message], blob) -> Message:
    """A received message of type ``cls`` from its frame (or a message object, re-framed); ProtocolError if
    malformed."""
    if isinstance(blob, Message):
        blob = blob.to_bytes()
    try:
        return cls.from_bytes(blob)
    except (WireError, ValueError) as e:
        raise ProtocolError(f"malformed {cls.WIRE_NAME}: {e}") from None


def message_bytes(msg) -> bytes:
    """A message's wire bytes (bytes pass through)."""
    return msg if isinstance(msg, bytes) else msg.to_bytes()
