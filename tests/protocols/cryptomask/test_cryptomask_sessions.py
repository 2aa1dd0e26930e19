"""The cryptomask CS's identification sessions over real loopback HTTP, on a fake clock: idle expiry
(``server.IDLE_TTL`` after the last successful step), the absolute cap (``server.MAX_AGE``), and the share of open
identifications per caller (``MAX_PER_CALLER``, 429) beside the CS's (``MAX_SESSIONS``, 503)."""
import gc
import io
import weakref

import httpx
import numpy as np
import pytest

from privface.protocols.common import read_message
from privface.protocols.cryptomask import encoding, server
from privface.protocols.cryptomask.messages import Query, RoundHead, Started
from privface.scale import NpySource, enrol
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.cryptomask import CryptoMaskService
from privface.service.client import ServiceClient, ServiceError
from privface.service.clients.cryptomask import VerifierClient
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore
from privface.wire import FrameReader, framed

D, N = 128, 40


class Clock:
    """The CS role's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def cs(tmp_path_factory):
    """A toy gallery of 40 templates (3 ciphertexts, one per DistanceChunk; Alg. 3 in one batch of 64: 10 rounds)
    served with API keys; the role's clock is a ``Clock``; ``query``: one valid Query body."""
    root = tmp_path_factory.mktemp("cm-sessions")
    x = np.random.default_rng(11).standard_normal((N, D))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(root / "faces.npy", x)
    gallery, keys_url = f"sqlite:///{root / 'gallery.db'}", f"sqlite:///{root / 'key.db'}"
    enrol(gallery, NpySource([str(root / "faces.npy")]), "cryptomask", key_store_url=keys_url,
          tau=0.5, insecure_test_params=True)
    with SQLiteStore(root / "cs.db") as store:
        keys = ApiKeys(store)
        svc = CryptoMaskService(store, gallery_url=gallery, chunk=1, batch=64)
        svc.party.clock = clock = Clock()
        with serve_in_thread(create_app(store, [svc], keys=keys)) as url:
            key = keys.create("verify")[1]
            with VerifierClient(url, keys_url, api_key=key) as v:
                v._setup()
                query = Query(v._verifier.query(x[0]).to_bytes()).to_bytes()
            yield dict(x=x, url=url, svc=svc, keys=keys, keys_url=keys_url, clock=clock, query=query)


@pytest.fixture
def role(cs):
    """The CS role with every session left by an earlier test expired."""
    cs["clock"].now += server.MAX_AGE + server.IDLE_TTL
    assert len(cs["svc"].party) == 0
    return cs["svc"].party


class SlowVerifier(VerifierClient):
    """A verifier that lets ``pause`` seconds pass on the CS's clock before each of its steps (before round 0 at most
    ``FIRST_ROUND_TTL`` − 1: an honest verifier sends it right after the distances)."""

    def __init__(self, *args, clock: Clock, pause: float, **kw) -> None:
        super().__init__(*args, **kw)
        self.clock, self.pause, self.reveals = clock, pause, 0

    def step(self, step: str, body: bytes) -> bytes:
        self.clock.now += self.pause
        return super().step(step, body)

    def exchange(self, step: str, body, length=None):
        first = step == "identify/reveal" and not self.reveals
        self.reveals += step == "identify/reveal"
        self.clock.now += min(self.pause, server.FIRST_ROUND_TTL - 1) if first else self.pause
        return super().exchange(step, body, length)


def _http(cs, key=None):
    return ServiceClient(cs["url"], "cryptomask", api_key=key or cs["keys"].create("verify")[1])


def _start(http, cs) -> bytes:
    """A new identification, its streamed answer (Started, every distance chunk) read: its session id."""
    answer = FrameReader(io.BytesIO(http.step("identify/start", cs["query"])).read)
    return read_message(Started, answer.frame()).session


def _head(sid: bytes, r: int = 0) -> bytes:
    """A reveal body holding only a round's head (checked against the session before anything else)."""
    return framed(RoundHead(sid, r, b"x" if r == 0 else b"", []).to_bytes())


