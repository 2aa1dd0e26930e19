"""cryptomask over HTTP, verifier side (seed 001 §3.1): ``VerifierClient`` holds sk_v and τ from the key store and
runs Alg. 2's verifier part (query under pk, shares d_1 under sk_v) and its side of Alg. 3 (``reveal_verifier``,
P_1) against a CS served by ``privface serve --protocol cryptomask --role cs``, one HTTP exchange per logical message
(the bindings' docstring): the same number at every gallery size. Every answer is read frame by frame, each frame
bounded by what the verifier expects before it is read, parsed by the wire codec and checked (session, index/round,
lengths, residues below their primes, Alg. 3 parts) before use; the CS's pk is accepted only if the key store
recorded its SHA-256.

Alg. 3 runs on Ferret's silent OT by default (``ot="ferret"``): the client keeps its side of one pool set up with the
CS (``ot/setup``, ``ot/finish``: once per client, 2.4 MB), in memory only, refilled between identifications
(``prepare``; ``identify`` refills first when the pool is short of one identification's COTs, outside its timed
phases and its exchanges). Each identification names the pool and its state (``FerretQuery``); an identification
that fails after it was sent drops the pool (the CS may have taken COTs this side has not), and a pool the CS no longer
knows (restart, eviction, expiry, desynchronised) is replaced by a new setup once. ``ot="softspoken"``: the base OTs
per identification, as before.
"""
from __future__ import annotations

import time

import numpy as np

