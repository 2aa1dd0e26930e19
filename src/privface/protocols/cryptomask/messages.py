"""The wire messages of CryptoMask's identification between the verifier and the CS (seed 001 Alg. 2–3).

Verifier → CS, one HTTP exchange per logical message whatever the gallery size (``service``); large messages travel
as a frame stream (``wire.framed``: u32 length | frame, each frame under the message maximum), read frame by frame:

* ``GalleryRequest`` → ``GalleryInfo`` (pk, which the verifier checks against its key store's digest, and the
  layout);
* ``Query`` (Alg. 2 line 2, §4.5: the query rows under sk_v) → ``Started`` (the CS's session and its SoftSpokenOT
  base-OT request), then every ``DistanceChunk`` in order in the same response (Alg. 2 line 11: c_1 and the masked
  c_0 of ``chunk`` packs, each frame under 3 MiB), computed as the response is sent;
* Alg. 3's rounds (``reveal``), either way: a ``RoundHead`` (session, round, the sizes of the message's parts; in the
  verifier's round 0 also its base-OT response, so the base OTs ride on the first round) then the parts, each cut
  into ``RoundPiece`` frames of at most ``PIECE_BYTES`` (``round_frames``, ``read_round``).

The CS receives no template and no score: pk ciphertexts, OT messages and random shares only.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ...errors import ProtocolError
from ...wire import FrameReader, Message, WireError, framed, framed_size


@dataclass
class GalleryRequest(Message):
    """Verifier → CS: which gallery the CS serves (no fields)."""

    WIRE_NAME = "cryptomask.GalleryRequest"


@dataclass
class GalleryInfo(Message):
    """CS → verifier: d, the number of templates n and of ciphertexts, ciphertexts per ``DistanceChunk``,
    entries per Alg. 3 batch, whether toy parameters are in use, and the database public context pk."""

    WIRE_NAME = "cryptomask.GalleryInfo"
    dim: int
    n: int
    ciphertexts: int
    chunk: int
    batch: int
    insecure_test_params: bool
    public_context: bytes


@dataclass
class Query(Message):
    """Verifier → CS (Alg. 2 line 2, §4.5): ``he.Query.to_bytes``, the 32-byte seed of the rows' uniform halves, then
    their b-halves (3, 4, N) in NTT form as little-endian uint32."""

    WIRE_NAME = "cryptomask.Query"
    rows: bytes


@dataclass
class Started(Message):
    """CS → verifier: the identification's session id (16 random bytes) and the SoftSpokenOT base-OT request: it
    begins with ``otext.SOFTSPOKEN_TAG``, the version and k, so a verifier on another OT extension or version refuses
    it at setup (privface before SoftSpokenOT sent a bare IKNP request, which this verifier refuses); ``n`` and
    ``batch``: the gallery size and Alg. 3 batch this identification runs on (issue 37: a verifier whose layout names
    another — the gallery grew since its ``gallery`` step — takes the new layout, which these two determine, before
    it reads the distances)."""

    WIRE_NAME = "cryptomask.Started"
    session: bytes
    ot_request: bytes
    n: int
    batch: int


@dataclass
class DistanceChunk(Message):
    """CS → verifier: packs [index·chunk, …) of Alg. 2's answer (``he.Distances``): ``c1`` (k, N) and ``c0`` (k, N),
    compressed (§4.5): C1_BITS and C0_BITS bits per value, bit-packed little-endian (``he.to_wire``)."""

    WIRE_NAME = "cryptomask.DistanceChunk"
    session: bytes
    index: int
    c1: bytes
    c0: bytes


@dataclass
class RoundHead(Message):
    """The head of one Alg. 3 message (``reveal``), either way: round ``round`` (from 0), the byte sizes of its parts
    (their data follows in ``RoundPiece`` frames), and ``ot``: in the verifier's round 0 its SoftSpokenOT base-OT
    response (the verifier is the base-OT sender), else empty."""

    WIRE_NAME = "cryptomask.RoundHead"
    session: bytes
    round: int
    ot: bytes
    sizes: list[int]


@dataclass
class RoundPiece(Message):
    """Up to ``PIECE_BYTES`` of one part of an Alg. 3 message; a part of k bytes comes as ⌈k / PIECE_BYTES⌉ pieces,
    all full but the last, parts in order (an empty part has none)."""

    WIRE_NAME = "cryptomask.RoundPiece"
    data: bytes


@dataclass
class FerretSetupRequest(Message):
    """Verifier → CS (step ``ot/setup``): a new Ferret pool for this caller (no fields; ``pools``)."""

    WIRE_NAME = "cryptomask.FerretSetupRequest"


@dataclass
class FerretSetup(Message):
    """CS → verifier: the new pool's id (16 random bytes) and Ferret's setup request (``crypto.ferret``)."""

    WIRE_NAME = "cryptomask.FerretSetup"
    pool: bytes
    request: bytes


@dataclass
class FerretFinish(Message):
    """Verifier → CS (step ``ot/finish``): the pool and the verifier's setup response (its base OTs and the reserve's
    u: ≈ 2.4 MB at the regular set)."""

    WIRE_NAME = "cryptomask.FerretFinish"
    pool: bytes
    response: bytes


@dataclass
class FerretRefillRequest(Message):
    """Verifier → CS (step ``ot/refill``): the pool and its state as the verifier holds it (the tweak of its next COT
    and the COTs it holds), which the CS's must equal."""

    WIRE_NAME = "cryptomask.FerretRefillRequest"
    pool: bytes
    counter: int
    available: int


