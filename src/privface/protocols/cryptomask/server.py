"""The Cloud Server of seed 001 (§3.1) as a long-lived role over a persisted gallery: Alg. 2's CS part and the
CS's side of Alg. 3 (P_0, the OT sender: Ferret's COTs from the caller's pool, ``pools``, for a ``FerretQuery``;
SoftSpokenOT set up per identification for a ``Query``), one session per identification.

The gallery (``scale.cryptomask_gallery``: pk, k_sw, the blocks) is loaded once, switched to sk_v (§4.5), when the
role starts. A session is created by a ``Query`` (§4.5's three rows under sk_v, Alg. 2 line 2), whose answer is a
frame stream: ``Started``, then every ``DistanceChunk`` computed as it is sent (Alg. 2 lines 5–11, so a session holds
the 0.4 MB of query rows and the CS's shares d_0, not the distances). Then Alg. 3 in one batch over every entry, one
exchange per round (``reveal``; round 0 also carries the base-OT response), so the exchanges of an identification
do not depend on the gallery size. Every message is decoded and checked (session, round, part sizes against what
``reveal_cs`` waits for, residues below their primes) before anything changes: a bad one is a ProtocolError and
leaves the session as it was, so the verifier may send the right one; ``admit_round`` checks a round's head before
its body is read, and gives the exact size the body must have; it also reserves the round's exchange: one round of an
identification at a time (a second upload is refused before its body is read), its body and answer counted against
the memory budget (``memory``, default ``SESSION_MEMORY``) until the exchange's ``release``. A distances stream that is
not read to its end ends its session. A session ends ``FIRST_ROUND_TTL`` seconds after its distances were sent if no
round 0 comes, ``IDLE_TTL`` seconds after its last successful step, ``MAX_AGE`` seconds after it started at the
latest, or with its last Alg. 3 round; its rows, d_0 and Alg. 3 state are then dropped (at the next request). At most
``MAX_SESSIONS`` are open (fewer for a large gallery: the budget), at most ``MAX_PER_CALLER`` per caller, and an
identification its caller abandoned (ended otherwise than by its last round) still counts against that caller's
share for ``ABANDONED_HOLD`` seconds. Nothing of a session is logged.
"""
from __future__ import annotations

import io
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ...crypto.exchange import Party, Wire, check
from ...crypto.ferret import FerretSender
from ...crypto.otext import SoftSpokenSender
from ...errors import CryptoError, ProtocolError
from ...wire import FrameReader, WireError, framed, message_type
from ..common import read_message
from . import he
from .messages import (
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
    round_bytes,
    round_frames,
)
from .params import C0_BITS, C1_BITS
from .pools import Pools
from .reveal import ots_needed, reveal_cs

