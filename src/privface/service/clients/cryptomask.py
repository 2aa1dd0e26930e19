"""cryptomask over HTTP, verifier side (seed 001 §3.1): ``VerifierClient`` holds sk_v and τ from the key store and
runs Alg. 2's verifier part (query under pk, shares d_1 under sk_v) and its side of Alg. 3 (``reveal_verifier``,
P_1) against a CS served by ``privface serve --protocol cryptomask --role cs``. Every answer is parsed by the wire
codec and checked (session, index/round, lengths, residues below their primes, Alg. 3 parts) before use; the CS's
pk is accepted only if the key store recorded its SHA-256.
"""
from __future__ import annotations

import time

import numpy as np

from ...crypto.exchange import Party, Wire
from ...crypto.otext import IKNPReceiver
from ...errors import CryptoError, ProtocolError
from ...protocols.common import read_message
from ...protocols.cryptomask.he import Distances, from_wire
from ...protocols.cryptomask.messages import (
    DistanceChunk,
    DistanceRequest,
    GalleryInfo,
    GalleryRequest,
    OTReady,
    OTSetup,
    Query,
    RevealRound,
    Started,
)
from ...protocols.cryptomask.params import WIRE_BYTES
from ...protocols.cryptomask.parties import threshold
from ...protocols.cryptomask.reveal import reveal_verifier
from ...protocols.cryptomask.server import PROTOCOL
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
                                      info.insecure_test_params)
        if (info.n < 1 or info.ciphertexts != -(-info.n // verifier.delta) or info.chunk < 1
                or info.batch < 64 or info.batch % 64 or info.dim != verifier.dim
                or verifier.delta != encoding.rows_per_poly(verifier.n, info.dim)):
            raise ProtocolError("GalleryInfo: inconsistent gallery layout")
        self.info, self._verifier, self._tau = info, verifier, tau

    def identify(self, embedding) -> dict:
        t0 = time.perf_counter()
        if self.info is None:
            self._setup()
        info, v, wire = self.info, self._verifier, Wire()
        x = np.asarray(embedding, dtype=np.float64).reshape(-1)
        q = v.query(x / np.linalg.norm(x))
        rows = q.rows.astype("<u4").tobytes()
        wire.send("query", len(rows))
        started = read_message(Started, self.step("identify/start", Query(rows).to_bytes()))
        sid = started.session
        d1, shares_s = self._distances(sid, wire)
        t2 = time.perf_counter()
        R = IKNPReceiver()
        try:
            response = R.setup_response(started.ot_request)
        except (CryptoError, ValueError) as e:
            raise ProtocolError(f"Started: bad base-OT request ({e})") from None
        wire.send("ot_setup", len(started.ot_request) + len(response))
        ready = read_message(OTReady, self.step("identify/ot", OTSetup(sid, response).to_bytes()))
        if ready.session != sid:
            raise ProtocolError("OTReady: another session")
        side = reveal_verifier(R, d1, threshold(self._tau), wire, info.batch, count_received=True)
        party = Party(side, "Alg. 3 (CS's message)")
        msg, r = party.start(), 0
        while not party.done:
            body = RevealRound(sid, r, [p.tobytes() for p in msg]).to_bytes()
            reply = read_message(RevealRound, self.step("identify/reveal", body))
            if reply.session != sid or reply.round != r:
                raise ProtocolError("RevealRound: another session or round")
            try:
                msg = party.step(reply.parts)
            except CryptoError as e:
                raise ProtocolError(str(e)) from None
            r += 1
        t3 = time.perf_counter()
        return {"match": bool(party.result), "id": None, "scheme": PROTOCOL, "n": info.n,
                "ciphertexts": info.ciphertexts, "rounds": r, "distances_s": round(t2 - t0 - shares_s, 4),
                "shares_s": round(shares_s, 4), "reveal_s": round(t3 - t2, 4),
                "comm_bytes": sum(b for k, b in wire.bytes.items() if k != "ot_setup"),
                "bytes_per_phase": dict(wire.bytes)}

    def _distances(self, sid: bytes, wire: Wire) -> tuple[np.ndarray, float]:
        """Alg. 2 lines 11–12 chunk by chunk: each chunk's (c_1, c_0) decrypted to its shares d_1 as it arrives
        (residues checked in ``shares``), so that the CS never waits on the whole gallery's decryption between two
        steps (its sessions expire when idle) and at most one chunk of ciphertexts is held. → (d_1, seconds of
        decryption)."""
        info, v = self.info, self._verifier
        n, delta, s = v.n, v.delta, info.ciphertexts
        d1, spent = [], 0.0
        for i in range(-(-s // info.chunk)):
            lo, hi = i * info.chunk, min(s, (i + 1) * info.chunk)
            got = read_message(DistanceChunk, self.step("identify/distances", DistanceRequest(sid, i).to_bytes()))
            if (got.session != sid or got.index != i or len(got.c1) != WIRE_BYTES * (hi - lo) * n
                    or len(got.c0) != WIRE_BYTES * (hi - lo) * delta):
                raise ProtocolError(f"DistanceChunk {i}: another session, index or size")
            wire.send("distances", len(got.c1) + len(got.c0))
            t = time.perf_counter()
            c1, c0 = from_wire(got.c1, (hi - lo, n)), from_wire(got.c0, (hi - lo, delta))
            d1.append(v.shares(Distances(c1, c0), min(info.n, hi * delta) - lo * delta))
            spent += time.perf_counter() - t
        return np.concatenate(d1), spent