@dataclass
class FerretPool(Message):
    """CS → verifier (``ot/finish``, ``ot/refill``): the pool's state after the step and the Ferret iterations' refill
    messages (each ``msg_bytes``; none after a setup or when the pool holds an identification's COTs)."""

    WIRE_NAME = "cryptomask.FerretPool"
    pool: bytes
    counter: int
    available: int
    refills: bytes


@dataclass
class FerretQuery(Message):
    """Verifier → CS (step ``identify/start``): ``Query``'s rows, and the pool (with its state) whose COTs this
    identification's Alg. 3 takes; answered as ``Query`` is, ``Started`` then carrying no base-OT request."""

    WIRE_NAME = "cryptomask.FerretQuery"
    rows: bytes
    pool: bytes
    counter: int
    available: int


PIECE_BYTES = 3 << 20
HEAD_LIMIT = 1 << 19
"""A ``RoundHead`` frame's bytes at most (the base-OT response: 128 · 2 points and seeds, ≈ 16 kB)."""
_PIECE_OVERHEAD = framed_size(len(RoundPiece(b"").to_bytes()))


def _pieces(size: int) -> list[int]:
    return [min(PIECE_BYTES, size - lo) for lo in range(0, size, PIECE_BYTES)]


def round_bytes(head_bytes: int, sizes) -> int:
    """The exact body of a round whose head frame has ``head_bytes`` and whose parts have ``sizes`` bytes."""
    return framed_size(head_bytes) + sum(_PIECE_OVERHEAD + n for s in sizes for n in _pieces(int(s)))


def round_frames(head: RoundHead, parts) -> tuple[int, Iterator[bytes]]:
    """(body bytes, the frames of the body: the head, then each part in pieces), encoded as they are sent."""
    if head.sizes != [len(memoryview(p).cast("B")) for p in parts]:
        raise ValueError("RoundHead sizes differ from the parts")
    first = head.to_bytes()

    def frames() -> Iterator[bytes]:
        yield framed(first)
        for p in parts:
            view = memoryview(p).cast("B")
            for lo in range(0, len(view), PIECE_BYTES):
                yield framed(RoundPiece(bytes(view[lo:lo + PIECE_BYTES])).to_bytes())

    return round_bytes(len(first), head.sizes), frames()


def read_round(reader: FrameReader, head: RoundHead, sizes) -> list[bytes]:
    """The parts after ``head`` (already read and checked) from ``reader``: exactly ``sizes`` (what the reader's party
    expects, which ``head.sizes`` must equal), each piece exactly as ``round_frames`` cuts it; ProtocolError else."""
    from ..common import read_message

    if list(head.sizes) != [int(s) for s in sizes]:
        raise ProtocolError(f"RoundHead: part sizes {list(head.sizes)[:8]} differ from the expected {list(sizes)[:8]}")
    parts = []
    for size in sizes:
        out = bytearray()
        for n in _pieces(int(size)):
            try:
                data = read_message(RoundPiece, reader.frame(_PIECE_OVERHEAD + n)).data
            except WireError as e:
                raise ProtocolError(f"RoundPiece: {e}") from None
            if len(data) != n:
                raise ProtocolError(f"RoundPiece: {len(data)} bytes, expected {n}")
            out += data
        parts.append(bytes(out))
    return parts


__all__ = ["DistanceChunk", "FerretFinish", "FerretPool", "FerretQuery", "FerretRefillRequest", "FerretSetup",
           "FerretSetupRequest", "GalleryInfo", "GalleryRequest", "PIECE_BYTES", "Query", "RoundHead", "RoundPiece",
           "Started", "read_round", "round_bytes", "round_frames"]
