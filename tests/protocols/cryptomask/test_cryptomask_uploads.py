"""Concurrent uploads of one Alg. 3 round at the cryptomask CS (issue 35 A1), over real loopback HTTP: one upload per
identification at a time (a second is refused before its body is read), the bytes being received counted against the
CS's memory budget (``--memory-budget``; 503 past it), and a stalled upload cut (408) so the identification goes
on. Before, every concurrent upload of the same round was buffered in full, and nothing timed out a slow one."""
import io
import socket
import time
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest

from privface.crypto.exchange import Party, Wire
from privface.crypto.otext import SoftSpokenReceiver
from privface.errors import PrivfaceError
from privface.protocols.common import read_message
from privface.protocols.cryptomask.messages import HEAD_LIMIT, Query, RoundHead, Started, round_frames
from privface.protocols.cryptomask.parties import threshold
from privface.protocols.cryptomask.reveal import reveal_verifier
from privface.scale import NpySource, enrol
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.cryptomask import CryptoMaskService
from privface.service.clients.cryptomask import VerifierClient
from privface.service.launch import serve_in_thread
from privface.service.limits import BodyLimits, InFlight
from privface.store.sqlite import SQLiteStore
from privface.wire import FrameReader

OCTETS = {"content-type": "application/octet-stream"}
PATH = "/v1/cryptomask/identify/reveal"


@pytest.fixture(scope="module")
def cs(tmp_path_factory):
    """A toy gallery of 300 templates, its CS with API keys; bodies cut below 20 kB/s over 0.5 s windows; no
    per-caller cap on bytes in flight (so that only the CS's own limits are at work)."""
    root = tmp_path_factory.mktemp("cm-uploads")
    x = np.random.default_rng(5).standard_normal((300, 128))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(root / "faces.npy", x)
    gallery, keys_url = f"sqlite:///{root / 'gallery.db'}", f"sqlite:///{root / 'key.db'}"
    enrol(gallery, NpySource([str(root / "faces.npy")]), "cryptomask", key_store_url=keys_url, tau=0.5,
          insecure_test_params=True)
    with SQLiteStore(root / "cs.db") as store:
        keys = ApiKeys(store)
        svc = CryptoMaskService(store, gallery_url=gallery)
        app = create_app(store, [svc], keys=keys, body_limits=BodyLimits(30, 20_000, 0.5),
                         in_flight=InFlight(100, 1 << 40))
        with serve_in_thread(app) as url:
            yield dict(x=x, url=url, svc=svc, keys=keys, keys_url=keys_url, gallery=gallery, store=store)


def _round0(cs, key, i):
    """A started identification (distances read) and its verifier: (session id, round 0 body, the verifier's party)."""
    with VerifierClient(cs["url"], cs["keys_url"], api_key=key) as v:
        v._setup()
        with v.exchange("identify/start", Query(v._verifier.query(cs["x"][i]).to_bytes()).to_bytes()) as answer:
            started = read_message(Started, answer.frame(HEAD_LIMIT))
            d1, _ = v._distances(started.session, answer, Wire())
        r = SoftSpokenReceiver()
        ot = r.setup_response(started.ot_request)
        party = Party(reveal_verifier(r, d1, threshold(v._tau), Wire(), v.info.batch), "verifier")
        msg = party.start()
        length, frames = round_frames(RoundHead(started.session, 0, ot, [int(p.size) for p in msg]), msg)
        return started.session, b"".join(frames), party


def _post(cs, key, body: bytes, send: int) -> socket.socket:
    u = urlsplit(cs["url"])
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall((f"POST {PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/octet-stream\r\n"
               f"authorization: Bearer {key}\r\ncontent-length: {len(body)}\r\n\r\n").encode() + body[:send])
    return s


def _status(s: socket.socket, timeout: float = 10) -> tuple[int, bytes]:
    s.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data and (more := s.recv(65536)):
        data += more
    return int(data.split(b" ", 2)[1]), data


