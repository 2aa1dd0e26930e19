"""The CS's Ferret pools over HTTP (seed 001 Alg. 3 on silent OT, ``crypto.ferret``): one pool per verifier setup,
kept in memory across identifications, as ``CryptoMask`` keeps its pair in process.

* ``setup`` (step ``ot/setup``): a new pool of ``caller`` (the service's client identity: its API key id), named by
  16 random bytes (the setup id), → Ferret's setup request; ``finish`` (``ot/finish``) takes the verifier's response
  (its SoftSpokenOT base OTs and the reserve's u) → the pool's state.
* ``refill`` (``ot/refill``): Ferret iterations, between identifications, until the pool holds one identification's
  COTs (``need``) and never more: at most ``need + output`` COTs are resident per pool.
* ``acquire`` binds a ready pool to one identification (``FerretQuery``); the session's end ``release``s it, an
  identification that did not finish ``drop``s it (the CS has taken COTs the verifier may not have: the pool is never
  used again).

Every use names the pool's *state*: (counter, available) — the TCCR tweak of the next COT and the COTs left. Both
sides take in the same order, so an honest verifier's state equals the CS's; any other state (a replayed or lost
refill, an identification one side did not finish, a verifier that lies) is refused and the pool dropped, so a
correlation is never used twice nor paired with another. A pool is another caller's → "unknown", as a made-up id.
Nothing is persisted: a CS restart forgets every pool (the verifier hears "unknown" and runs a new setup). Limits: at
most ``MAX_PER_CALLER`` pools per caller (a new setup evicts the caller's least recently used idle one), at most
``max_pools`` in all (``MAX_POOLS``, fewer when ``memory`` cannot hold them; a new setup evicts another caller's pool
only if idle for ``EVICT_IDLE`` s, else 503), ``POOL_TTL`` s unused → forgotten; one step in flight per pool (409),
``MAX_REFILLS`` refills computed at once (503), each refill message ≤ ``REFILL_BYTES``.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from ...crypto import ferret
from ...errors import CryptoError, ProtocolError

MAX_PER_CALLER, MAX_POOLS = 2, 16
EVICT_IDLE, POOL_TTL = 60.0, 3600.0
MAX_REFILLS = 2
REFILL_BYTES = 3 << 20
"""The refill messages of one ``ot/refill`` answer at most (6 regular iterations would pass it: 5 at most)."""
POOL_MEMORY = 4 << 30
"""The default budget of resident pools: 2·``ferret.KEY_BYTES`` = 8 B per COT of the CS's pool (its two keys hashed
ahead, ``need + output`` at most) and Ferret's state (16 B per LPN output, ``n``)."""
_FORGOTTEN = 256


class PoolError(ProtocolError):
    """The named pool cannot be used (unknown, evicted, expired, desynchronised, set up twice): run a new setup."""


class PoolBusy(ProtocolError):
    """Another step of this pool is in flight (one at a time)."""