from ...crypto.exchange import Party, Wire
from ...crypto.ferret import FerretReceiver
from ...crypto.otext import SoftSpokenReceiver
from ...errors import CryptoError, ProtocolError
from ...protocols.common import read_message
from ...protocols.cryptomask.he import Distances, from_wire, pack_bytes, packs
from ...protocols.cryptomask.messages import (
    HEAD_LIMIT,
    DistanceChunk,
    FerretFinish,
    FerretPool,
    FerretQuery,
    FerretRefillRequest,
    FerretSetup,
    FerretSetupRequest,
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
from ...protocols.cryptomask.reveal import ots_needed, reveal_verifier
from ...protocols.cryptomask.server import PROTOCOL
from ...wire import WireError
from ..client import RemoteSessionError, ServiceClient


class VerifierClient(ServiceClient):
    """``identify(embedding)`` → the 1-bit answer and the run's figures; ``key_store_url`` holds sk_v, pk_v, τ."""

    def __init__(self, url: str, key_store_url: str, *, name: str = "default", timeout: float = 600.0,
                 transport=None, api_key: str | None = None, tls=None, ot: str = "ferret") -> None:
        super().__init__(url, PROTOCOL, timeout=timeout, transport=transport, api_key=api_key, tls=tls)
        if ot not in ("ferret", "softspoken"):
            raise ValueError("ot must be ferret or softspoken over HTTP")
        self.key_store_url, self.name, self.ot = key_store_url, name, ot
        self.info: GalleryInfo | None = None
        self._verifier = self._tau = None
        self._pool: tuple[bytes, FerretReceiver] | None = None
        self.refilled = {"bytes": 0, "seconds": 0.0, "ots": 0, "setup_bytes": 0}
        """Ferret's setups and refills so far (as ``CryptoMask.refilled``): each identification counts its share."""
        self.layouts = 0
        """How often an identification found the gallery resized since the layout in hand (``_changed``)."""

    def _setup(self) -> None:
        """Fetch pk and the layout once; load the verifier's keys for that pk."""
        self._take(read_message(GalleryInfo, self.step("gallery", GalleryRequest().to_bytes())))

    def _take(self, info: GalleryInfo) -> None:
        """Check the layout ``info`` against the verifier's keys and use it (τ: τ(N) of its size, if default)."""
        from ...protocols.cryptomask import encoding
        from ...scale.cryptomask_gallery import verifier_keys

        verifier, tau = verifier_keys(self.key_store_url, self.name, info.public_context, info.dim,
                                      info.insecure_test_params, n=max(1, info.n))  # a default τ is τ(N)
        if (info.n < 1 or info.ciphertexts != -(-info.n // verifier.delta) or info.chunk < 1
                or info.batch < 64 or info.batch % 64 or info.dim != verifier.dim
                or verifier.delta != encoding.rows_per_poly(verifier.n, info.dim)):
            raise ProtocolError("GalleryInfo: inconsistent gallery layout")
        self.info, self._verifier, self._tau = info, verifier, tau

    def _changed(self, started: Started) -> None:
        """The CS's gallery changed size since this client's layout (issue 37: an add): take the layout the
        identification runs on, which ``Started``'s size and batch determine (the chunking and keys stay)."""
        old = self.info
        self.layouts += 1
        self._take(GalleryInfo(old.dim, started.n, -(-started.n // self._verifier.delta), old.chunk, started.batch,
                               old.insecure_test_params, old.public_context))

    @property
    def need(self) -> int:
        """The COTs one identification takes from the pool (``reveal.ots_needed``)."""
        return ots_needed(self.info.n, self.info.batch)

    def _ferret_setup(self) -> None:
        """A new pool with the CS (``ot/setup``, ``ot/finish``); the old one, if any, forgotten."""
        self._pool = None
        got = read_message(FerretSetup, self.step("ot/setup", FerretSetupRequest().to_bytes()))
        R = FerretReceiver()
        try:
            response = R.setup_response(got.request)
        except (CryptoError, ValueError) as e:
            raise ProtocolError(f"FerretSetup: {e}") from None
        state = read_message(FerretPool, self.step("ot/finish", FerretFinish(got.pool, response).to_bytes()))
        if (state.pool != got.pool or state.refills or (state.counter, state.available) != (R.counter, R.available)):
            raise ProtocolError("FerretPool: another pool or state after the setup")
        self.refilled["setup_bytes"] += len(got.request) + len(response)
        self._pool = (got.pool, R)

    def prepare(self) -> None:
        """Between identifications: set up a pool if there is none, refill it to one identification's COTs (each
        ``ot/refill`` answer checked: this pool, the state the refill messages give). A pool the CS refuses
        (unknown, evicted, desynchronised) is replaced by a new setup, once."""
        if self.info is None:
            self._setup()
        if self.ot != "ferret":
            return
        for attempt in (0, 1):
            if self._pool is None:
                self._ferret_setup()
            try:
                self._refill()
                return
            except RemoteSessionError:
                self._pool = None
                if attempt:
                    raise

    def _refill(self) -> None:
        pid, R = self._pool
        t = time.perf_counter()
        while R.available < self.need:
            before = R.available
            got = read_message(FerretPool, self.step("ot/refill", FerretRefillRequest(pid, R.counter,
                                                                                      R.available).to_bytes()))
            size = R.msg_bytes
            if got.pool != pid or not got.refills or len(got.refills) % size:
                self._pool = None
                raise ProtocolError("FerretPool: another pool, or no whole refill message")
            try:
                R.room(len(got.refills) // size)
                for lo in range(0, len(got.refills), size):
                    R.absorb(got.refills[lo:lo + size])
            except CryptoError as e:
                self._pool = None
                raise ProtocolError(str(e)) from None
            if (got.counter, got.available) != (R.counter, R.available):
                self._pool = None
                raise ProtocolError("FerretPool: the CS's state differs from this side's after the refill")
            self.refilled["bytes"] += len(got.refills)
            self.refilled["ots"] += R.available - before
        self.refilled["seconds"] += time.perf_counter() - t

    def identify(self, embedding, _again: bool = False) -> dict:
        """One identification: ``rounds`` counts its HTTP request/response pairs (``gallery`` too when this call
        fetched it; not the pool's setup and refills, which ``prepare`` runs first when needed), ``exchanges`` names
        them. On Ferret, ``bytes_per_phase`` has ``ot_refill`` (this run's share of the refills, per COT taken, in
        ``comm_bytes`` as in process) and ``ot_refill_s`` its share of their time (not in the phases' times)."""
        first = len(self.stats)
        if self.info is None:
            self._setup()
        ferret_ot = self.ot == "ferret"
        if ferret_ot and (self._pool is None or self._pool[1].available < self.need):
            self.prepare()
        t0, setup_steps = time.perf_counter(), len(self.stats)
        info, v, wire = self.info, self._verifier, Wire()
        x = np.asarray(embedding, dtype=np.float64).reshape(-1)
        q = v.query(x / np.linalg.norm(x))
        rows = q.to_bytes()
        wire.send("query", len(rows))
        if ferret_ot:
            pid, R = self._pool
            self._pool, pool_before = None, R.available  # given back only if the identification completes
            body = FerretQuery(rows, pid, R.counter, R.available).to_bytes()
        else:
            body = Query(rows).to_bytes()
        try:
            with self.exchange("identify/start", body) as answer:
                try:
                    started = read_message(Started, answer.frame(HEAD_LIMIT))
                except WireError as e:
                    raise ProtocolError(f"Started: {e}") from None
                sid = started.session
                if (started.n, started.batch) != (info.n, info.batch):
                    self._changed(started)
                    info, v = self.info, self._verifier
                d1, shares_s = self._distances(sid, answer, wire)
        except RemoteSessionError as e:
            # the gallery grew since the layout in hand: the pool holds fewer COTs than an identification now takes
            # (the CS took none of them); fetch the layout, refill, start again — once
            if not ferret_ot or _again or "refill first" not in str(e):
                raise
            self._pool, self.info = (pid, R), None
            self.prepare()
            return self.identify(embedding, True)
        t2 = time.perf_counter()
        if ferret_ot:
            if started.ot_request:
                raise ProtocolError("Started: a base-OT request for a Ferret identification")
            ot = b""
        else:
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
        extra = {}
        if ferret_ot:
            self._pool = (pid, R)
            used, made = pool_before - R.available, max(self.refilled["ots"], 1)
            wire.send("ot_refill", round(used * self.refilled["bytes"] / made))
            extra["ot_refill_s"] = round(used * self.refilled["seconds"] / made, 4)
        pool = [s for s in self.stats[first:setup_steps] if s.step.startswith("ot/")]
        if pool:  # the pool's setup and refills ran before this identification: not among its exchanges
            extra["ot_exchanges"] = {k: [s.step for s in pool].count(k) for k in dict.fromkeys(s.step for s in pool)}
            extra["ot_http_bytes"] = sum(s.request_bytes + s.response_bytes for s in pool)
        steps = [s.step for s in self.stats[first:setup_steps] if not s.step.startswith("ot/")]
        steps += [s.step for s in self.stats[setup_steps:]]
        return {"match": bool(party.result), "id": None, "scheme": PROTOCOL, "n": info.n,
                "ciphertexts": info.ciphertexts, "rounds": len(steps), "alg3_rounds": r,
                "exchanges": {k: steps.count(k) for k in dict.fromkeys(steps)},
                "distances_s": round(t2 - t0 - shares_s, 4),
                "shares_s": round(shares_s, 4), "reveal_s": round(t3 - t2, 4),
                "comm_bytes": sum(b for k, b in wire.bytes.items() if k != "ot_setup"),
                "bytes_per_phase": dict(wire.bytes), "ot": self.ot, **extra}

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