def _wait(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_one_upload_per_round_and_a_stalled_one_is_cut(cs):
    """A first upload of round 0 that stalls half-way holds the identification's exchange and its bytes in the budget;
    a second upload of the same round is refused (409) as soon as its head is read, the rest of its body never sent;
    the stalled one is cut with 408, which frees both, and the right round 0 then goes through."""
    role, key = cs["svc"].party, cs["keys"].create("verify")[1]
    sid, body, party = _round0(cs, key, 7)
    head = body[:4 + int.from_bytes(body[:4], "big")]
    first = _post(cs, key, body, len(body) // 2)
    _wait(lambda: role.in_flight == len(body) + role.round_limit)
    assert role._sessions[sid].exchange
    second = _post(cs, key, body, len(head))  # only the head: an answer comes without the body
    status, data = _status(second, 5)
    assert status == 409 and b"already being received" in data
    assert role.in_flight == len(body) + role.round_limit  # nothing more reserved
    status, data = _status(first)
    assert status == 408 and b"slower than" in data
    _wait(lambda: role.in_flight == 0)
    r = httpx.post(f"{cs['url']}{PATH}", content=body, timeout=30, headers={**OCTETS, "authorization": f"Bearer {key}"})
    assert r.status_code == 200
    reply = read_message(RoundHead, FrameReader(io.BytesIO(r.content).read).frame(HEAD_LIMIT))
    assert reply.session == sid and reply.round == 0 and role._sessions[sid].round == 1
    assert role.in_flight == 0 and not role._sessions[sid].exchange


def test_uploads_past_the_memory_budget_are_refused_before_their_body(cs, monkeypatch):
    """With the budget taken (here: lowered below one more exchange), a round's head gets 503 before its body is
    read, and nothing is reserved; at the default budget the same round goes through."""
    role, key = cs["svc"].party, cs["keys"].create("verify")[1]
    sid, body, _ = _round0(cs, key, 9)
    monkeypatch.setattr(role, "memory", len(body) + role.round_limit - 1)
    head = body[:4 + int.from_bytes(body[:4], "big")]
    status, data = _status(_post(cs, key, body, len(head)), 5)
    assert status == 503 and b"memory budget" in data and role.in_flight == 0
    monkeypatch.undo()
    r = httpx.post(f"{cs['url']}{PATH}", content=body, timeout=30, headers={**OCTETS, "authorization": f"Bearer {key}"})
    assert r.status_code == 200 and role._sessions[sid].round == 1


def test_the_budget_is_an_option_of_the_cs(cs, tmp_path):
    """``memory`` (``privface serve --memory-budget``) sets how many identifications run at once; a budget below one
    identification's need is refused at start."""
    svc = cs["svc"]
    need = 2 * svc.party.round_limit
    assert CryptoMaskService(cs["store"], gallery_url=cs["gallery"], memory=3 * need).party.max_sessions == 3
    with pytest.raises(PrivfaceError, match="--memory-budget"):
        CryptoMaskService(cs["store"], gallery_url=cs["gallery"], memory=need - 1)
    from privface.cli import build_parser
    from privface.cli.serve import _cryptomask_service_options

    a = build_parser().parse_args(["serve", "--protocol", "cryptomask", "--role", "cs", "--memory-budget", "2GiB"])
    assert _cryptomask_service_options(a)["memory"] == 2 << 30
    a = build_parser().parse_args(["serve", "--protocol", "cryptomask", "--role", "cs", "--ot-pool-memory", "1GiB"])
    assert _cryptomask_service_options(a)["pool_memory"] == 1 << 30
    one = CryptoMaskService(cs["store"], gallery_url=cs["gallery"], pool_memory=1 << 30).party.pools
    assert one.max_pools == min(16, (1 << 30) // one.pool_bytes)  # the Ferret pools' own budget
