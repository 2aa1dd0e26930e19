"""cryptomask (seed 001) as two parties: Alg. 3 split per party (CS = OT sender, verifier = OT receiver) against
the frozen interleaved version, and the CS role over real loopback HTTP with the verifier as its client."""
import contextlib

import numpy as np
import pytest

from privface.crypto.exchange import Party
from privface.crypto.millionaire import Wire
from privface.crypto.otext import SoftSpokenReceiver
from privface.errors import CryptoError, ProtocolError
from privface.protocols.cryptomask.params import COMPARE_BITS, TS_BOUND
from privface.protocols.cryptomask.reveal import reveal, reveal_cs, reveal_verifier, setup_ot
from tests.helpers import cm_reveal_interleaved as interleaved


def _shares(rng, d):
    d0 = rng.integers(0, 1 << 20, d.size)
    return d0, np.mod(d - d0, 1 << 20)


@pytest.mark.parametrize("m, batch", [(1, 1 << 15), (777, 1 << 15), (5000, 1 << 12), (5000, 64)])
def test_split_reveal_equals_interleaved_and_plaintext(m, batch):
    """Per-party Alg. 3: the same bit as the interleaved code and as plaintext [max d ≥ ts], and the same bytes
    per phase, for any batch size (a multiple of 64); a true and a false answer, and ts exactly at the maximum."""
    rng = np.random.default_rng(m + batch)
    d = rng.integers(-68_500, 68_500, m)  # inner products of unit vectors at 2^8 (params.COMPARE_BITS)
    for ts in (int(d.max()), int(d.max()) + 1, int(np.median(d)), -TS_BOUND, TS_BOUND):
        d0, d1 = _shares(rng, d)
        w_old, w_new = Wire(), Wire()
        old = interleaved.reveal(*setup_ot(Wire()), d0, d1, ts, w_old, ell=COMPARE_BITS)
        new = reveal(*setup_ot(Wire()), d0, d1, ts, w_new, batch=batch)
        assert new == old == bool((d >= ts).any())
        assert dict(w_new.bytes) == dict(w_old.bytes)


def test_a_threshold_outside_the_comparison_ring_is_refused():
    """|ts| ≤ 2^17 keeps |d − ts| inside the ring 2^COMPARE_BITS's signed range: the verifier refuses more."""
    for ts in (TS_BOUND + 1, -TS_BOUND - 1):
        with pytest.raises(ProtocolError, match="threshold"):
            next(reveal_verifier(SoftSpokenReceiver(), np.zeros(64, np.int64), ts, Wire(), 64))


def test_split_reveal_messages_are_checked_before_use():
    """A malformed message (wrong part count, wrong length, padding bits set) is refused and changes nothing:
    the same party then completes with the right message."""
    rng = np.random.default_rng(3)
    d = rng.integers(-1000, 1000, 300)
    d0, d1 = _shares(rng, d)
    S, R = setup_ot(Wire())
    v, cs = Party(reveal_verifier(R, d1, 500, Wire(), 64), "verifier"), Party(reveal_cs(S, d0, Wire(), 64), "CS")
    msg = v.start()
    cs.start()
    for bad in (msg[:-1], msg + [b""], [m[:-1] for m in msg]):
        with pytest.raises(CryptoError):
            cs.step(bad)
    while not v.done:
        reply = cs.step(msg)
        if cs.done:  # μ_0: one bit in one byte; a padding bit set is refused, then the real one is taken
            with pytest.raises(CryptoError):
                v.step([bytes([reply[0][0] | 2])])
            with pytest.raises(CryptoError):
                cs.step([])  # the CS has finished: nothing more is accepted
        msg = v.step(reply)
    assert v.result == bool((d >= 500).any()) and cs.done


# ------------------------------------------------------------------------------------------------ over HTTP

import io  # noqa: E402
import socket  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

import httpx  # noqa: E402