PROTOCOL = "cryptomask"
CHUNK_BYTES = 3 << 20
"""Residue bytes per ``DistanceChunk`` at most (compressed: ``he.pack_bytes`` per pack)."""
ROUND_BYTES_PER_ENTRY, ROUND_BYTES_FIXED = 480, 1 << 20
"""A bound on any Alg. 3 message for a batch of m entries: ``ROUND_BYTES_PER_ENTRY``·m + ``ROUND_BYTES_FIXED`` (the
verifier's largest, its ROTs, is 448 B per entry; ``max_round_bytes``)."""
MAX_SESSIONS, MAX_PER_CALLER = 8, 2
"""Identifications open at the CS at once (a session holds 4.3 MB of rows at d = 128, then d_0: 8 B per template,
8 MB at 2^20, and Alg. 3's state between rounds: a few bytes per template; a round being computed holds its messages,
≈ 0.5 kB per template at its peak, as in process: the leaves' OT keys are used as they are extended), and per caller
(the service's client identity: API key id, else client address), so that one caller cannot hold every slot."""
SESSION_MEMORY = 4 << 30
"""The default memory budget: bytes the open identifications' Alg. 3 exchanges may hold together. An exchange holds its
body (counted from the moment its head is admitted, while it is being received) and its answer until that is sent,
≤ 2·``max_round_bytes`` (≈ 1.0 GB at 2^20 in one batch), one exchange per identification at a time, so a large
gallery admits fewer than ``MAX_SESSIONS`` at once (4 at 2^20) and a key holder cannot make the CS buffer more than
the budget, however many uploads it opens."""
FIRST_ROUND_TTL = 30.0
"""Seconds between the last distance chunk sent and round 0's head: a verifier that leaves after the distances frees
its slot within this (an honest one only sets up its base OTs and Alg. 3's first message: a few seconds at 2^20)."""
ABANDONED_HOLD = 300.0
"""Seconds an identification that ended without its last round (expired, or its distances not read) still counts
against its caller's share (``MAX_PER_CALLER``; not against ``MAX_SESSIONS``): a caller that keeps abandoning starts
holds its own share, not everyone's slots."""
IDLE_TTL, MAX_AGE = 120.0, 3600.0
"""A session ends ``IDLE_TTL`` s after its last successful step (a silent verifier frees its slot within two
minutes; an honest one waits for one answer and its own work on it between steps; every distance chunk sent counts
as a step) and ``MAX_AGE`` s after it started whatever it does (2^20: ≈ 90 s of compute in process, so an hour
covers a heavily loaded machine). A step being computed never expires."""
_ENDED = 64
"""Expired session ids remembered, so that their next step hears "expired" rather than "unknown"."""


class RoundBusy(ProtocolError):
    """A round of this identification is already being received or answered (one exchange at a time)."""


class TooManySessions(ProtocolError):
    """No room for a new identification: ``MAX_SESSIONS`` open, or (``per_caller``) ``MAX_PER_CALLER`` of this
    caller's; ``retry_after``: seconds until the earliest of those would expire if left idle."""

    def __init__(self, message: str, *, per_caller: bool, retry_after: float) -> None:
        super().__init__(message)
        self.per_caller, self.retry_after = per_caller, retry_after


