"""The Cloud Server of seed 001 (§3.1) as a long-lived role over a persisted gallery: Alg. 2's CS part and the
CS's side of Alg. 3 (P_0, IKNP sender), one session per identification.

The gallery (``scale.cryptomask_gallery``: pk, k_sw, the blocks) is loaded once, with its NTT digits, when the
role starts. A session is created by a ``Query`` (its rows switched to sk_v, Alg. 2 line 4) and then goes through
its steps in order: the distance chunks (0, 1, …; each computed when asked for, Alg. 2 lines 5–11, so a session
holds the 1.2 MB of switched rows and the CS's shares d_0, not the distances), the base-OT response, the Alg. 3
rounds (0, 1, …). Every message is decoded and checked (session,
index or round, lengths, residues below their primes, the Alg. 3 parts against what ``reveal_cs`` waits for)
before anything changes: a bad one is a ProtocolError and leaves the session as it was, so the verifier may
send the right one. A session ends ``IDLE_TTL`` seconds after its last successful step, ``MAX_AGE`` seconds after it
started at the latest, or with its last Alg. 3 round; its rows, d_0 and Alg. 3 state are then dropped (at the next
request). At most ``MAX_SESSIONS`` are open, at most ``MAX_PER_CALLER`` per caller. Nothing of a session is logged.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ...crypto.exchange import Party, Wire
from ...crypto.ot import OTResponse
from ...crypto.otext import IKNPSender
from ...errors import CryptoError, ProtocolError
from ..common import read_message
from . import he
from .messages import (
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
from .params import WIRE_BYTES
from .reveal import reveal_cs

PROTOCOL = "cryptomask"
CHUNK_BYTES = 3 << 20
"""Residue bytes per ``DistanceChunk`` at most (modulus-switched: WIRE_BYTES per coefficient, N + δ per ciphertext)."""
REVEAL_BATCH = 1 << 12
"""Alg. 3 entries per batch over HTTP: the verifier's largest message (its ROTs) is 528 B per entry, 2.1 MiB."""
MAX_SESSIONS, MAX_PER_CALLER = 8, 2
"""Identifications open at the CS at once (a session holds 1.2 MB of rows, then d_0: 8 B per template, 8 MB at
2^20), and per caller (the service's client identity: API key id, else client address), so that one caller
cannot hold every slot."""
IDLE_TTL, MAX_AGE = 120.0, 3600.0
"""A session ends ``IDLE_TTL`` s after its last successful step (a silent verifier frees its slot within two
minutes; an honest one waits for one answer and one chunk's worth of its own work between steps) and ``MAX_AGE``
s after it started whatever it does (2^20 over HTTP: 537 distance chunks and 1 285 reveal rounds, ≈ 90 s of
compute in process, so an hour covers a heavily loaded machine). A step being computed never expires."""
_ENDED = 64
"""Expired session ids remembered, so that their next step hears "expired" rather than "unknown"."""


class TooManySessions(ProtocolError):
    """No room for a new identification: ``MAX_SESSIONS`` open, or (``per_caller``) ``MAX_PER_CALLER`` of this
    caller's; ``retry_after``: seconds until the earliest of those would expire if left idle."""

    def __init__(self, message: str, *, per_caller: bool, retry_after: float) -> None:
        super().__init__(message)
        self.per_caller, self.retry_after = per_caller, retry_after