from privface.protocols.common import read_message  # noqa: E402
from privface.protocols.cryptomask import encoding  # noqa: E402
from privface.protocols.cryptomask.messages import (  # noqa: E402
    GalleryRequest,
    Query,
    RoundHead,
    Started,
    round_bytes,
    round_frames,
)
from privface.scale import NpySource, enrol, identify  # noqa: E402
from privface.service.app import create_app  # noqa: E402
from privface.service.auth import ApiKeys  # noqa: E402
from privface.service.bindings.cryptomask import CryptoMaskService  # noqa: E402
from privface.service.client import RemoteMessageError, ServiceClient, ServiceError  # noqa: E402
from privface.service.clients.cryptomask import VerifierClient  # noqa: E402
from privface.service.launch import serve_in_thread  # noqa: E402
from privface.store.sqlite import SQLiteStore  # noqa: E402
from privface.wire import FrameReader, framed  # noqa: E402

OCTETS = {"content-type": "application/octet-stream"}
D, N = 128, 2100
ROUNDS = 1 + 10  # the query with its distances, then Alg. 3 in one batch: ROTs, 3 tree levels, B2A; final: 4 + μ_0


def _unit(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, D))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _near(x, seed, noise=0.3):
    y = x + noise * np.random.default_rng(seed).standard_normal(x.shape) / np.sqrt(x.size)
    return y / np.linalg.norm(y)


def _serve_gallery(root, x, **options):
    """A toy gallery of ``x`` and its CS over loopback HTTP with API keys (a generator for a fixture)."""
    np.save(root / "faces.npy", x)
    gallery, keys_url = f"sqlite:///{root / 'gallery.db'}", f"sqlite:///{root / 'key.db'}"
    enrol(gallery, NpySource([str(root / "faces.npy")]), "cryptomask", key_store_url=keys_url,
          tau=0.5, insecure_test_params=True)
    with SQLiteStore(root / "cs.db") as store:
        keys = ApiKeys(store)
        svc = CryptoMaskService(store, gallery_url=gallery, **options)
        with serve_in_thread(create_app(store, [svc], keys=keys)) as url:
            yield dict(x=x, gallery=gallery, keys_url=keys_url, url=url, svc=svc, root=root, keys=keys,
                       verify=keys.create("verify")[1], enrol=keys.create("enrol")[1])


@pytest.fixture(scope="module")
def cs(tmp_path_factory):
    """A toy gallery of 2100 templates (9 stacks of 255, 2 packs of 8), its CS over loopback HTTP with API keys; one
    pack per DistanceChunk; Alg. 3 in one batch over every entry (the default)."""
    yield from _serve_gallery(tmp_path_factory.mktemp("cm-http"), _unit(N, 1), chunk=1)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A toy gallery of 30 templates: 1 stack, one DistanceChunk."""
    yield from _serve_gallery(tmp_path_factory.mktemp("cm-http-small"), _unit(30, 21), chunk=4)


def _client(cs, **kw):
    return VerifierClient(cs["url"], cs["keys_url"], **{"api_key": cs["verify"], **kw})


def test_bit_over_http_equals_in_process_and_plaintext(cs):
    """A match and a non-match on SoftSpokenOT: the verifier's bit over HTTP = ``privface identify --gallery`` in
    process = the quantised plaintext decision; the bytes of the Alg. 3 phases equal the in-process run's."""
    x = cs["x"]
    with _client(cs, ot="softspoken") as v:
        for i, (y, expect) in enumerate(((_near(x[123], 2), True), (_unit(1, 5)[0], False))):
            before = len(v.stats)
            got = v.identify(y)
            local = identify(y, cs["gallery"], key_store_url=cs["keys_url"])
            plain = bool((encoding.quantize(x) @ encoding.quantize(y)).max() >= round(0.5 * (1 << 16)))
            assert got["match"] == local["match"] == plain == expect
            assert got["comm_bytes"] == local["comm_bytes"] and got["n"] == N and got["ciphertexts"] == 9
            assert got["rounds"] == len(v.stats) - before == ROUNDS + (i == 0)  # gallery: once per client
            assert got["exchanges"] == {**({"gallery": 1} if i == 0 else {}), "identify/start": 1,
                                        "identify/reveal": 10}
    assert len(cs["svc"].party) == 0  # every session ended with its last round


