"""Issue 40: the CS's Ferret pools over real loopback HTTP (``protocols.cryptomask.pools``): per verifier (API key),
used once, refused when desynchronised, replayed or another caller's, bounded in count and COTs, forgotten on a
restart — and the verifier client recovering with a new setup."""
import numpy as np
import pytest

from privface.crypto.ferret import FerretReceiver
from privface.protocols.common import read_message
from privface.protocols.cryptomask.messages import (
    FerretFinish,
    FerretPool,
    FerretQuery,
    FerretRefillRequest,
    FerretSetup,
    FerretSetupRequest,
)
from privface.protocols.cryptomask.pools import MAX_PER_CALLER, PoolBusy, PoolError, Pools, PoolsFull
from privface.service.client import RemoteSessionError, ServiceClient, ServiceError
from tests.protocols.cryptomask.test_cryptomask_http import N, _client, _serve_gallery, _unit


@pytest.fixture(scope="module")
def cs(tmp_path_factory):
    """A toy gallery of 300 templates (2 stacks, one DistanceChunk) over loopback HTTP with API keys."""
    yield from _serve_gallery(tmp_path_factory.mktemp("cm-pools"), _unit(300, 31), chunk=4)


def _key(cs):
    return cs["keys"].create("verify")[1]


def _setup(http):
    """A pool set up by hand: (its id, the verifier's side)."""
    got = read_message(FerretSetup, http.step("ot/setup", FerretSetupRequest().to_bytes()))
    R = FerretReceiver()
    state = read_message(FerretPool, http.step("ot/finish", FerretFinish(got.pool, R.setup_response(got.request))
                                               .to_bytes()))
    assert (state.counter, state.available) == (R.counter, R.available) and not state.refills
    return got.pool, R


def _refill(http, pid, R):
    """One ``ot/refill`` (the body sent, the answer absorbed)."""
    body = FerretRefillRequest(pid, R.counter, R.available).to_bytes()
    got = read_message(FerretPool, http.step("ot/refill", body))
    for lo in range(0, len(got.refills), R.msg_bytes):
        R.absorb(got.refills[lo:lo + R.msg_bytes])
    assert (got.counter, got.available) == (R.counter, R.available)
    return body, got


def test_a_pool_is_its_callers_only(cs):
    """Another API key naming a pool hears "unknown", as for a made-up id; the pool stays usable by its owner."""
    with ServiceClient(cs["url"], "cryptomask", api_key=_key(cs)) as a, \
            ServiceClient(cs["url"], "cryptomask", api_key=_key(cs)) as b:
        pid, R = _setup(a)
        for http, who in ((b, pid), (a, bytes(16))):
            with pytest.raises(RemoteSessionError, match="unknown Ferret pool"):
                http.step("ot/refill", FerretRefillRequest(who, R.counter, R.available).to_bytes())
        _refill(a, pid, R)


def test_replayed_steps_and_a_lying_state_are_refused_and_drop_the_pool(cs):
    """A replayed refill (its state is no longer the CS's), a replayed setup response, and a state the verifier made
    up: 409, the pool dropped for good (its unused COTs never used); a new setup works."""
    with ServiceClient(cs["url"], "cryptomask", api_key=_key(cs)) as http:
        pid, R = _setup(http)
        body, _ = _refill(http, pid, R)
        with pytest.raises(RemoteSessionError, match="desynchronised"):
            http.step("ot/refill", body)  # replayed
        with pytest.raises(RemoteSessionError, match="desynchronised"):
            http.step("ot/refill", FerretRefillRequest(pid, R.counter, R.available).to_bytes())  # now dropped
        pid, R = _setup(http)
        with pytest.raises(RemoteSessionError, match="already finished"):
            http.step("ot/finish", FerretFinish(pid, b"x").to_bytes())
        pid, R = _setup(http)
        with pytest.raises(RemoteSessionError, match="desynchronised"):
            http.step("ot/refill", FerretRefillRequest(pid, R.counter + 5, R.available).to_bytes())


def test_refills_stop_at_one_identification(cs):
    """The CS refills only up to one identification's COTs (``need``): asking again adds nothing, so a key holder
    cannot grow a pool past ``need + output`` COTs."""
    role = cs["svc"].party
    with ServiceClient(cs["url"], "cryptomask", api_key=_key(cs)) as http:
        pid, R = _setup(http)
        while R.available < role.pools.need:
            _refill(http, pid, R)
        assert R.available < role.pools.need + role.pools.output
        _, got = _refill(http, pid, R)
        assert got.refills == b"" and got.available == R.available