class PoolsFull(ProtocolError):
    """No room for a new pool or refill now; ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Pool:
    caller: str | None
    sender: ferret.FerretSender
    used: float  # clock of the last step
    ready: bool = False
    busy: str = ""  # "", "setup", "refill", or "identify"


class Pools:
    """The CS's pools for a gallery whose identifications take ``need`` COTs (``reveal.ots_needed``)."""

    def __init__(self, need: int, *, params_name: str = "regular", memory: int | None = None,
                 clock=time.monotonic) -> None:
        self.need, self.params_name, self.clock = need, params_name, clock
        p = ferret.params(params_name)
        self.output = p["output"]
        self.per_refill = max(1, min(5, REFILL_BYTES // p["msg_bytes"]))
        self.pool_bytes = 2 * ferret.KEY_BYTES * (need + self.output) + 16 * p["n"]
        self.budget = POOL_MEMORY if memory is None else int(memory)
        self.max_pools = max(1, min(MAX_POOLS, self.budget // self.pool_bytes))
        self._pools: OrderedDict[bytes, Pool] = OrderedDict()  # least recently used first
        self._forgotten: OrderedDict[bytes, str] = OrderedDict()
        self._refills = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._pools)

    def resize(self, need: int) -> None:
        """The gallery changed size (an add): identifications now take ``need`` COTs; refills fill pools to it and the
        budget holds fewer of the larger pools (the ones resident stay until evicted or expired)."""
        p = ferret.params(self.params_name)
        with self._lock:
            self.need = need
            self.pool_bytes = 2 * ferret.KEY_BYTES * (need + self.output) + 16 * p["n"]
            self.max_pools = max(1, min(MAX_POOLS, self.budget // self.pool_bytes))

    # ---------------------------------------------------------------------------------------- bookkeeping
    def _forget(self, pid: bytes, why: str) -> None:
        self._pools.pop(pid, None)
        self._forgotten[pid] = why
        while len(self._forgotten) > _FORGOTTEN:
            self._forgotten.popitem(last=False)

    def _expire(self) -> None:
        now = self.clock()
        for pid in [k for k, p in self._pools.items() if not p.busy and p.used + POOL_TTL <= now]:
            self._forget(pid, f"unused for {POOL_TTL:.0f} s")

    def _get(self, pid: bytes, caller: str | None) -> Pool:
        self._expire()
        p = self._pools.get(pid)
        if p is None or p.caller != caller:
            why = self._forgotten.get(pid) if p is None else None
            raise PoolError(f"Ferret pool {why}: run a new setup (ot/setup)" if why
                            else "unknown Ferret pool (a CS restart forgets every pool): run a new setup (ot/setup)")
        return p

    def _claim(self, pid: bytes, caller: str | None, what: str) -> Pool:
        with self._lock:
            p = self._get(pid, caller)
            if p.busy:
                raise PoolBusy(f"this Ferret pool is in use ({p.busy}); one step at a time")
            p.busy, p.used = what, self.clock()
            self._pools.move_to_end(pid)
            return p

    def _check_state(self, pid: bytes, p: Pool, counter: int, available: int) -> None:
        """PoolError (the pool dropped) unless the verifier's state is the CS's (with ``p`` claimed)."""
        s = p.sender
        if not p.ready:
            self.drop(pid, "never finished its setup")
            raise PoolError("this Ferret pool's setup was never finished: run a new setup (ot/setup)")
        if (counter, available) != (s.counter, s.available):
            self.drop(pid, "desynchronised")
            raise PoolError(f"Ferret pool desynchronised (the CS is at counter {s.counter}, {s.available} COTs; the "
                            f"request says {counter}, {available}): dropped, never to be used again; run a new setup "
                            "(ot/setup)")

    def _room(self, caller: str | None) -> None:
        """Evict for one more pool of ``caller`` (lock held): PoolsFull if none can go."""
        self._expire()
        now = self.clock()
        mine = [k for k, p in self._pools.items() if p.caller == caller]
        if len(mine) >= MAX_PER_CALLER:
            idle = [k for k in mine if not self._pools[k].busy]
            if not idle:
                raise PoolsFull("every Ferret pool of this client is in use; retry after its identification")
            self._forget(idle[0], "evicted by a newer setup of the same client")
        if len(self._pools) >= self.max_pools:
            idle = [k for k, p in self._pools.items() if not p.busy and p.used + EVICT_IDLE <= now]
            if not idle:
                oldest = min(p.used for p in self._pools.values())
                raise PoolsFull("the CS holds as many Ferret pools as it can; retry later",
                                max(1.0, oldest + EVICT_IDLE - now))
            self._forget(idle[0], "evicted: the CS needed room for another verifier's pool")

    # -------------------------------------------------------------------------------------------- steps
    def setup(self, caller: str | None) -> tuple[bytes, bytes]:
        """A new pool of ``caller`` → (its id, Ferret's setup request)."""
        sender = ferret.FerretSender(self.params_name)
        request = sender.setup_request()
        pid = secrets.token_bytes(16)
        with self._lock:
            self._room(caller)
            self._pools[pid] = Pool(caller, sender, self.clock())
        return pid, request

    def finish(self, pid: bytes, caller: str | None, response: bytes) -> tuple[int, int]:
        """The verifier's setup response → the pool's state (counter, available); a bad response drops the pool."""
        p = self._claim(pid, caller, "setup")
        try:
            if p.ready:
                self.drop(pid, "set up twice")
                raise PoolError("this Ferret pool's setup was already finished (a replay?): dropped; run a new setup")
            try:
                p.sender.setup_finish(response)
            except (CryptoError, ValueError) as e:
                self.drop(pid, "given a bad setup response")
                raise ProtocolError(f"Ferret setup response: {e}; the pool is dropped, run a new setup") from None
            p.ready = True
            return p.sender.counter, p.sender.available
        finally:
            p.busy = ""

    def refill(self, pid: bytes, caller: str | None, counter: int, available: int) -> tuple[int, int, bytes]:
        """Ferret iterations until the pool holds ``need`` COTs (at most ``per_refill`` per call; none if it does):
        → (counter, available after, the iterations' messages concatenated)."""
        p = self._claim(pid, caller, "refill")
        try:
            self._check_state(pid, p, counter, available)
            s = p.sender
            k = min(self.per_refill, max(0, -(-(self.need - s.available) // self.output)))
            if not k:
                return s.counter, s.available, b""
            with self._lock:
                if self._refills >= MAX_REFILLS:
                    raise PoolsFull("the CS is computing other refills; retry shortly")
                self._refills += 1
            try:
                s.room(k)  # no view of this pool is in use: it is claimed, and no identification holds it
                msgs = b"".join(s.refill() for _ in range(k))
            except Exception:
                self.drop(pid, "broken by a failed refill")
                raise
            finally:
                with self._lock:
                    self._refills -= 1
            return s.counter, s.available, msgs
        finally:
            p.busy = ""

    def acquire(self, pid: bytes, caller: str | None, counter: int, available: int,
                need: int | None = None) -> ferret.FerretSender:
        """The pool's sender for one identification of ``need`` COTs (default: ``self.need``; busy until ``release``
        or ``drop``)."""
        need = self.need if need is None else need
        p = self._claim(pid, caller, "identify")
        try:
            self._check_state(pid, p, counter, available)
            if p.sender.available < need:
                raise PoolError(f"the Ferret pool holds {p.sender.available} COTs, an identification takes "
                                f"{need}: refill first (ot/refill)")
        except ProtocolError:
            p.busy = ""
            raise
        return p.sender

    def release(self, pid: bytes) -> None:
        with self._lock:
            p = self._pools.get(pid)
            if p is not None:
                p.busy, p.used = "", self.clock()

    def drop(self, pid: bytes, why: str = "dropped") -> None:
        """Forget a pool for good (its unused COTs are freed, never used)."""
        with self._lock:
            self._forget(pid, why)
