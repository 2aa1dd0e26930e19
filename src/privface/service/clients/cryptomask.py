"""cryptomask over HTTP, verifier side (seed 001 §3.1): ``VerifierClient`` holds sk_v and τ from the key store and
runs Alg. 2's verifier part (query under pk, shares d_1 under sk_v) and its side of Alg. 3 (``reveal_verifier``,
P_1) against a CS served by ``privface serve --protocol cryptomask --role cs``, one HTTP exchange per logical message
(the bindings' docstring): the same number at every gallery size. Every answer is read frame by frame, each frame
bounded by what the verifier expects before it is read, parsed by the wire codec and checked (session, index/round,
lengths, residues below their primes, Alg. 3 parts) before use; the CS's pk is accepted only if the key store
recorded its SHA-256.
"""
from __future__ import annotations

import time

import numpy as np

from ...crypto.exchange import Party, Wire
from ...crypto.otext import SoftSpokenReceiver
from ...errors import CryptoError, ProtocolError
from ...protocols.common import read_message
from ...protocols.cryptomask.he import Distances, from_wire, pack_bytes, packs
from ...protocols.cryptomask.messages import (
    HEAD_LIMIT,
    DistanceChunk,
    GalleryInfo,
    GalleryRequest,
    Query,
    RoundHead,
    Started,
    read_round,
    round_frames,
)
from ...protocols.cryptomask.params import C0_BITS, C1_BITS
from ...protocols.cryptomask.parties import threshold
from ...protocols.cryptomask.reveal import reveal_verifier
from ...protocols.cryptomask.server import PROTOCOL
from ...wire import WireError
from ..client import ServiceClient


class VerifierClient(ServiceClient):
    """``identify(embedding)`` → the 1-bit answer and the run's figures; ``key_store_url`` holds sk_v, pk_v, τ."""

    def __init__(self, url: str, key_store_url: str, *, name: str = "default", timeout: float = 600.0,
                 transport=None, api_key: str | None = None, tls=None) -> None:
        super().__init__(url, PROTOCOL, timeout=timeout, transport=transport, api_key=api_key, tls=tls)
        self.key_store_url, self.name = key_store_url, name
        self.info: GalleryInfo | None = None
        self._verifier = self._tau = None

    def _setup(self) -> None:
        """Fetch pk and the layout once; load the verifier's keys for that pk."""
        from ...protocols.cryptomask import encoding
        from ...scale.cryptomask_gallery import verifier_keys

        info = read_message(GalleryInfo, self.step("gallery", GalleryRequest().to_bytes()))
        verifier, tau = verifier_keys(self.key_store_url, self.name, info.public_context, info.dim,
                                      info.insecure_test_params, n=max(1, info.n))  # a default τ is τ(N)
        if (info.n < 1 or info.ciphertexts != -(-info.n // verifier.delta) or info.chunk < 1
                or info.batch < 64 or info.batch % 64 or info.dim != verifier.dim
                or verifier.delta != encoding.rows_per_poly(verifier.n, info.dim)):
            raise ProtocolError("GalleryInfo: inconsistent gallery layout")
        self.info, self._verifier, self._tau = info, verifier, tau

    def identify(self, embedding) -> dict:
        """One identification: ``rounds`` counts its HTTP request/response pairs (``gallery`` too when this call
        fetched it), ``exchanges`` names them."""
        t0, first = time.perf_counter(), len(self.stats)
        if self.info is None:
            self._setup()
        info, v, wire = self.info, self._verifier, Wire()
        x = np.asarray(embedding, dtype=np.float64).reshape(-1)
        q = v.query(x / np.linalg.norm(x))
        rows = q.to_bytes()
        wire.send("query", len(rows))
        with self.exchange("identify/start", Query(rows).to_bytes()) as answer:
            try:
                started = read_message(Started, answer.frame(HEAD_LIMIT))
            except WireError as e:
                raise ProtocolError(f"Started: {e}") from None
            sid = started.session
            d1, shares_s = self._distances(sid, answer, wire)
        t2 = time.perf_counter()
        R = SoftSpokenReceiver()
        try:
            ot = R.setup_response(started.ot_request)
        except (CryptoError, ValueError) as e:
            raise ProtocolError(f"Started: bad base-OT request ({e})") from None
        wire.send("ot_setup", len(started.ot_request) + len(ot))
        side = reveal_verifier(R, d1, threshold(self._tau), wire, info.batch, count_received=True)
        party = Party(side, "Alg. 3 (CS's message)")
        msg, r = party.start(), 0
        while not party.done:
            length, frames = round_frames(RoundHead(sid, r, ot if r == 0 else b"", [int(p.size) for p in msg]), msg)
            with self.exchange("identify/reveal", frames, length) as answer:
                try:
                    head = read_message(RoundHead, answer.frame(HEAD_LIMIT))
                except WireError as e:
                    raise ProtocolError(f"RoundHead: {e}") from None
                if head.session != sid or head.round != r or head.ot:
                    raise ProtocolError("RoundHead: another session or round")
                parts = read_round(answer, head, [p.nbytes for p in party.expect])
            try:
                msg = party.step(parts)
            except CryptoError as e:
                raise ProtocolError(str(e)) from None
            r += 1
        t3 = time.perf_counter()
        steps = [s.step for s in self.stats[first:]]
        return {"match": bool(party.result), "id": None, "scheme": PROTOCOL, "n": info.n,
                "ciphertexts": info.ciphertexts, "rounds": len(steps), "alg3_rounds": r,
                "exchanges": {k: steps.count(k) for k in dict.fromkeys(steps)},
                "distances_s": round(t2 - t0 - shares_s, 4),
                "shares_s": round(shares_s, 4), "reveal_s": round(t3 - t2, 4),
                "comm_bytes": sum(b for k, b in wire.bytes.items() if k != "ot_setup"),
                "bytes_per_phase": dict(wire.bytes)}

    def _distances(self, sid: bytes, answer, wire: Wire) -> tuple[np.ndarray, float]:
        """Alg. 2 lines 11–12 chunk by chunk from the start's answer: each ``DistanceChunk`` frame (refused before it
        is read if longer than its chunk needs) decrypted to its shares d_1 as it arrives (residues checked in
        ``shares``), so that at most one chunk of ciphertexts is held. → (d_1, seconds of decryption)."""
        info, v = self.info, self._verifier
        n, delta, group = v.n, v.delta, v.group
        total = packs(info.ciphertexts, group)
        d1, spent = [], 0.0
        for i in range(-(-total // info.chunk)):
            lo, hi = i * info.chunk, min(total, (i + 1) * info.chunk)  # packs
            limit = pack_bytes(hi - lo, n) + 64
            try:
                got = read_message(DistanceChunk, answer.frame(limit))
            except WireError as e:
                raise ProtocolError(f"DistanceChunk {i}: {e}") from None
            if (got.session != sid or got.index != i or len(got.c1) != C1_BITS * (hi - lo) * n // 8
                    or len(got.c0) != C0_BITS * (hi - lo) * n // 8):
                raise ProtocolError(f"DistanceChunk {i}: another session, index or size")
            wire.send("distances", len(got.c1) + len(got.c0))
            t = time.perf_counter()
            c1, c0 = from_wire(got.c1, (hi - lo, n), C1_BITS), from_wire(got.c0, (hi - lo, n), C0_BITS)
            del got
            first = lo * group * delta
            d1.append(v.shares(Distances(c1, c0), min(info.n, hi * group * delta) - first))
            spent += time.perf_counter() - t
        return np.concatenate(d1), spent