def test_a_desynchronised_identification_is_refused_and_the_client_sets_up_again(cs):
    """The verifier's pool one COT ahead of the CS's: at a refill the CS refuses it (the client sets up a new pool
    and the identification answers); at a FerretQuery (the pool full) the CS refuses it with 409 before any distance,
    both sides drop the pool, and the next identification sets up a new one."""
    x, pools = cs["x"], cs["svc"].party.pools
    with _client(cs, api_key=_key(cs)) as v:
        assert v.identify(x[3])["match"]
        first = v._pool[0]
        v._pool[1].take(1)  # short of one identification: the next call refills, hears "desynchronised"
        got = v.identify(x[3])
        assert got["match"] and got["ot_exchanges"]["ot/setup"] == 1 and v._pool[0] != first
        assert first not in pools._pools and "desynchronised" in pools._forgotten[first]
        v.prepare()
        v._pool[1]._pool.counter += 1  # the pool full, the state a lie
        with pytest.raises(RemoteSessionError, match="desynchronised"):
            v.identify(x[3])
        assert v._pool is None and len(cs["svc"].party) == 0
        got = v.identify(x[4])
        assert got["match"] and got["ot_exchanges"]["ot/setup"] == 1


def test_a_forgotten_pool_is_set_up_again(cs):
    """A CS restart forgets every pool (nothing persisted): the client's refill hears "unknown" and sets up anew,
    once, without failing the identification."""
    role, x = cs["svc"].party, cs["x"]
    with _client(cs, api_key=_key(cs)) as v:
        v.identify(x[8])
        with role.pools._lock:
            role.pools._pools.clear()  # what a restart leaves: no pool
        v._pool[1].take(v._pool[1].available)  # so the client refills (and hears "unknown") first
        got = v.identify(x[8])
        assert got["match"] and got["ot_exchanges"]["ot/setup"] == 1


def test_eviction_and_an_unfinished_identification(cs):
    """A caller's third setup evicts its least recently used pool ("evicted"); an identification whose distances are
    not read to the end drops its pool ("did not finish"); while an identification holds a pool, a refill of it is
    409 (one step at a time)."""
    key = _key(cs)
    with ServiceClient(cs["url"], "cryptomask", api_key=key) as http:
        pools = [_setup(http) for _ in range(MAX_PER_CALLER + 1)]
        (old, R0), (pid, R) = pools[0], pools[-1]
        with pytest.raises(RemoteSessionError, match="evicted"):
            http.step("ot/refill", FerretRefillRequest(old, R0.counter, R0.available).to_bytes())
    role, caller = cs["svc"].party, "test:unfinished"  # the role itself, as the service calls it
    got = role.ot_setup(FerretSetupRequest().to_bytes(), caller)
    pid, R = got.pool, FerretReceiver()
    role.ot_finish(FerretFinish(pid, R.setup_response(got.request)).to_bytes(), caller)
    while R.available < role.pools.need:
        m = role.ot_refill(FerretRefillRequest(pid, R.counter, R.available).to_bytes(), caller)
        for lo in range(0, len(m.refills), R.msg_bytes):
            R.absorb(m.refills[lo:lo + R.msg_bytes])
    with _client(cs, api_key=key) as v:
        v._setup()
        rows = v._verifier.query(cs["x"][1]).to_bytes()
    frames = role.start(FerretQuery(rows, pid, R.counter, R.available).to_bytes(), caller)
    next(frames)  # Started: the session holds the pool
    with pytest.raises(PoolBusy, match="in use"):
        role.ot_refill(FerretRefillRequest(pid, R.counter, R.available).to_bytes(), caller)
    frames.close()  # the stream closed before its end: the identification did not finish, its pool is gone
    with pytest.raises(PoolError, match="did not finish"):
        role.ot_refill(FerretRefillRequest(pid, R.counter, R.available).to_bytes(), caller)


def test_pool_count_follows_the_memory_budget():
    """``max_pools`` from the budget (16 B per resident COT and LPN output); a full CS evicts only a pool idle for
    ``EVICT_IDLE`` s, else PoolsFull (503 with Retry-After)."""
    now = [0.0]
    need = 30_408_757  # 2^20 in one batch
    pools = Pools(need, params_name="toy", memory=1, clock=lambda: now[0])
    assert pools.max_pools == 1
    pools.setup("a")
    with pytest.raises(PoolsFull):
        pools.setup("b")
    now[0] += 61
    pools.setup("b")
    assert len(pools) == 1
    big = Pools(need, memory=4 << 30)
    assert big.pool_bytes == 8 * (need + big.output) + 16 * 10_608_640 and big.max_pools == 8


def test_http_setup_limits(cs):
    """Setup bodies are capped (413) and checked (400); a setup response for another parameter set is refused and
    drops the pool."""
    svc = cs["svc"]
    assert svc.max_body["ot/setup"] == svc.max_body["ot/refill"] == 1024
    with ServiceClient(cs["url"], "cryptomask", api_key=_key(cs)) as http:
        with pytest.raises(ServiceError) as e:
            http.step("ot/refill", bytes(2048))
        assert e.value.status == 413
        got = read_message(FerretSetup, http.step("ot/setup", FerretSetupRequest().to_bytes()))
        with pytest.raises(ServiceError) as e:
            http.step("ot/finish", FerretFinish(got.pool, b"privface/ferret\x01\x00" + bytes(64)).to_bytes())
        assert e.value.status == 400
        with pytest.raises(RemoteSessionError, match="bad setup response"):
            http.step("ot/refill", FerretRefillRequest(got.pool, 0, 0).to_bytes())
    assert N and np  # the shared fixture's module constants are imported