def max_round_bytes(entries: int) -> int:
    """A bound on the body of any Alg. 3 round (either way) for one batch of ``entries`` (``ROUND_BYTES_…``)."""
    return ROUND_BYTES_PER_ENTRY * (-(-entries // 64) * 64) + ROUND_BYTES_FIXED


def chunk_packs(n: int) -> int:
    """Packs per ``DistanceChunk`` so that c_1 and c_0 stay under ``CHUNK_BYTES``."""
    return max(1, CHUNK_BYTES // he.pack_bytes(1, n))


@dataclass
class CSSession:
    """One identification at the CS: the query rows until every chunk is sent, the CS's shares d_0
    (one array per chunk, then inside Alg. 3's CS side, ``party``, started once every chunk is sent)."""

    rows: np.ndarray | None
    ot: SoftSpokenSender | FerretSender
    expires: float  # IDLE_TTL after the last successful step, at most ``deadline``
    deadline: float  # MAX_AGE after the start
    caller: str | None = None
    d0: list = field(default_factory=list)
    party: Party | None = None
    round: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    busy: int = 0  # steps holding or waiting for ``lock`` (guarded by the role's lock); a busy session never expires
    exchange: int = 0  # bytes reserved by the round being received or answered (0: none; guarded by the role's lock)
    why: str = "idle"  # what ``expires`` is: "idle" (IDLE_TTL), "first" (FIRST_ROUND_TTL)
    pool: bytes | None = None  # the Ferret pool this identification takes its COTs from (``pools``), else None


class CloudServerRole:
    """The CS's steps: ``gallery`` (bytes → GalleryInfo), ``start`` (Query → a frame stream: Started, the distance
    chunks), ``admit_round`` (a round's head → its body's exact size) and ``reveal`` (one Alg. 3 round → a frame
    stream). ``cs`` is a loaded ``he.CloudServer`` with k_sw; ``info`` what ``gallery`` answers. ``batch``: Alg. 3
    entries per batch (None: every entry in one, so the rounds do not grow with the gallery; tests set less).
    ``memory``: the budget of the Alg. 3 exchanges in flight (``SESSION_MEMORY``); ValueError if it cannot hold one
    identification's."""

    def __init__(self, cs: he.CloudServer, pk_bytes: bytes, *, insecure_test_params: bool, clock=time.monotonic,
                 chunk: int | None = None, batch: int | None = None, memory: int | None = None,
                 pool_memory: int | None = None) -> None:
        self.clock, self._fixed_batch, self._insecure, self._pk = clock, batch, insecure_test_params, pk_bytes
        self.chunk = chunk or chunk_packs(cs.n)  # packs (of cs.group ciphertexts) per DistanceChunk
        self._layout(cs)
        self.memory = SESSION_MEMORY if memory is None else int(memory)
        if self.memory < 2 * self.round_limit:
            raise ValueError(f"a memory budget of {self.memory} bytes cannot hold one identification of this gallery "
                             f"(at least {2 * self.round_limit})")
        self.max_sessions = max(1, min(MAX_SESSIONS, self.memory // (2 * self.round_limit)))
        self.max_per_caller = min(MAX_PER_CALLER, self.max_sessions)
        self.in_flight = 0
        """Bytes reserved by the exchanges in flight (bodies being received, answers being sent), ≤ ``memory``."""
        self._sessions: dict[bytes, CSSession] = {}
        self._abandoned: dict[str, list[float]] = {}  # caller → until when each abandoned identification counts
        self._ended: OrderedDict[bytes, str] = OrderedDict()  # expired id → why, the last _ENDED
        self._lock = threading.Lock()
        self.pools = Pools(self.need, clock=clock, memory=pool_memory,
                           params_name="toy" if insecure_test_params else "regular")
        """The verifiers' Ferret pools (``pools``): Alg. 3 on silent OT for a ``FerretQuery``."""

    def _layout(self, cs: he.CloudServer) -> None:
        """What an identification on ``cs`` needs: its Alg. 3 batch, the ``gallery`` answer, the query's size, the
        largest round, the COTs it takes (assigned together; ``start`` reads them under the role's lock)."""
        self.cs = cs
        self.batch = self._fixed_batch or max(64, -(-cs.count // 64) * 64)
        self.info = GalleryInfo(cs.dim, cs.count, cs.ciphertexts, self.chunk, self.batch, self._insecure, self._pk)
        self.query_bytes = he.query_bytes(cs.n, cs.dim)
        self.round_limit = max_round_bytes(min(self.batch, max(cs.count, 1)))
        """The largest Alg. 3 round body this gallery allows (the service's cap before a round's head is read)."""
        self.need = ots_needed(max(cs.count, 1), self.batch)

    def regallery(self, cs: he.CloudServer) -> None:
        """Serve ``cs`` — the gallery after an add (issue 37: its size changed) — to the identifications that start
        from here; those in flight finish on the gallery, batch and COTs they started with (``start``). ``Started``
        names the size and batch an identification runs on, so a verifier holding an older layout takes the new one
        before it reads the distances; a Ferret pool filled for the smaller gallery is refused at ``start`` (409,
        "refill first") and refilled by the verifier. ValueError if the memory budget cannot hold one
        identification of the new gallery (nothing changed)."""
        if self.memory < 2 * max_round_bytes(min(self._fixed_batch or max(64, -(-cs.count // 64) * 64),
                                                 max(cs.count, 1))):
            raise ValueError("the CS's memory budget cannot hold one identification of the grown gallery: restart it "
                             "with a larger --memory-budget")
        with self._lock:
            self._layout(cs)
            self.max_sessions = max(1, min(MAX_SESSIONS, self.memory // (2 * self.round_limit)))
            self.max_per_caller = min(MAX_PER_CALLER, self.max_sessions)
            self.pools.resize(self.need)

    @property
    def chunks(self) -> int:
        return -(-he.packs(self.cs.ciphertexts, self.cs.group) // self.chunk)

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._sessions)

    def _expire(self) -> None:
        """Drop the sessions past their expiry that no step or exchange is using (with the role's lock held); each
        counts against its caller as abandoned."""
        now = self.clock()
        for sid in [k for k, s in self._sessions.items() if s.expires <= now and not s.busy and not s.exchange]:
            s = self._sessions.pop(sid)
            if s.pool is not None:
                self.pools.drop(s.pool, "dropped: an identification on it did not finish")
            self._ended[sid] = (f"older than {MAX_AGE:.0f} s" if s.expires >= s.deadline
                                else f"no round 0 within {FIRST_ROUND_TTL:.0f} s of the distances" if s.why == "first"
                                else f"no step for {IDLE_TTL:.0f} s")
            while len(self._ended) > _ENDED:
                self._ended.popitem(last=False)
            self._abandon(s.caller, s.expires, now)
        for caller in [c for c, held in self._abandoned.items() if max(held) <= now]:
            del self._abandoned[caller]

    def _abandon(self, caller: str | None, ended: float, now: float) -> None:
        """Count an identification of ``caller`` that ended at ``ended`` without its last round (with the role's lock
        held)."""
        if caller is not None:
            held = [t for t in self._abandoned.get(caller, []) if t > now]
            self._abandoned[caller] = sorted([*held, ended + ABANDONED_HOLD])[-MAX_PER_CALLER:]

    @contextmanager
    def _step(self, sid: bytes, caller: str | None) -> Iterator[CSSession]:
        """The live session ``sid`` of ``caller``, locked for one step; a step that returns pushes its expiry to
        ``IDLE_TTL`` from now (at most its ``deadline``), one that raises leaves it as it was. Another caller's
        session is "unknown", as a made-up id is."""
        with self._lock:
            s = self._lookup(sid, caller)
            s.busy += 1
        try:
            with s.lock:
                yield s
                s.expires, s.why = min(self.clock() + IDLE_TTL, s.deadline), "idle"
        finally:
            with self._lock:
                s.busy -= 1

    def _check_room(self, caller: str | None) -> None:
        """TooManySessions unless a new session fits (with the role's lock held, expired ones dropped)."""
        self._expire()
        now = self.clock()
        mine = [] if caller is None else [s.expires for s in self._sessions.values() if s.caller == caller]
        held = [] if caller is None else [t for t in self._abandoned.get(caller, []) if t > now]
        if len(mine) + len(held) >= self.max_per_caller:
            raise TooManySessions((f"this client already has {len(mine)} cryptomask identifications open"
                                   + (f" and abandoned {len(held)} recently" if held else "")
                                   + "; finish one or retry later"), per_caller=True,
                                  retry_after=min(mine + held) - now)
        if len(self._sessions) >= self.max_sessions:
            raise TooManySessions("the CS has too many identifications open; try again later", per_caller=False,
                                  retry_after=min(s.expires for s in self._sessions.values()) - now)

    def gallery(self, body) -> GalleryInfo:
        read_message(GalleryRequest, body)
        return self.info

    def _lookup(self, sid: bytes, caller: str | None) -> CSSession:
        """The live session ``sid`` of ``caller`` (with the role's lock held, expired ones dropped)."""
        self._expire()
        s = self._sessions.get(sid)
        if s is not None and s.caller != caller:
            s = None  # another caller's session is "unknown", as a made-up id is
        if s is None:
            why = self._ended.get(sid)
            raise ProtocolError(f"cryptomask session expired ({why}): start the identification again" if why
                                else "unknown cryptomask session: start the identification again")
        return s

    def _end(self, sid: bytes, abandoned: bool = False) -> None:
        """End a session: its Ferret pool released (``abandoned``: dropped, the CS may have taken COTs the verifier
        has not)."""
        with self._lock:
            s = self._sessions.pop(sid, None)
            if s is not None and abandoned:
                now = self.clock()
                self._abandon(s.caller, now, now)
        if s is not None and s.pool is not None:
            if abandoned:
                self.pools.drop(s.pool, "dropped: an identification on it did not finish")
            else:
                self.pools.release(s.pool)

    # ------------------------------------------------------------------------- Ferret pools (``pools``)
    def ot_setup(self, body, caller: str | None = None) -> FerretSetup:
        """``FerretSetupRequest`` → a new pool of ``caller``: its id and Ferret's setup request."""
        read_message(FerretSetupRequest, body)
        return FerretSetup(*self.pools.setup(caller))

    def ot_finish(self, body, caller: str | None = None) -> FerretPool:
        """``FerretFinish`` → the pool ready, its state."""
        m = read_message(FerretFinish, body)
        return FerretPool(m.pool, *self.pools.finish(m.pool, caller, m.response), b"")

    def ot_refill(self, body, caller: str | None = None) -> FerretPool:
        """``FerretRefillRequest`` (the verifier's state, which must be the CS's) → the refill messages, the state."""
        m = read_message(FerretRefillRequest, body)
        return FerretPool(m.pool, *self.pools.refill(m.pool, caller, m.counter, m.available))

    def start(self, body, caller: str | None = None) -> Iterator[bytes]:
        """Alg. 2 line 2: the query rows, checked, are kept in a new session of ``caller``
        (who asks, as the service knows it; None: counted only against ``MAX_SESSIONS``). → the answer's frames:
        ``Started``, then each ``DistanceChunk`` (``_distances``), computed as the previous one is sent."""
        with self._lock:  # one gallery (and its batch, COTs) for the whole identification, even if a change swaps it
            cs, batch, need, count = self.cs, self.batch, self.need, self.info.n
        fq = message_type(body) == FerretQuery.WIRE_NAME
        m = read_message(FerretQuery if fq else Query, body)
        query = he.Query.from_bytes(m.rows, cs.n, cs.dim)
        with self._lock:
            self._check_room(caller)
        switched = cs.prepare(query)  # checks residues < primes
        sid = secrets.token_bytes(16)
        ot = self.pools.acquire(m.pool, caller, m.counter, m.available, need) if fq else SoftSpokenSender()
        try:
            with self._lock:
                self._check_room(caller)  # again: others may have started meanwhile
                now = self.clock()
                self._sessions[sid] = CSSession(switched, ot, now + IDLE_TTL, now + MAX_AGE, caller,
                                                pool=m.pool if fq else None)
        except TooManySessions:
            if fq:
                self.pools.release(m.pool)  # nothing taken from it
            raise
        request = b"" if fq else ot.setup_request()
        return self._distances(sid, caller, framed(Started(sid, request, count, batch).to_bytes()), cs, batch)

    def _distances(self, sid: bytes, caller: str | None, started: bytes, cs, batch: int) -> Iterator[bytes]:
        """Alg. 2 lines 5–11 chunk by chunk, each a step of the session (its expiry pushed): (c_1, masked c_0) out,
        d_0 kept; after the last, Alg. 3's CS side starts (it waits for the verifier's round 0). A stream closed
        before its end (the verifier went away or stalled) ends the session. ``cs``: the gallery as the session
        started (a CS whose gallery is changed meanwhile — ``bindings.cryptomask_kg`` — swaps ``self.cs`` for the
        next identifications; ``batch`` is the session's)."""
        done = False
        try:
            yield started
            for i in range(-(-he.packs(cs.ciphertexts, cs.group) // self.chunk)):
                with self._step(sid, caller) as s:
                    span = self.chunk * cs.group
                    lo, hi = i * span, min(cs.ciphertexts, (i + 1) * span)
                    msg, d0 = cs.distances_of(s.rows, lo, hi)
                    s.d0.append(d0)
                    if hi == cs.ciphertexts:  # all sent: only d_0 stays, in Alg. 3's CS side
                        s.rows, d0_all, s.d0 = None, np.concatenate(s.d0), []
                        s.party = Party(reveal_cs(s.ot, d0_all, Wire(), batch), "Alg. 3 (verifier's message)")
                        s.party.start()
                chunk = DistanceChunk(sid, i, he.to_wire(msg.c1, C1_BITS), he.to_wire(msg.c0, C0_BITS)).to_bytes()
                del msg
                yield framed(chunk)
            with self._lock:  # every chunk sent: round 0 must follow soon
                s = self._lookup(sid, caller)
                s.expires, s.why = min(self.clock() + FIRST_ROUND_TTL, s.deadline), "first"
            done = True
        finally:
            if not done:
                self._end(sid, abandoned=True)

    def admit_round(self, head_frame: bytes, caller: str | None = None) -> tuple[int, Callable[[], None]]:
        """A round's head, checked against its session before the rest of the body is read: → (the exact size its body
        must have, ``release``). The exchange is reserved until ``release()`` (call it once the answer is sent or
        the request failed): no other round of this identification is admitted meanwhile, its body and answer
        (``size + round_limit``) count against ``memory``, and the session does not expire. ProtocolError for another
        caller's or an unknown session, a round out of order, part sizes other than Alg. 3 waits for, or a base-OT
        response outside round 0; ``RoundBusy`` while another round of it is in flight, ``TooManySessions`` when
        the budget is full (nothing reserved)."""
        head = read_message(RoundHead, head_frame)
        size = round_bytes(len(head_frame), head.sizes)
        with self._lock:
            s = self._lookup(head.session, caller)
            if s.exchange:
                raise RoundBusy("a round of this identification is already being received or answered; send the "
                                "next one after its answer")
            self._check_head(s, head)
            need = size + self.round_limit
            if self.in_flight + need > self.memory:
                raise TooManySessions("the CS's memory budget is in use; try again later", per_caller=False,
                                      retry_after=1)
            s.exchange, self.in_flight = need, self.in_flight + need
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if not released:
                    released, s.exchange, self.in_flight = True, 0, self.in_flight - need
        return size, release

    def _check_head(self, s: CSSession, head: RoundHead) -> None:
        if s.party is None or s.party.done:
            raise ProtocolError("RoundHead out of order: read every distance chunk first")
        if head.round != s.round:
            raise ProtocolError(f"RoundHead {head.round} out of order (expected {s.round})")
        if bool(head.ot) != (head.round == 0 and s.pool is None):
            raise ProtocolError("RoundHead: the base-OT response comes with round 0, and only there (none on Ferret)")
        sizes = [p.nbytes for p in s.party.expect]
        if list(head.sizes) != sizes:
            raise ProtocolError(f"RoundHead: {len(head.sizes)} parts of {sum(head.sizes)} bytes, expected "
                                f"{len(sizes)} of {sum(sizes)}")

    def reveal(self, body, caller: str | None = None) -> Iterator[bytes]:
        """One Alg. 3 round: the verifier's message in (its head, then its parts in pieces; round 0 also finishes the
        base OTs), the CS's out as frames; the session ends with μ_0."""
        reader = FrameReader(io.BytesIO(body).read)
        try:
            head = read_message(RoundHead, reader.frame(HEAD_LIMIT))
        except WireError as e:
            raise ProtocolError(f"RoundHead: {e}") from None
        with self._step(head.session, caller) as s:
            self._check_head(s, head)
            parts = read_round(reader, head, head.sizes)
            try:
                reader.end()
            except WireError as e:
                raise ProtocolError(str(e)) from None
            try:
                check(parts, s.party.expect, s.party.what)  # before the base OTs are used up
                if head.round == 0 and s.pool is None:
                    s.ot.setup_finish(head.ot)  # checks the variant tag and 16-byte messages before any use
                out = s.party.step(parts)
            except (CryptoError, ValueError) as e:
                raise ProtocolError(f"Alg. 3 round {head.round}: {e}") from None
            s.round += 1
            done = s.party.done
        if done:
            self._end(head.session)
        reply = RoundHead(head.session, head.round, b"", [int(p.size) for p in out])
        return round_frames(reply, out)[1]