def test_an_active_identification_outlives_the_old_ttl_while_an_idle_one_expires(cs, role):
    """A verifier stepping every IDLE_TTL − 1 s completes (12 exchanges: ≈ 1 300 s, past the former fixed 600 s) with
    the plaintext bit; a session started beside it and never stepped is gone after FIRST_ROUND_TTL, its memory
    with it, and its next step hears "expired … start the identification again"."""
    key = cs["keys"].create("verify")[1]
    with _http(cs, key) as http:
        idle = _start(http, cs)
        ref = weakref.ref(role._sessions[idle])
        t0 = cs["clock"].now
        y = cs["x"][17]
        with SlowVerifier(cs["url"], cs["keys_url"], api_key=key, clock=cs["clock"], pause=server.IDLE_TTL - 1) as v:
            got = v.identify(y)
        assert cs["clock"].now - t0 > 600 + server.IDLE_TTL - server.FIRST_ROUND_TTL
        plain = bool((encoding.quantize(cs["x"]) @ encoding.quantize(y)).max() >= round(0.5 * (1 << 16)))
        assert got["match"] is plain is True
        gc.collect()
        assert len(role) == 0 and ref() is None  # the idle session's rows and state are freed
        with pytest.raises(ServiceError) as e:
            http.step("identify/reveal", _head(idle))
        assert e.value.status == 400 and "expired (no round 0 within 30 s of the distances)" in str(e.value)
        assert "start the identification again" in str(e.value)
        with pytest.raises(ServiceError, match="unknown cryptomask session"):
            http.step("identify/reveal", _head(bytes(16)))


def test_a_refused_step_does_not_keep_a_session_alive(cs, role):
    """Only a successful step pushes the expiry: a round sent out of order every 20 s does not."""
    with _http(cs) as http:
        sid = _start(http, cs)
        for want in ("out of order", "expired"):
            cs["clock"].now += server.FIRST_ROUND_TTL * 2 / 3
            with pytest.raises(ServiceError, match=want):
                http.step("identify/reveal", _head(sid, 2))
        assert len(role) == 0


def test_max_age_ends_even_an_active_identification(cs, role, monkeypatch):
    monkeypatch.setattr(server, "MAX_AGE", 1000.0)
    with SlowVerifier(cs["url"], cs["keys_url"], api_key=cs["keys"].create("verify")[1], clock=cs["clock"],
                      pause=server.IDLE_TTL - 1) as v:
        with pytest.raises(ServiceError, match=r"expired \(older than 1000 s\): start the identification again"):
            v.identify(cs["x"][3])
    assert len(role) == 0


def test_one_caller_gets_its_share_and_others_still_get_in(cs, role):
    """MAX_PER_CALLER identifications per API key (the next one: 429 LimitError, Retry-After = when the first of
    them would expire without its round 0), MAX_SESSIONS in all (then 503 SessionLimitError for everyone); expiry
    frees the CS's slots at once, the caller's share once the abandoned ones' ABANDONED_HOLD is over."""
    assert (server.MAX_PER_CALLER, server.MAX_SESSIONS) == (2, 8)
    keys = [cs["keys"].create("verify")[1] for _ in range(5)]
    with _http(cs, keys[0]) as http:
        _start(http, cs)
        cs["clock"].now += 10
        _start(http, cs)
    r = httpx.post(f"{cs['url']}/v1/cryptomask/identify/start", content=cs["query"], timeout=60,
                   headers={"content-type": "application/octet-stream", "authorization": f"Bearer {keys[0]}"})
    assert r.status_code == 429 and r.json()["type"] == "LimitError" and "already has 2" in r.json()["error"]
    assert r.headers["retry-after"] == str(int(server.FIRST_ROUND_TTL) - 10)
    assert len(role) == 2
    for key in keys[1:4]:  # three more callers take the remaining six slots
        with _http(cs, key) as http:
            _start(http, cs)
            _start(http, cs)
    assert len(role) == server.MAX_SESSIONS
    with _http(cs, keys[4]) as http, pytest.raises(ServiceError) as e:
        _start(http, cs)
    assert e.value.status == 503 and "too many identifications open" in str(e.value)
    cs["clock"].now += server.IDLE_TTL
    with _http(cs, keys[4]) as http:
        _start(http, cs)  # everything idle expired: others get in at once
    assert len(role) == 1
    cs["clock"].now += server.ABANDONED_HOLD
    with _http(cs, keys[0]) as http:
        _start(http, cs)  # the first caller's abandoned starts no longer count
    assert len(role) == 1


