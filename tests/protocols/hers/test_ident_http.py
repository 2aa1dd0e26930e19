"""ident over real loopback HTTP (issue 7, seed 003 §3.2): the key server (sk, from the gallery's key store) and
the local server (the persisted encrypted gallery) as two uvicorn servers with API keys; a client identifies.
Answers equal in-process ``privface identify`` for hers and idface-ckks; malformed, out-of-order and oversized
messages get 4xx and change no state; wrong scopes are refused. Toy ring (insecure_test_params), real SEAL."""
import hashlib
import sqlite3

import httpx
import numpy as np
import pytest

from privface.errors import PrivfaceError, ProtocolError
from privface.protocols.hers.messages import Attach, KeyDecision, Query, ScoreChunk
from privface.scale import Gallery, NpySource, enrol, identify
from privface.scale.ident import ATTACH_SPACE, CHUNK_BYTES, KeyRole, block_counts, chunk_blocks, score_frame_bytes
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.hers import KEY_LIMITS, IdentService
from privface.service.client import RemoteMessageError, ServiceError
from privface.service.clients.hers import IdentClient
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore
from privface.wire import MAX_MESSAGE_BYTES

OCTETS = {"content-type": "application/octet-stream"}
SETUPS = {"hers": (64, 2500, 1, 0.5), "idface-ckks": (128, 300, None, 12.0)}
"""d, n, blocks per chunk (1: several chunks), τ (hers: cosine; idface: 12 of the best possible 15 = min(α, β)
at d = 128)."""