def test_ferret_over_http_equals_in_process_ferret(cs):
    """Issue 40: Alg. 3 on Ferret over HTTP (the default): the same bit as plaintext, and per phase exactly the bytes
    of ``CryptoMask`` in process on Ferret (its refill share ``ot_refill`` included), the same exchanges as on
    SoftSpokenOT; the pool is set up once and refilled between identifications, outside their exchanges."""
    from privface.protocols.cryptomask import CryptoMask

    x = cs["x"]
    cm = CryptoMask(D, tau=0.5, insecure_test_params=True)
    cm.enrol(x)
    with _client(cs) as v:
        for i, (y, expect) in enumerate(((_near(x[77], 4), True), (_unit(1, 6)[0], False), (x[5], True))):
            got = v.identify(y)
            local = cm.identify(y)
            plain = bool((encoding.quantize(x) @ encoding.quantize(y)).max() >= cm.ts)
            assert got["match"] == local.match == plain == expect
            assert got["bytes_per_phase"] == local.bytes and got["comm_bytes"] == local.comm_bytes
            assert got["ot"] == "ferret" and "ot_setup" not in got["bytes_per_phase"]
            assert got["exchanges"] == {**({"gallery": 1} if i == 0 else {}), "identify/start": 1,
                                        "identify/reveal": 10}
            assert got["ot_exchanges"]["ot/refill"] >= 1  # toy set: 800 COTs per iteration, so every run refills
            assert ("ot/setup" in got["ot_exchanges"]) == (i == 0)  # one setup per client
    assert len(cs["svc"].party) == 0 and len(cs["svc"].party.pools) >= 1


def test_exchanges_do_not_grow_with_the_gallery(cs, small):
    """Issue 20: the HTTP request/response pairs of an identification are the same for 30 templates (1 distance
    chunk) and 2100 (2 chunks): one start with every chunk in its streamed
    answer, Alg. 3 in one batch, the base OTs riding on its round 0."""
    runs = {}
    for c in (small, cs):
        with _client(c) as v:
            got = v.identify(c["x"][7])
            protocol = [st for st in v.stats if not st.step.startswith("ot/")]  # not Ferret's setup and refills
            assert got["match"] and len(protocol) == got["rounds"] == 1 + ROUNDS
            assert all(s.status == 200 for s in v.stats)
            runs[c["svc"].party.chunks] = (got["rounds"], got["exchanges"])
    assert set(runs) == {1, 2} and runs[1] == runs[2]


def _start(cs, http, seed=3):
    """A valid start (its whole streamed answer read): (Started, the answer's frames after it)."""
    with _client(cs) as v:
        v._setup()
        q = v._verifier.query(_near(cs["x"][5], seed))
    answer = FrameReader(io.BytesIO(http.step("identify/start", Query(q.to_bytes()).to_bytes())).read)
    started = read_message(Started, answer.frame())
    chunks = []
    with contextlib.suppress(Exception):
        while True:
            chunks.append(answer.frame())
    return started, chunks


def _round(sid, r, parts, ot=b""):
    length, frames = round_frames(RoundHead(sid, r, ot, [len(p) for p in parts]), parts)
    body = b"".join(frames)
    assert len(body) == length
    return body


def _expected(cs, sid):
    """The part sizes the CS's Alg. 3 side waits for in session ``sid`` (white box)."""
    return [p.nbytes for p in cs["svc"].party._sessions[sid].party.expect]


def _raw(url, head: bytes, body: bytes, timeout=20.0) -> tuple[int, bytes]:
    """POST with hand-made headers over a plain socket (a lying Content-Length, a body cut short): (status, body)."""
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=timeout) as sock:
        sock.sendall(head + body)
        data = b""
        while b"\r\n\r\n" not in data and (more := sock.recv(65536)):
            data += more
        top, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(h.split(b":")[1]) for h in top.split(b"\r\n") if h.lower().startswith(b"content-length")), 0)
        while len(rest) < length and (more := sock.recv(65536)):
            rest += more
        return int(top.split(b" ", 2)[1]), rest


