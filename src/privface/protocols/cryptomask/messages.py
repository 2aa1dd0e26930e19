"""The wire messages of CryptoMask's identification between the verifier and the CS (seed 001 Alg. 2–3).

Verifier → CS, one HTTP step each (``service``), every CS message the answer to one verifier message:
``GalleryRequest`` → ``GalleryInfo`` (pk, which the verifier checks against its key store's digest, and the
layout); ``Query`` (Alg. 2 line 2: the gadget rows under pk) → ``Started`` (the CS's session and its IKNP
base-OT request); ``DistanceRequest`` → ``DistanceChunk`` (Alg. 2 line 11: c_1 and the masked c_0 at the δ
positions of ``chunk`` ciphertexts, so that each frame stays under 3 MiB); ``OTSetup`` → ``OTReady`` (the
base-OT response); then ``RevealRound`` both ways (Alg. 3, ``reveal``: the parts of each party's message).

The CS receives no template and no score: pk ciphertexts, OT messages and random shares only.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...wire import Message


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
    """Verifier → CS (Alg. 2 line 2): the gadget rows (2L, 2, L, N) as little-endian uint32."""

    WIRE_NAME = "cryptomask.Query"
    rows: bytes


@dataclass
class Started(Message):
    """CS → verifier: the identification's session id (16 random bytes) and the IKNP base-OT request."""

    WIRE_NAME = "cryptomask.Started"
    session: bytes
    ot_request: bytes


@dataclass
class DistanceRequest(Message):
    """Verifier → CS: chunk ``index`` of the distances (in order, from 0)."""

    WIRE_NAME = "cryptomask.DistanceRequest"
    session: bytes
    index: int


@dataclass
class DistanceChunk(Message):
    """CS → verifier: ciphertexts [index·chunk, …) of Alg. 2's answer: ``c1`` (k, L, N) and ``c0`` (k, L, δ), both
    little-endian uint32 residues."""

    WIRE_NAME = "cryptomask.DistanceChunk"
    session: bytes
    index: int
    c1: bytes
    c0: bytes


@dataclass
class OTSetup(Message):
    """Verifier → CS: the IKNP base-OT response (the verifier is the base-OT sender)."""

    WIRE_NAME = "cryptomask.OTSetup"
    session: bytes
    response: bytes


@dataclass
class OTReady(Message):
    """CS → verifier: the base OTs are done; Alg. 3 may start."""

    WIRE_NAME = "cryptomask.OTReady"
    session: bytes


@dataclass
class RevealRound(Message):
    """One message of Alg. 3 (``reveal``), either way: round ``round`` (from 0) and the message's parts."""

    WIRE_NAME = "cryptomask.RevealRound"
    session: bytes
    round: int
    parts: list[bytes]


__all__ = ["DistanceChunk", "DistanceRequest", "GalleryInfo", "GalleryRequest", "OTReady", "OTSetup", "Query",
           "RevealRound", "Started"]
