"""cryptomask (seed 001) as two parties: Alg. 3 split per party (CS = OT sender, verifier = OT receiver) against
the frozen interleaved version, and the CS role over real loopback HTTP with the verifier as its client."""
import numpy as np
import pytest

from privface.crypto.exchange import Party
from privface.crypto.millionaire import Wire
from privface.errors import CryptoError
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
    d = rng.integers(-(1 << 18), 1 << 18, m)
    for ts in (int(d.max()), int(d.max()) + 1, int(np.median(d))):
        d0, d1 = _shares(rng, d)
        w_old, w_new = Wire(), Wire()
        old = interleaved.reveal(*setup_ot(Wire()), d0, d1, ts, w_old)
        new = reveal(*setup_ot(Wire()), d0, d1, ts, w_new, batch=batch)
        assert new == old == bool((d >= ts).any())
        assert dict(w_new.bytes) == dict(w_old.bytes)


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

import httpx  # noqa: E402

from privface.protocols.cryptomask import encoding  # noqa: E402
from privface.protocols.cryptomask.messages import DistanceRequest, GalleryRequest, OTSetup, Query, RevealRound  # noqa: E402
from privface.scale import NpySource, enrol, identify  # noqa: E402
from privface.service.app import create_app  # noqa: E402
from privface.service.auth import ApiKeys  # noqa: E402
from privface.service.bindings.cryptomask import CryptoMaskService  # noqa: E402
from privface.service.client import RemoteMessageError, ServiceClient, ServiceError  # noqa: E402
from privface.service.clients.cryptomask import VerifierClient  # noqa: E402
from privface.service.launch import serve_in_thread  # noqa: E402
from privface.store.sqlite import SQLiteStore  # noqa: E402

OCTETS = {"content-type": "application/octet-stream"}
D, N = 128, 400


def _unit(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, D))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _near(x, seed, noise=0.3):
    y = x + noise * np.random.default_rng(seed).standard_normal(x.shape) / np.sqrt(x.size)
    return y / np.linalg.norm(y)


@pytest.fixture(scope="module")
def cs(tmp_path_factory):
    """A toy gallery of 400 templates (27 ciphertexts), its CS over loopback HTTP with API keys; 4 ciphertexts per
    DistanceChunk (7 chunks) and Alg. 3 batches of 128 entries (4 batches) so that every loop runs."""
    root = tmp_path_factory.mktemp("cm-http")
    x = _unit(N, 1)
    np.save(root / "faces.npy", x)
    gallery, keys_url = f"sqlite:///{root / 'gallery.db'}", f"sqlite:///{root / 'key.db'}"
    enrol(gallery, NpySource([str(root / "faces.npy")]), "cryptomask", key_store_url=keys_url,
          tau=0.5, insecure_test_params=True)
    with SQLiteStore(root / "cs.db") as store:
        keys = ApiKeys(store)
        svc = CryptoMaskService(store, gallery_url=gallery, chunk=4, batch=128)
        with serve_in_thread(create_app(store, [svc], keys=keys)) as url:
            yield dict(x=x, gallery=gallery, keys_url=keys_url, url=url, svc=svc, root=root,
                       verify=keys.create("verify")[1], enrol=keys.create("enrol")[1])


def _client(cs, **kw):
    return VerifierClient(cs["url"], cs["keys_url"], api_key=cs["verify"], **kw)


def test_bit_over_http_equals_in_process_and_plaintext(cs):
    """A match and a non-match: the verifier's bit over HTTP = ``privface identify --gallery`` in process = the
    quantised plaintext decision; the bytes of the Alg. 3 phases equal the in-process run's."""
    x = cs["x"]
    with _client(cs) as v:
        for y, expect in ((_near(x[123], 2), True), (_unit(1, 5)[0], False)):
            got = v.identify(y)
            local = identify(y, cs["gallery"], key_store_url=cs["keys_url"])
            plain = bool((encoding.quantize(x) @ encoding.quantize(y)).max() >= round(0.5 * (1 << 16)))
            assert got["match"] == local["match"] == plain == expect
            assert got["comm_bytes"] == local["comm_bytes"] and got["n"] == N and got["ciphertexts"] == 27
            assert got["rounds"] == 4 * 5 + 5  # per batch: ROTs, 3 tree levels, B2A; final: 4 + μ_0
    assert len(cs["svc"].party) == 0  # every session ended with its last round