def _post_head(url, key, path, length, chunked=False):
    te = "transfer-encoding: chunked" if chunked else f"content-length: {length}"
    return (f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/octet-stream\r\n"
            f"authorization: Bearer {key}\r\n{te}\r\n\r\n").encode()


def test_bad_messages_get_400_and_change_nothing(cs):
    svc, x = cs["svc"].party, cs["x"]
    with ServiceClient(cs["url"], "cryptomask", api_key=cs["verify"]) as http:
        def refused(step, body, status=400):
            with pytest.raises(ServiceError) as e:
                http.step(step, body)
            assert e.value.status == status, (step, e.value)
            return str(e.value)

        before = len(svc)
        with _client(cs) as v:
            v._setup()
            q = v._verifier.query(x[0])
        bad = q.rows.copy()
        bad.reshape(-1)[0] = cs["svc"].party.cs.basis.q[0]  # a residue not below its prime
        assert "prime" in refused("identify/start", Query(type(q)(bad, q.seed).to_bytes()).to_bytes())
        assert "bytes of query rows" in refused("identify/start", Query(q.to_bytes()[:-4]).to_bytes())
        refused("identify/start", GalleryRequest().to_bytes())  # another message type
        refused("identify/start", b"\x00garbage")
        assert len(svc) == before  # no session opened
        started, chunks = _start(cs, http)
        sid = started.session
        assert len(chunks) == 2
        s = svc._sessions[sid]
        want = _expected(cs, sid)
        zeros = [bytes(n) for n in want]
        ot = SoftSpokenReceiver().setup_response(started.ot_request)
        assert "unknown" in refused("identify/reveal", _round(bytes(16), 0, zeros, ot))
        assert "out of order" in refused("identify/reveal", _round(sid, 1, zeros))
        assert "expected" in refused("identify/reveal", _round(sid, 0, [b"\x00" * 10], ot))  # other part sizes
        assert "round 0" in refused("identify/reveal", _round(sid, 0, zeros))  # no base-OT response
        refused("identify/reveal", framed(b"\x00garbage"))  # a frame that is no RoundHead
        assert "first frame of 6775154 bytes" in refused("identify/reveal", b"\x00garbage", 413)  # read as a length
        refused("identify/reveal", b"\x00\x00")  # ends inside the length
        refused("identify/reveal", _round(sid, 0, zeros, ot)[:-5])  # the last piece cut short
        assert "accepts" in refused("identify/reveal", _round(sid, 0, zeros, ot) + framed(b"x"), 413)  # a byte too many
        assert s.round == 0 and not s.party.done and len(svc) == before + 1  # the session is as it was
        cap = cs["svc"].max_body["identify/reveal"]
        refused("identify/reveal", b"\x00" * (cap + 1), 413)
        assert s.round == 0


