"""Two-party exchanges as message passing: each party is a generator that yields its next message and waits for
the peer's, so that the same party code runs in one process (``run_pair``) and across HTTP (one request per
message of the party that speaks first, one response per message of the other).

A message is a list of byte *parts*. A party announces, with every message it sends, the parts it expects back
(``Part``: exact length; packed bits with zero padding). ``Party.step`` checks an incoming message against that
before the party sees it, so a malformed message is a ``CryptoError`` and changes no state: the party still
waits for a well-formed one.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..errors import CryptoError


class Wire:
    """Bytes that cross between the two parties, per phase (each party counts what it sends)."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = defaultdict(int)
        self.rounds = 0  # exchanges run by ``run_pair``: a message of the first party and the answer to it

    def send(self, phase: str, nbytes: int) -> None:
        self.bytes[phase] += int(nbytes)


@dataclass(frozen=True)
class Part:
    """One expected part: ``nbytes`` bytes; with ``bits``, ``bits`` packed bits (LSB first), padding bits zero."""

    nbytes: int
    bits: int | None = None


def bits_part(n: int) -> Part:
    return Part((n + 7) // 8, n)


def pack(bits: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(bits, dtype=np.uint8).ravel(), bitorder="little")


def unpack(buf: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(buf, count=n, bitorder="little")


def check(parts, expect, what: str) -> list[np.ndarray]:
    """The parts as uint8 arrays if they are exactly what ``expect`` describes, else CryptoError."""
    if not isinstance(parts, (list, tuple)):
        raise CryptoError(f"{what}: expected a list of parts, got {type(parts).__name__}")
    if len(parts) != len(expect):
        raise CryptoError(f"{what}: expected {len(expect)} parts, got {len(parts)}")
    out = []
    for i, (p, e) in enumerate(zip(parts, expect)):
        if isinstance(p, (bytes, bytearray, memoryview)):
            p = np.frombuffer(bytes(p), dtype=np.uint8)
        elif not isinstance(p, np.ndarray) or p.dtype != np.uint8:
            raise CryptoError(f"{what}: part {i} must be bytes")
        p = p.reshape(-1)
        if p.size != e.nbytes:
            raise CryptoError(f"{what}: part {i} has {p.size} bytes, expected {e.nbytes}")
        if e.bits is not None and e.bits % 8 and int(p[-1]) >> (e.bits % 8):
            raise CryptoError(f"{what}: part {i} sets padding bits beyond its {e.bits} bits")
        out.append(p)
    return out


class Chan:
    """One party's end: ``send`` queues parts (counted per phase in ``wire``); ``recv`` (``yield from``) hands
    the queue over as this party's message and returns the peer's answer, already checked against ``expect``.
    With ``count_received`` the answer's bytes are counted too (a party whose peer is remote, so that its
    ``wire`` holds both directions; in process each side counts what it sends)."""

    def __init__(self, wire: Wire, *, count_received: bool = False) -> None:
        self.out: list = []
        self.wire, self.count_received = wire, count_received

    def send(self, phase: str, *arrays) -> None:
        for a in arrays:
            a = np.ascontiguousarray(a, dtype=np.uint8).reshape(-1)
            self.wire.send(phase, a.size)
            self.out.append(a)

    def recv(self, *expect: Part, phase: str = ""):
        out, self.out = self.out, []
        parts = yield out, tuple(expect)
        if self.count_received:
            self.wire.send(phase, sum(p.size for p in parts))
        return parts

    def close(self):
        """The party's last message (it expects nothing back)."""
        out, self.out = self.out, []
        yield out, None


class Party:
    """Drives one party's generator. ``start()`` → its first message; ``step(parts)`` checks the peer's message
    (CryptoError, nothing changed) and runs the party to its next message ([] once it has finished).
    ``expect`` (None when done), ``done``, ``result`` (the generator's return value)."""

    def __init__(self, gen, what: str) -> None:
        self._gen, self.what = gen, what
        self.expect: tuple[Part, ...] | None = None
        self.done, self.result, self._started = False, None, False

    def start(self) -> list[np.ndarray]:
        if self._started:
            raise CryptoError(f"{self.what}: already started")
        self._started = True
        return self._advance(None)

    def step(self, parts) -> list[np.ndarray]:
        if not self._started or self.expect is None:
            raise CryptoError(f"{self.what}: no message expected now")
        return self._advance(check(parts, self.expect, self.what))

    def expected_bytes(self) -> int:
        return sum(p.nbytes for p in self.expect or ())

    def _advance(self, parts) -> list[np.ndarray]:
        try:
            out, self.expect = self._gen.send(parts)
        except StopIteration as e:
            self.done, self.result, self.expect = True, e.value, None
            return []
        if self.expect is None:
            self.done = True
            self._gen.close()
        return out


def run_pair(first, second, what: str = "exchange", wire: Wire | None = None):
    """Run two party generators against each other in process (``first`` speaks first): their results. With
    ``wire``, ``wire.rounds`` counts the exchanges (over HTTP: one request each)."""
    a, b = Party(first, f"{what} (first party)"), Party(second, f"{what} (second party)")
    msg = a.start()
    b.start()
    while True:
        if wire is not None:
            wire.rounds += 1
        msg = a.step(b.step(msg))
        if a.done:
            if not b.done:
                raise CryptoError(f"{what}: the first party finished while the second still waits")
            return a.result, b.result