def chunk_ciphertexts(basis, delta: int) -> int:
    """Ciphertexts per ``DistanceChunk`` so that c_1 and c_0 stay under ``CHUNK_BYTES``."""
    return max(1, CHUNK_BYTES // (WIRE_BYTES * (basis.n + delta)))


@dataclass
class CSSession:
    """One identification at the CS: the switched query rows until every chunk is sent, the CS's shares d_0
    (one array per chunk, then inside Alg. 3's CS side)."""

    rows: np.ndarray | None
    ot: IKNPSender
    expires: float  # IDLE_TTL after the last successful step, at most ``deadline``
    deadline: float  # MAX_AGE after the start
    caller: str | None = None
    d0: list = field(default_factory=list)
    next_chunk: int = 0
    party: Party | None = None
    round: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    busy: int = 0  # steps holding or waiting for ``lock`` (guarded by the role's lock); a busy session never expires


class CloudServerRole:
    """The CS's steps, each bytes → message: ``gallery``, ``start`` (Query → Started), ``distances``, ``ot``,
    ``reveal``. ``cs`` is a loaded ``he.CloudServer`` with k_sw; ``info`` what ``gallery`` answers."""

    def __init__(self, cs: he.CloudServer, pk_bytes: bytes, *, insecure_test_params: bool, clock=time.monotonic,
                 chunk: int | None = None, batch: int = REVEAL_BATCH) -> None:
        self.cs, self.clock, self.batch = cs, clock, batch
        self.chunk = chunk or chunk_ciphertexts(cs.basis, cs.delta)
        self.info = GalleryInfo(cs.dim, cs.count, cs.ciphertexts, self.chunk, batch, insecure_test_params, pk_bytes)
        self.query_bytes = 4 * 2 * cs.basis.L * 2 * cs.basis.L * cs.n
        self._sessions: dict[bytes, CSSession] = {}
        self._ended: OrderedDict[bytes, str] = OrderedDict()  # expired id → why, the last _ENDED
        self._lock = threading.Lock()

    @property
    def chunks(self) -> int:
        return -(-self.cs.ciphertexts // self.chunk)

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._sessions)

    def _expire(self) -> None:
        """Drop the sessions past their expiry that no step is using (with the role's lock held)."""
        now = self.clock()
        for sid in [k for k, s in self._sessions.items() if s.expires <= now and not s.busy]:
            s = self._sessions.pop(sid)
            self._ended[sid] = (f"older than {MAX_AGE:.0f} s" if s.expires >= s.deadline
                                else f"no step for {IDLE_TTL:.0f} s")
            while len(self._ended) > _ENDED:
                self._ended.popitem(last=False)

    @contextmanager
    def _step(self, sid: bytes, caller: str | None) -> Iterator[CSSession]:
        """The live session ``sid`` of ``caller``, locked for one step; a step that returns pushes its expiry to
        ``IDLE_TTL`` from now (at most its ``deadline``), one that raises leaves it as it was. Another caller's
        session is "unknown", as a made-up id is."""
        with self._lock:
            self._expire()
            s = self._sessions.get(sid)
            if s is not None and s.caller != caller:
                raise ProtocolError("unknown cryptomask session: start the identification again")
            if s is None:
                why = self._ended.get(sid)
                raise ProtocolError(f"cryptomask session expired ({why}): start the identification again" if why
                                    else "unknown cryptomask session: start the identification again")
            s.busy += 1
        try:
            with s.lock:
                yield s
                s.expires = min(self.clock() + IDLE_TTL, s.deadline)
        finally:
            with self._lock:
                s.busy -= 1

    def _check_room(self, caller: str | None) -> None:
        """TooManySessions unless a new session fits (with the role's lock held, expired ones dropped)."""
        self._expire()
        now = self.clock()
        mine = [] if caller is None else [s for s in self._sessions.values() if s.caller == caller]
        if len(mine) >= MAX_PER_CALLER:
            raise TooManySessions(f"this client already has {len(mine)} cryptomask identifications open; finish "
                                  "one or retry later", per_caller=True,
                                  retry_after=min(s.expires for s in mine) - now)
        if len(self._sessions) >= MAX_SESSIONS:
            raise TooManySessions("the CS has too many identifications open; try again later", per_caller=False,
                                  retry_after=min(s.expires for s in self._sessions.values()) - now)

    def gallery(self, body) -> GalleryInfo:
        read_message(GalleryRequest, body)
        return self.info

    def start(self, body, caller: str | None = None) -> Started:
        """Alg. 2 line 4: the query rows, checked and switched to sk_v, are kept in a new session of ``caller``
        (who asks, as the service knows it; None: counted only against ``MAX_SESSIONS``)."""
        raw = read_message(Query, body).rows
        if len(raw) != self.query_bytes:
            raise ProtocolError(f"Query: {len(raw)} bytes of gadget rows, expected {self.query_bytes}")
        b = self.cs.basis
        rows = np.frombuffer(raw, dtype="<u4").reshape(2 * b.L, 2, b.L, self.cs.n)
        with self._lock:
            self._check_room(caller)  # before the costly key switch
        switched = self.cs.switch_query(he.Query(rows.astype(np.uint32)))  # checks residues < primes
        ot = IKNPSender()
        sid = secrets.token_bytes(16)
        with self._lock:
            self._check_room(caller)  # again: others may have started meanwhile
            now = self.clock()
            self._sessions[sid] = CSSession(switched, ot, now + IDLE_TTL, now + MAX_AGE, caller)
        return Started(sid, ot.setup_request())

    def distances(self, body, caller: str | None = None) -> DistanceChunk:
        """Alg. 2 lines 5–11 for the chunk's ciphertexts: (c_1, masked c_0) out, their d_0 kept."""
        req = read_message(DistanceRequest, body)
        with self._step(req.session, caller) as s:
            if s.rows is None or req.index != s.next_chunk:
                raise ProtocolError(f"DistanceRequest: chunk {req.index} out of order "
                                    f"(next: {'none, all fetched' if s.rows is None else s.next_chunk})")
            lo, hi = req.index * self.chunk, min(self.cs.ciphertexts, (req.index + 1) * self.chunk)
            msg, d0 = self.cs.distances_of(s.rows, lo, hi)
            s.d0.append(d0)
            s.next_chunk += 1
            if hi == self.cs.ciphertexts:
                s.rows, s.d0 = None, [np.concatenate(s.d0)]  # all sent: only d_0 stays
        return DistanceChunk(req.session, req.index, he.to_wire(msg.c1), he.to_wire(msg.c0))

    def ot(self, body, caller: str | None = None) -> OTReady:
        msg = read_message(OTSetup, body)
        with self._step(msg.session, caller) as s:
            if s.rows is not None or s.party is not None:
                raise ProtocolError("OTSetup out of order: fetch every distance chunk first, once")
            try:
                if OTResponse.from_bytes(msg.response).message_bytes != 16:  # before the base OTs are used up
                    raise ProtocolError("OTSetup: the base-OT seeds must be 16 bytes")
                s.ot.setup_finish(msg.response)
            except (CryptoError, ValueError) as e:
                raise ProtocolError(f"OTSetup: {e}") from None
            s.party = Party(reveal_cs(s.ot, s.d0[0], Wire(), self.batch), "Alg. 3 (verifier's message)")
            s.party.start()
        return OTReady(msg.session)

    def reveal(self, body, caller: str | None = None) -> RevealRound:
        """One Alg. 3 round: the verifier's parts in, the CS's parts out; the session ends with μ_0."""
        msg = read_message(RevealRound, body)
        with self._step(msg.session, caller) as s:
            if s.party is None or s.party.done:
                raise ProtocolError("RevealRound out of order: the base OTs first")
            if msg.round != s.round:
                raise ProtocolError(f"RevealRound {msg.round} out of order (expected {s.round})")
            try:
                out = s.party.step(msg.parts)  # parts checked before the CS side sees them
            except CryptoError as e:
                raise ProtocolError(str(e)) from None
            s.round += 1
            done = s.party.done
        if done:
            with self._lock:
                self._sessions.pop(msg.session, None)
        return RevealRound(msg.session, msg.round, [p.tobytes() for p in out])