def test_streamed_bodies_are_bounded_by_the_callers_own_next_round(cs):
    """A caller with a valid key lying about sizes: the CS reads a round's head alone, checks it against the caller's
    session, and then reads at most the exact size of that round — a Content-Length beyond it, or a chunked body
    running past it, gets 413 without the rest being read; a head for no session gets 400 before the body is read;
    a body cut short gets 400. None of them changes the session."""
    svc, key = cs["svc"].party, cs["keys"].create("verify")[1]
    with ServiceClient(cs["url"], "cryptomask", api_key=key) as http:
        started, _ = _start(cs, http)
    sid = started.session
    want = _expected(cs, sid)
    ot = SoftSpokenReceiver().setup_response(started.ot_request)
    body = _round(sid, 0, [bytes(n) for n in want], ot)
    exact = len(body)
    cap = cs["svc"].max_body["identify/reveal"]
    assert exact <= cap < 16 << 20  # the step's cap comes from this gallery (2000 entries), not the global one
    path = "/v1/cryptomask/identify/reveal"
    head = body[:4 + int.from_bytes(body[:4], "big")]
    # a declared size over the step's cap: refused before anything is read
    status, answer = _raw(cs["url"], _post_head(cs["url"], key, path, 1 << 40), b"")
    assert status == 413
    # a head for a session that is not the caller's, declaring the step's whole cap: 400 before the body is read
    other = _round(bytes(16), 0, [bytes(n) for n in want], ot)
    other_head = other[:4 + int.from_bytes(other[:4], "big")]
    status, answer = _raw(cs["url"], _post_head(cs["url"], key, path, cap), other_head)
    assert status == 400 and b"unknown cryptomask session" in answer
    # a valid head declaring one byte more than its round: 413 (the head alone was read)
    status, answer = _raw(cs["url"], _post_head(cs["url"], key, path, exact + 1), head)
    assert status == 413 and str(exact).encode() in answer
    # chunked, running 256 KiB past its round: 413 once it passes the exact size
    extra = body + bytes(256 << 10)
    chunks = b"".join(f"{len(extra[i:i + 65536]):x}\r\n".encode() + extra[i:i + 65536] + b"\r\n"
                      for i in range(0, len(extra), 65536)) + b"0\r\n\r\n"
    status, answer = _raw(cs["url"], _post_head(cs["url"], key, path, 0, chunked=True), chunks)
    assert status == 413
    # the exact size declared, the body cut short (chunked, ends early): 400
    cut = body[:-100]
    status, answer = _raw(cs["url"], _post_head(cs["url"], key, path, 0, chunked=True),
                          f"{len(cut):x}\r\n".encode() + cut + b"\r\n0\r\n\r\n")
    assert status == 400
    s = svc._sessions[sid]
    assert s.round == 0 and not s.party.done and s.party.expect is not None


def test_a_distances_stream_not_read_to_its_end_ends_its_session(cs):
    """The start's answer is computed chunk by chunk as it is sent: before its last chunk no round is accepted, and a
    stream closed early (the verifier went away, or stalled past the service's send timeout) ends the session."""
    role, caller = cs["svc"].party, "test:abandon"
    with _client(cs) as v:
        v._setup()
        query = Query(v._verifier.query(cs["x"][1]).to_bytes()).to_bytes()
    frames = role.start(query, caller)
    sid = read_message(Started, next(frames)[4:]).session
    next(frames)  # chunk 0 of 2
    assert role._sessions[sid].party is None
    with pytest.raises(ProtocolError, match="read every distance chunk first"):
        role.admit_round(RoundHead(sid, 0, b"x", []).to_bytes(), caller)
    frames.close()
    assert sid not in role._sessions


def test_base_ot_response_is_checked_before_use(cs):
    """Round 0's base-OT response with 32-byte seeds, or without SoftSpokenOT's tag (a verifier from before it, on
    IKNP), or for another k: 400 before the base OTs are used up; the session is as it was."""
    from privface.crypto import otext
    from privface.crypto.ot import ED25519, OTRequest, OTSender

    with ServiceClient(cs["url"], "cryptomask", api_key=cs["keys"].create("verify")[1]) as http:
        started, _ = _start(cs, http, seed=9)
        sid = started.session
        zeros = [bytes(n) for n in _expected(cs, sid)]
        k, body = otext._split(started.ot_request, "request")
        assert k == otext.SOFTSPOKEN_K
        long_seeds = OTSender(ED25519).respond(OTRequest.from_bytes(body), [(bytes(32), bytes(32))] * 128)
        with pytest.raises(RemoteMessageError, match="16 bytes"):
            http.step("identify/reveal", _round(sid, 0, zeros, otext._header(k) + long_seeds.to_bytes()))
        bare = OTSender(ED25519).respond(OTRequest.from_bytes(body), [(bytes(16), bytes(16))] * 128).to_bytes()
        with pytest.raises(RemoteMessageError, match="another OT extension"):
            http.step("identify/reveal", _round(sid, 0, zeros, bare))
        with pytest.raises(RemoteMessageError, match="k = 8, not 4"):
            http.step("identify/reveal", _round(sid, 0, zeros, otext._header(8) + bare))
        assert cs["svc"].party._sessions[sid].round == 0