def _dump(path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


@pytest.fixture(scope="module", params=sorted(SETUPS))
def servers(request, tmp_path_factory):
    scheme = request.param
    dim, n, chunk, tau = SETUPS[scheme]
    root = tmp_path_factory.mktemp(f"ident-{scheme}")
    x = np.random.default_rng(7).normal(size=(n, dim))
    np.save(root / "faces.npy", x)
    gallery, keys_url = f"sqlite:///{root / 'gallery.db'}", f"sqlite:///{root / 'key.db'}"
    enrol(gallery, NpySource([root / "faces.npy"]), scheme, key_store_url=keys_url, tau=tau,
          insecure_test_params=True)
    key_store, local_store = SQLiteStore(root / "key.db"), SQLiteStore(root / "local.db")
    key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
    internal = key_keys.create("internal", name="local server")[1]
    key = IdentService(key_store, role="key", insecure_test_params=True)
    with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
        local = IdentService(local_store, role="local", gallery_url=gallery, key_url=key_url, key_api_key=internal,
                             chunk=chunk)
        with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
            yield dict(scheme=scheme, x=x, root=root, gallery=gallery, keys_url=keys_url, key=key, local=local,
                       key_url=key_url, local_url=local_url, internal=internal, key_keys=key_keys,
                       local_keys=local_keys, client=local_keys.create("verify")[1])
    key_store.close()
    local_store.close()


def test_identify_over_http_equals_in_process(servers):
    s = servers
    rng = np.random.default_rng(1)
    n, dim = s["x"].shape
    probes = [s["x"][i] + 0.05 * rng.normal(size=dim) for i in (3, n - 1, n // 2)] + \
        [rng.normal(size=dim) for _ in range(2)]
    with IdentClient(s["local_url"], api_key=s["client"]) as client:
        got = [client.identify(p) for p in probes]
    want = [identify(p, s["gallery"], key_store_url=s["keys_url"])["id"] for p in probes]
    assert got == want
    assert got[:3] == [f"faces.{i}" for i in (3, n - 1, n // 2)] and got[3:] == [None, None]  # match and reject
    assert s["key"].party._pending == {}


def _chunks(s, probe):
    """The ScoreChunks the local server sends for ``probe`` (one block per chunk)."""
    local = s["local"].party
    msg = local.local.identify_request(local.query(Query(np.asarray(probe, "<f8").tobytes()).to_bytes()))
    total = len(msg.counts)
    return [ScoreChunk(bytes(range(16)), b, total, msg.counts[b:b + 1], msg.arrays[b:b + 1].astype("<u8").tobytes())
            for b in range(total)]


def test_malformed_and_oversized_messages_change_no_state(servers):
    s = servers
    key, root = s["key"].party, s["root"]
    chunks = _chunks(s, s["x"][0])
    first, last = chunks[0], chunks[-1]
    post = lambda step, body: httpx.post(f"{s['key_url']}/v1/ident/{step}", content=body, timeout=60,  # noqa: E731
                                         headers={**OCTETS, "authorization": f"Bearer {s['internal']}"})
    if len(chunks) > 1:  # a request in progress survives bad chunks
        assert post("decide", first.to_bytes()).content == b""
    pending, before = dict(key._pending), _dump(root / "key.db")
    residues = np.frombuffer(last.residues, "<u8").copy()
    big = residues.copy()
    big[0] = np.uint64(2**64 - 1)  # not below its prime
    bad = [b"\x00garbage", last.to_bytes()[:-1],
           ScoreChunk(last.request_id, last.offset, last.total + 1, last.counts, last.residues),
           ScoreChunk(last.request_id, last.offset, last.total, [last.counts[0] + 1], last.residues),
           ScoreChunk(last.request_id, last.offset, last.total, last.counts, last.residues[:-8]),
           ScoreChunk(last.request_id, last.offset, last.total, last.counts, big.tobytes()),
           ScoreChunk(last.request_id[:8], last.offset, last.total, last.counts, last.residues)]
    if len(chunks) > 2:
        bad.append(ScoreChunk(last.request_id, len(chunks) - 1, last.total, last.counts, last.residues))  # skips one
    for body in bad:
        r = post("decide", body if isinstance(body, bytes) else body.to_bytes())
        assert r.status_code == 400 and r.json()["type"] == "MessageError", r.text
    assert post("decide", b"\x00" * (KEY_LIMITS["decide"] + 1)).status_code == 413
    other = Attach(s["scheme"], 64, None, 10, 1024, b"PFl" + bytes(100))  # not this key's public context
    assert post("attach", other.to_bytes()).status_code == 400
    assert key._pending == pending and _dump(root / "key.db") == before
    # the request still completes, with the answer the in-process key server gives
    for c in chunks[1:] if len(chunks) > 1 else chunks:
        r = post("decide", c.to_bytes())
    assert r.status_code == 200 and key._pending == {}
    decision = KeyDecision.from_bytes(r.content)
    assert decision.index == 0 and decision.request_id == first.request_id
    # the local server: a template of the wrong length, NaN, garbage
    local_before = _dump(root / "local.db")
    with IdentClient(s["local_url"], api_key=s["client"]) as client:
        huge = np.full(s["x"].shape[1], 1e300)  # ‖y‖ overflows: rescaled, a valid direction
        assert client.identify(huge) == identify(huge / 1e300, s["gallery"], key_store_url=s["keys_url"])["id"]
        for probe in (np.ones(s["x"].shape[1] + 1), np.full(s["x"].shape[1], np.nan), np.zeros(s["x"].shape[1])):
            with pytest.raises(RemoteMessageError):
                client.identify(probe)
        with pytest.raises(RemoteMessageError):
            client.step("identify", b"PFw\x01\x05\x03garbage")
    r = httpx.post(f"{s['local_url']}/v1/ident/identify", content=b"\x00" * 9000, timeout=60,
                   headers={**OCTETS, "authorization": f"Bearer {s['client']}"})
    assert r.status_code == 413
    assert _dump(root / "local.db") == local_before


def test_wrong_scopes_are_refused(servers):
    s = servers
    probe = Query(np.asarray(s["x"][0], "<f8").tobytes()).to_bytes()
    for scopes in ("enrol", "internal", "admin"):
        with IdentClient(s["local_url"], api_key=s["local_keys"].create(scopes)[1]) as c, \
                pytest.raises(ServiceError) as e:
            c.step("identify", probe)
        assert e.value.status == 403
    chunk = _chunks(s, s["x"][0])[0].to_bytes()
    for scopes in ("verify", "enrol", "admin"):  # only the local server's internal key reaches S_key
        other = s["key_keys"].create(scopes)[1]
        for step, body in (("decide", chunk), ("attach", b"")):
            r = httpx.post(f"{s['key_url']}/v1/ident/{step}", content=body, timeout=60,
                           headers={**OCTETS, "authorization": f"Bearer {other}"})
            assert r.status_code == 403, (scopes, step)
    with SQLiteStore(s["root"] / "other.db") as store:  # a local server without an internal key cannot start
        for api_key, status in ((None, 401), (s["key_keys"].create("verify")[1], 403)):
            with pytest.raises(ServiceError) as e:
                IdentService(store, role="local", gallery_url=s["gallery"], key_url=s["key_url"], key_api_key=api_key)
            assert e.value.status == status


def test_key_server_keeps_the_attachment_across_a_restart(servers):
    s = servers
    with SQLiteStore(s["root"] / "key.db") as store:
        assert store.get(ATTACH_SPACE, "default.attach") is not None
        again = KeyRole(store, insecure_test_params=True)  # a restarted key server: no new attach needed
        replies = [again.decide(c) for c in _chunks(s, s["x"][1])]
        assert replies[:-1] == [None] * (len(replies) - 1) and replies[-1].index == 1
        with pytest.raises(ProtocolError):  # a toy context is refused unless the key server allows toy parameters
            KeyRole(store)


def test_score_frames_of_a_million_template_gallery_fit_the_wire_frame():
    """Real parameters (N = 8192): a 2^20 gallery's IP_DB message is 19 idface (β = 63) or 256 hers blocks;
    whole blocks per chunk keep every frame under the 4 MiB frame."""
    from privface.protocols.idface import IDFaceParams
    from privface.protocols.idface.ckks import PAYLOAD_BITS

    idface_cap = 8192 * IDFaceParams.for_dim(512, 63).templates_per_slot(PAYLOAD_BITS)
    for scheme, capacity, block_bytes in (("idface-ckks", idface_cap, 2 * 2 * 8192 * 8), ("hers", 4096, 2 * 8192 * 8)):
        blocks = block_counts(2**20, capacity)
        per = chunk_blocks(block_bytes)
        frame = score_frame_bytes(scheme, 8192, per)
        assert per * block_bytes <= CHUNK_BYTES and frame <= MAX_MESSAGE_BYTES <= KEY_LIMITS["decide"]
        print({"scheme": scheme, "blocks": len(blocks), "blocks_per_chunk": per,
               "chunks": -(-len(blocks) // per), "frame_bytes": frame})
    assert len(block_counts(2**20, idface_cap)) == 19


def test_serve_command_wiring(servers, monkeypatch):
    """`privface serve --protocol ident --role key|local` options build the same services."""
    from privface.cli import build_parser
    from privface.cli.serve import _ident_service_options

    s = servers
    monkeypatch.setenv("PRIVFACE_KEY_API_KEY", s["internal"])
    args = build_parser().parse_args(["serve", "--protocol", "ident", "--role", "local", "--db", "sqlite:///x.db",
                                      "--gallery", s["gallery"], "--key-url", s["key_url"]])
    options = _ident_service_options(args)
    assert options["key_api_key"] == s["internal"] and options["gallery_url"] == s["gallery"]
    with SQLiteStore(s["root"] / "cli.db") as store:
        svc = IdentService(store, **options)
        assert svc.party.identify(Query(np.asarray(s["x"][2], "<f8").tobytes())).subject_id == "faces.2"
    key_args = build_parser().parse_args(["serve", "--protocol", "ident", "--role", "key", "--db", s["keys_url"],
                                          "--insecure-test-params"])
    monkeypatch.setenv("PRIVFACE_KEY_WORKERS", "3")  # the key server's decryption processes (scale.key_pool)
    assert _ident_service_options(key_args) == {"role": "key", "gallery_name": "default", "insecure_test_params": True,
                                                "key_workers": 3}
    key_args.key_workers = 1
    assert _ident_service_options(key_args)["key_workers"] == 1
    bad = build_parser().parse_args(["serve", "--protocol", "ident", "--role", "local", "--db", "sqlite:///x.db"])
    with pytest.raises(PrivfaceError, match="--key-url"):
        _ident_service_options(bad)
    assert hashlib.sha256(Gallery(s["gallery"]).pk_bytes).digest() == \
        s["key"].party._pk_sha256  # the key server holds the gallery's key


@pytest.mark.slow
def test_privface_serve_key_and_local_as_processes(tmp_path, monkeypatch):
    """`privface gallery enrol`, then `privface serve --protocol ident --role key|local` as child processes with
    API keys (the local server's internal key from $PRIVFACE_KEY_API_KEY); a client identifies."""
    from privface.cli import main
    from privface.service.launch import serve_subprocess

    x = np.random.default_rng(3).normal(size=(50, 128))
    np.save(tmp_path / "f.npy", x)
    gallery, keys_db, local_db = (f"sqlite:///{tmp_path / n}" for n in ("g.db", "g.keys.db", "local.db"))
    assert main(["gallery", "enrol", "--scheme", "idface-ckks", "--gallery", gallery, "--tau", "12",
                 "--centring", "none", "--lift", "0", "--insecure-test-params", "--json", str(tmp_path / "f.npy")]) == 0
    with SQLiteStore(tmp_path / "g.keys.db") as s:
        internal = ApiKeys(s).create("internal")[1]
    with SQLiteStore(tmp_path / "local.db") as s:
        client_key = ApiKeys(s).create("verify")[1]
    monkeypatch.setenv("PRIVFACE_KEY_API_KEY", internal)  # inherited by the local server's process
    with serve_subprocess("ident", keys_db, ["--role", "key", "--insecure-test-params"], auth=True) as key_url, \
            serve_subprocess("ident", local_db, ["--role", "local", "--gallery", gallery, "--key-url", key_url],
                             auth=True) as local_url, IdentClient(local_url, api_key=client_key) as client:
        assert client.identify(x[7]) == "f.7"
        assert client.identify(np.random.default_rng(5).normal(size=128)) is None


def test_privface_identify_cli_against_the_local_server(servers, tmp_path, capsys):
    """`privface identify --protocol ident --server URL probe.npy` answers as in-process identify (exit 0 / 1)."""
    import json

    from privface.cli import main

    s = servers
    n, dim = s["x"].shape
    rng = np.random.default_rng(5)
    for probe, want in ((s["x"][2] + 0.05 * rng.normal(size=dim), "faces.2"), (rng.normal(size=dim), None)):
        path = tmp_path / "probe.npy"
        np.save(path, probe)
        code = main(["identify", "--protocol", "ident", "--server", s["local_url"], str(path), "--json",
                     "--api-key", s["client"]])
        out = json.loads(capsys.readouterr().out)
        expected = (0 if want else 1, want, want is not None, "ident")
        assert (code, out["id"], out["accepted"], out["protocol"]) == expected
        assert out["bytes_sent"] > 0 and out["bytes_received"] > 0
    assert main(["identify", "--protocol", "ident", "--gallery", s["gallery"], str(path)]) == 2
    assert "goes with --server" in capsys.readouterr().err


def test_a_centred_and_lifted_idface_gallery_over_http(tmp_path):
    """A gallery enrolled with --centring shipped --lift 1024 (its meta holds μ and (D, seed)): S_local applies
    both to the query, S_key rebuilds α, β of the lift from the attach; answers equal in-process identify."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=(60, 128))
    np.save(tmp_path / "faces.npy", x)
    gallery, keys_url = f"sqlite:///{tmp_path / 'gallery.db'}", f"sqlite:///{tmp_path / 'key.db'}"
    enrol(gallery, NpySource([tmp_path / "faces.npy"]), "idface-ckks", key_store_url=keys_url, tau=200.0,
          insecure_test_params=True, centring="shipped", lift=1024)
    assert Gallery(gallery).settings.lift == 1024 and Gallery(gallery).settings.mean is not None
    with SQLiteStore(tmp_path / "key.db") as key_store, SQLiteStore(tmp_path / "local.db") as local_store:
        key_keys, local_keys = ApiKeys(key_store), ApiKeys(local_store)
        internal = key_keys.create("internal")[1]
        key = IdentService(key_store, role="key", insecure_test_params=True)
        with serve_in_thread(create_app(key_store, [key], keys=key_keys)) as key_url:
            local = IdentService(local_store, role="local", gallery_url=gallery, key_url=key_url,
                                 key_api_key=internal)
            with serve_in_thread(create_app(local_store, [local], keys=local_keys)) as local_url:
                probes = [x[i] + 0.05 * rng.normal(size=128) for i in (0, 31, 59)] + [rng.normal(size=128)]
                with IdentClient(local_url, api_key=local_keys.create("verify")[1]) as client:
                    got = [client.identify(p) for p in probes]
    want = [identify(p, gallery, key_store_url=keys_url)["id"] for p in probes]
    assert got == want and got[:3] == ["faces.0", "faces.31", "faces.59"]