def _begin(cs, http):
    """gallery, start, every distance chunk, base OTs: (session id, the verifier's first Alg. 3 message)."""
    from privface.crypto.otext import IKNPReceiver
    from privface.protocols.common import read_message
    from privface.protocols.cryptomask.messages import Started

    with _client(cs) as v:
        v._setup()
        q = v._verifier.query(_near(cs["x"][5], 3))
    started = read_message(Started, http.step("identify/start", Query(q.rows.astype("<u4").tobytes()).to_bytes()))
    for i in range(7):
        http.step("identify/distances", DistanceRequest(started.session, i).to_bytes())
    http.step("identify/ot", OTSetup(started.session, IKNPReceiver().setup_response(started.ot_request)).to_bytes())
    return started.session


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
            rows = v._verifier.query(x[0]).rows.astype("<u4")
        bad = rows.copy()
        bad.reshape(-1)[0] = cs["svc"].party.cs.basis.q[0]  # a residue not below its prime
        assert "prime" in refused("identify/start", Query(bad.tobytes()).to_bytes())
        assert "bytes of gadget rows" in refused("identify/start", Query(rows.tobytes()[:-4]).to_bytes())
        refused("identify/start", GalleryRequest().to_bytes())  # another message type
        refused("identify/start", b"\x00garbage")
        assert len(svc) == before  # no session opened
        sid = _begin(cs, http)
        s = svc._sessions[sid]
        assert "out of order" in refused("identify/distances", DistanceRequest(sid, 0).to_bytes())  # all fetched
        assert "out of order" in refused("identify/ot", OTSetup(sid, b"x").to_bytes())  # base OTs done already
        assert "unknown" in refused("identify/reveal", RevealRound(bytes(16), 0, []).to_bytes())
        assert "out of order" in refused("identify/reveal", RevealRound(sid, 1, []).to_bytes())
        assert "parts" in refused("identify/reveal", RevealRound(sid, 0, [b"\x00" * 10]).to_bytes())
        assert s.round == 0 and not s.party.done and len(svc) == before + 1  # the session is as it was
        refused("identify/reveal", b"\x00" * (MAX_BODY := cs["svc"].max_body["identify/reveal"] + 1), 413)
        assert MAX_BODY > 0 and s.round == 0


def test_out_of_order_steps_and_a_session_that_continues(cs):
    """A chunk asked out of order, the base OTs before the distances: 400, and the session then completes."""
    from privface.crypto.otext import IKNPReceiver
    from privface.protocols.common import read_message
    from privface.protocols.cryptomask.messages import Started

    with ServiceClient(cs["url"], "cryptomask", api_key=cs["verify"]) as http, _client(cs) as v:
        v._setup()
        q = v._verifier.query(cs["x"][9]).rows.astype("<u4").tobytes()
        started = read_message(Started, http.step("identify/start", Query(q).to_bytes()))
        sid = started.session
        response = IKNPReceiver().setup_response(started.ot_request)
        for step, body in (("identify/distances", DistanceRequest(sid, 3)), ("identify/ot", OTSetup(sid, response))):
            with pytest.raises(RemoteMessageError, match="out of order"):
                http.step(step, body.to_bytes())
        for i in range(7):
            http.step("identify/distances", DistanceRequest(sid, i).to_bytes())
        from privface.crypto.ot import ED25519, OTRequest, OTSender

        long_seeds = OTSender(ED25519).respond(OTRequest.from_bytes(started.ot_request), [(bytes(32), bytes(32))] * 128)
        with pytest.raises(RemoteMessageError, match="16 bytes"):  # refused before the base OTs are used up
            http.step("identify/ot", OTSetup(sid, long_seeds.to_bytes()).to_bytes())
        http.step("identify/ot", OTSetup(sid, response).to_bytes())
        assert cs["svc"].party._sessions[sid].party is not None


def test_unauthenticated_and_wrong_scope_are_refused(cs):
    body = GalleryRequest().to_bytes()
    for step in cs["svc"].steps:
        r = httpx.post(f"{cs['url']}/v1/cryptomask/{step}", content=body, headers=OCTETS, timeout=30)
        assert r.status_code == 401, step
        r = httpx.post(f"{cs['url']}/v1/cryptomask/{step}", content=body, timeout=30,
                       headers={**OCTETS, "authorization": f"Bearer {cs['enrol']}"})
        assert r.status_code == 403, step
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
            assert remote["comm_bytes"] == local["comm_bytes"] and remote["bytes_sent"] > remote["comm_bytes"] // 3
    from privface.cli import build_parser
    from privface.cli.serve import _cryptomask_service_options
    from privface.errors import PrivfaceError

    args = build_parser().parse_args(["serve", "--protocol", "cryptomask", "--role", "cs", "--db", cs["gallery"]])
    assert _cryptomask_service_options(args) == {"role": "cs", "gallery_url": cs["gallery"], "gallery_name": "default"}
    with pytest.raises(PrivfaceError, match="--role cs"):
        _cryptomask_service_options(build_parser().parse_args(["serve", "--protocol", "cryptomask", "--role", "key"]))