def test_without_a_caller_only_the_global_cap_applies(cs, role):
    """In process (no service, no caller) the role counts sessions against MAX_SESSIONS alone."""
    for _ in range(server.MAX_SESSIONS):
        role.start(cs["query"])
    with pytest.raises(server.TooManySessions) as e:
        role.start(cs["query"])
    assert not e.value.per_caller


def test_a_large_gallery_admits_fewer_identifications(cs, role, monkeypatch):
    """The cap follows the memory an identification's Alg. 3 rounds hold (``SESSION_MEMORY``): with room for one,
    the second start is refused before any work, and the first one's expiry lets the next in."""
    party = role
    monkeypatch.setattr(server, "SESSION_MEMORY", 3 * party.round_limit)
    small = server.CloudServerRole(party.cs, party.info.public_context, insecure_test_params=True, batch=64,
                                   clock=cs["clock"])
    assert (small.max_sessions, small.max_per_caller) == (1, 1)
    small.start(cs["query"])
    with pytest.raises(server.TooManySessions):
        small.start(cs["query"])
    cs["clock"].now += server.IDLE_TTL + 1
    small.start(cs["query"])
    assert len(small) == 1


def test_a_session_answers_only_the_key_that_started_it(cs, role):
    """Issue 17 §4: the identification's session id (in the messages) was a bearer secret: any verify key that
    saw it could fetch the distances or drive Alg. 3. Another key now hears "unknown session" (before its body is
    read), and the owner's identification goes on."""
    owner, other = cs["keys"].create("verify")[1], cs["keys"].create("verify")[1]
    with _http(cs, owner) as http:
        sid = _start(http, cs)
    with _http(cs, other) as thief, pytest.raises(ServiceError) as e:
        thief.step("identify/reveal", _head(sid))
    assert e.value.status == 400 and "unknown cryptomask session" in str(e.value)
    with _http(cs, owner) as http, pytest.raises(ServiceError) as e:
        http.step("identify/reveal", _head(sid, 3))
    assert "RoundHead 3 out of order (expected 0)" in str(e.value)  # the owner's session is there, unchanged


def test_abandoned_identifications_free_the_cs_soon_and_count_against_their_caller(cs, role):
    """Issue 35 A4: four keys × two starts whose verifier leaves after the distances held every slot for IDLE_TTL, so
    a fifth key got 503 for two minutes. Now a session without its round 0 ends FIRST_ROUND_TTL after its distances
    (everyone gets in again), and each abandoned one counts against its own caller's share for ABANDONED_HOLD."""
    keys = [cs["keys"].create("verify")[1] for _ in range(5)]
    for key in keys[:4]:
        with _http(cs, key) as http:
            _start(http, cs)
            _start(http, cs)
    with _http(cs, keys[4]) as http, pytest.raises(ServiceError) as e:
        _start(http, cs)
    assert e.value.status == 503
    cs["clock"].now += server.FIRST_ROUND_TTL + 1
    assert len(role) == 0
    with _http(cs, keys[4]) as http:
        _start(http, cs)
    r = httpx.post(f"{cs['url']}/v1/cryptomask/identify/start", content=cs["query"], timeout=60,
                   headers={"content-type": "application/octet-stream", "authorization": f"Bearer {keys[0]}"})
    assert r.status_code == 429 and "abandoned 2 recently" in r.json()["error"]
    assert int(r.headers["retry-after"]) == server.ABANDONED_HOLD - 1  # held from when they expired
    cs["clock"].now += server.ABANDONED_HOLD
    with _http(cs, keys[0]) as http:
        _start(http, cs)
        _start(http, cs)  # its whole share again


def test_a_distances_stream_cut_counts_as_abandoned(cs, role):
    """A verifier that drops the start's answer part-way ends its session at once and is held to it."""
    caller = "test:cut"
    for _ in range(server.MAX_PER_CALLER):
        frames = role.start(cs["query"], caller)
        next(frames)
        frames.close()
    assert len(role) == 0
    with pytest.raises(server.TooManySessions, match="abandoned 2 recently") as e:
        role.start(cs["query"], caller)
    assert e.value.per_caller