@pytest.mark.parametrize("m", [1, 64, 1000, 5000])
def test_every_alg3_round_fits_the_gallery_bound(m):
    """``server.max_round_bytes`` (the reveal step's cap for a gallery of m entries) covers every message of Alg. 3 in
    one batch, either way, framed with the largest head (the base-OT response)."""
    from privface.protocols.cryptomask.messages import HEAD_LIMIT
    from privface.protocols.cryptomask.server import max_round_bytes

    rng = np.random.default_rng(m)
    d0, d1 = _shares(rng, rng.integers(-1000, 1000, m))
    S, R = setup_ot(Wire())
    b = -(-m // 64) * 64
    v, c = Party(reveal_verifier(R, d1, 500, Wire(), b), "v"), Party(reveal_cs(S, d0, Wire(), b), "c")
    msg, sizes = v.start(), []
    c.start()
    while not v.done:
        reply = c.step(msg)
        sizes += [round_bytes(HEAD_LIMIT, [p.size for p in x]) for x in (msg, reply)]
        msg = v.step(reply)
    assert len(sizes) == 20 and max(sizes) <= max_round_bytes(m)


def test_round_body_size_is_exact():
    parts = [bytes(5), bytes((3 << 20) + 7), b"", bytes(3 << 20)]
    length, frames = round_frames(RoundHead(bytes(16), 2, b"", [len(p) for p in parts]), parts)
    body = b"".join(frames)
    assert len(body) == length == round_bytes(len(RoundHead(bytes(16), 2, b"", [len(p) for p in parts]).to_bytes()),
                                              [len(p) for p in parts])


def test_unauthenticated_and_wrong_scope_are_refused(cs):
    body = GalleryRequest().to_bytes()
    for step in cs["svc"].steps:
        r = httpx.post(f"{cs['url']}/v1/cryptomask/{step}", content=body, headers=OCTETS, timeout=30)
        assert r.status_code == 401, step
        r = httpx.post(f"{cs['url']}/v1/cryptomask/{step}", content=body, timeout=30,
                       headers={**OCTETS, "authorization": f"Bearer {cs['enrol']}"})
        assert r.status_code == (400 if step == "gallery/add" else 403), step  # enrol adds (a bad body here)
    with pytest.raises(ServiceError) as e:
        VerifierClient(cs["url"], cs["keys_url"]).identify(cs["x"][0])
    assert e.value.status == 401


def test_a_foreign_key_store_is_refused(cs, tmp_path):
    """The verifier accepts the CS's pk only if its key store recorded that pk's SHA-256."""
    other = tmp_path / "other.npy"
    np.save(other, _unit(20, 8))
    enrol(f"sqlite:///{tmp_path / 'g2.db'}", NpySource([str(other)]), "cryptomask",
          key_store_url=f"sqlite:///{tmp_path / 'k2.db'}", tau=0.5, insecure_test_params=True)
    from privface.scale.gallery import GalleryError

    with pytest.raises(GalleryError, match="another gallery"):
        VerifierClient(cs["url"], f"sqlite:///{tmp_path / 'k2.db'}", api_key=cs["verify"]).identify(cs["x"][0])


def test_privface_serve_cs_and_identify_cli(cs, tmp_path, capsys):
    """`privface serve --protocol cryptomask --role cs --gallery URL` as a child process with API keys, and
    `privface identify --protocol cryptomask --server URL --key-store URL probe.npy`: the same JSON answer as
    `privface identify --gallery` (exit 0 match, 1 no match)."""
    import json

    from privface.cli import main
    from privface.service.launch import serve_subprocess

    db = f"sqlite:///{tmp_path / 'cs.db'}"
    with SQLiteStore(tmp_path / "cs.db") as s:
        key = ApiKeys(s).create("verify")[1]
    with serve_subprocess("cryptomask", db, ["--role", "cs", "--gallery", cs["gallery"]], auth=True) as url:
        for y, want in ((_near(cs["x"][300], 6), True), (_unit(1, 7)[0], False)):
            np.save(tmp_path / "probe.npy", y)
            code = main(["identify", "--protocol", "cryptomask", "--server", url, "--key-store", cs["keys_url"],
                         str(tmp_path / "probe.npy"), "--json", "--api-key", key])
            remote = json.loads(capsys.readouterr().out)
            local_code = main(["identify", "--gallery", cs["gallery"], "--key-store", cs["keys_url"],
                               str(tmp_path / "probe.npy"), "--json"])
            local = json.loads(capsys.readouterr().out)
            assert code == local_code == (0 if want else 1)
            assert (remote["match"], remote["accepted"], remote["id"], remote["answer"]) == \
                (local["match"], local["accepted"], None, local["answer"]) and remote["match"] == want
            # the server's verifier runs Alg. 3 on Ferret (its pool set up and refilled first), ``--gallery`` on
            # SoftSpokenOT set up per identification: Alg. 2's bytes are the same, Alg. 3's differ
            assert remote["ot"] == "ferret" and all(remote["bytes_per_phase"][k] == local["bytes_per_phase"][k]
                                                    for k in ("query", "distances"))
            # (fewer at the regular set; the toy set's refills cost 4.2 B per COT)
            assert remote["bytes_sent"] > remote["comm_bytes"] // 3
    from privface.cli import build_parser
    from privface.cli.serve import _cryptomask_service_options
    from privface.errors import PrivfaceError

    args = build_parser().parse_args(["serve", "--protocol", "cryptomask", "--role", "cs", "--db", cs["gallery"]])
    assert _cryptomask_service_options(args) == {"role": "cs", "gallery_url": cs["gallery"], "gallery_name": "default",
                                                 "memory": None, "pool_memory": None}
    with pytest.raises(PrivfaceError, match="--role cs"):
        _cryptomask_service_options(build_parser().parse_args(["serve", "--protocol", "cryptomask", "--role", "key"]))


def test_identify_cli_variant_wo_names_the_best_entry(small, tmp_path, capsys):
    """`privface identify --gallery G --variant wo` (CryptoMask-WO, seed 001 Fig. 2): the verifier decrypts every
    distance, so it names the best entry — the quantised plaintext's argmax — with the same bit as W; only the query
    and the distances cross (no Alg. 3); over HTTP the variant is refused with a clear message."""
    import json

    from privface.cli import main
    from privface.protocols.cryptomask import encoding
    from privface.scale.cryptomask_gallery import CMGallery

    ids = CMGallery(small["gallery"]).ids()
    for y, want in ((_near(small["x"][7], 8), True), (_unit(1, 9)[0], False)):
        np.save(tmp_path / "probe.npy", y)
        out = {}
        for v in ("w", "wo"):
            code = main(["identify", "--gallery", small["gallery"], "--key-store", small["keys_url"],
                         str(tmp_path / "probe.npy"), "--json", "--variant", v])
            out[v] = json.loads(capsys.readouterr().out)
            assert code == (0 if want else 1) and out[v]["match"] == want and out[v]["variant"] == v
        scores = encoding.quantize(small["x"]) @ encoding.quantize(y)
        assert out["wo"]["id"] == (ids[int(np.argmax(scores))] if want else None) and out["w"]["id"] is None
        assert set(out["wo"]["bytes_per_phase"]) == {"query", "distances"} and out["wo"]["rounds"] == 1
        assert out["wo"]["comm_bytes"] < out["w"]["comm_bytes"]
    assert main(["identify", "--protocol", "cryptomask", "--server", small["url"], "--key-store", small["keys_url"],
                 str(tmp_path / "probe.npy"), "--variant", "wo"]) == 2
    assert "--variant wo runs against a local cryptomask gallery (--gallery)" in capsys.readouterr().err
