"""The browser's im2020 client (web/src, run under Node) against the Python codec and Server party."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from privface.crypto.joye_libert import JoyeLibertPrivateKey
from privface.protocols.im2020 import Im2020Params
from privface.protocols.im2020.messages import (
    AuthChallenge,
    AuthFinish,
    AuthStart,
    ClientKey,
    EnrolRequest,
    RevokeProof,
    RevokeStart,
)
from privface.protocols.im2020.parties import Client, Server
from privface.service.clients.im2020 import key_record
from privface.store import open_store
from privface.wire import codec
from privface.wire.codec import SCHEMA, encode

from .node_driver import NodeDriver


@pytest.fixture(scope="module")
def node():
    d = NodeDriver()
    yield d
    d.close()


def _value(spec: dict, rng: random.Random, ctx: dict | None = None):
    """A random valid value of a resolved schema type (``ctx``: the message's fields so far, for uint widths)."""
    t = spec["type"]
    if t == "width":
        return rng.choice([1, rng.randint(1, min(spec["max"], 48))])
    if t == "uint":
        size = (ctx[spec["width"]] if isinstance(spec["width"], str) else spec["width"]) * spec.get("times", 1)
        return rng.choice([0, 1, 2 ** (8 * size) - 1, rng.getrandbits(8 * size)])
    if t == "bool":
        return rng.random() < 0.5
    if t in codec._FIXED_RANGE:
        lo, hi = codec._FIXED_RANGE[t]
        return rng.choice([lo, hi, rng.randint(lo, hi)])
    if t == "bytes":
        return rng.randbytes(rng.randint(0, min(spec["max"], 40)))
    if t == "str" and spec.get("pattern", "").startswith("^("):
        return rng.choice(spec["pattern"][2:-2].split("|"))
    if t == "str":
        return "".join(rng.choice("abcXYZ09._@+-") for _ in range(rng.randint(1, min(spec["max"], 20))))
    if t == "bigint":
        return rng.choice([0, 1, rng.getrandbits(8 * spec["max"])])
    if t == "list":
        return [_value(spec["of"], rng, ctx) for _ in range(rng.randint(0, min(spec["max"], 4)))]
    if t == "optional":
        return None if rng.random() < 0.3 else _value(spec["of"], rng, ctx)
    raise AssertionError(t)


def test_codec_every_message_roundtrips_byte_identical(node):
    """Python encodes every message of the schema; TypeScript decodes and re-encodes the same bytes."""
    rng = random.Random(19)
    for name, (_, fields) in codec._BY_NAME.items():
        for _ in range(3):
            values: dict = {}
            for f, spec in fields:
                values[f] = _value(spec, rng, values)
            data = encode(name, values)
            out = node(cmd="roundtrip", hex=data.hex())
            assert out.get("name") == name and out["hex"] == data.hex(), (name, out.get("error"))
    assert len(codec._BY_NAME) == len(SCHEMA["messages"])


@pytest.mark.parametrize("bad", [
    encode("im2020.EnrolResponse", {"subject_id": "a", "replaced": True})[:-1],  # cut short
    encode("im2020.AuthFinish", {"blinded_score": 5}) + b"\x00",  # trailing byte
    b"PFw\x01\x01\x05\x00\x02\x00\x05",  # AuthFinish bigint with a leading zero byte
    b"XYz\x01\x01\x05",  # bad magic
    b"PFw\x02\x01\x05\x00\x00",  # version
    encode("im2020.RevokeRequest", {"subject_id": "ok"}).replace(b"ok", b"o!"),  # pattern
    encode("gsm.Reply", {"x_bytes": 3, "x": 5})[:-1],  # a fixed-width integer one byte short
    encode("gsm.Reply", {"x_bytes": 3, "x": 5}) + b"\x00",  # … one byte long
    b"PFw\x01\x02\x12\x00\x00\x00",  # Reply of width 0
    b"PFw\x01\x02\x04\x00\x01\x05",  # retired gsm wire v1 Reply (id 516)
])
def test_codec_refuses_what_python_refuses(node, bad):
    with pytest.raises(codec.WireError):
        codec.decode(bad)
    assert node(cmd="roundtrip", hex=bad.hex())["type"] == "WireError"


def _params_json(params: Im2020Params) -> dict:
    from privface.service.web import params_json

    return params_json(params)  # /app/params.json, with the server's face backend (issue 36)


def _templates(rng: np.random.Generator, dims: int):
    x = rng.normal(size=dims)
    x = x / np.linalg.norm(x) * 1.4 / np.sqrt(1)  # norm like dlib embeddings (~1.4)
    gamma = np.floor(x * 128).clip(-128, 128).astype(int)
    near = (gamma + rng.integers(-3, 4, size=dims)).clip(-128, 128)
    far = np.floor(rng.normal(size=dims) / 8 * 128).clip(-128, 128).astype(int)
    return gamma.tolist(), near.tolist(), far.tolist()


@pytest.mark.realsize
@pytest.mark.parametrize("gmp", [True, False], ids=["gmp-wasm", "bigint"])
def test_browser_client_against_python_server_112(node, gmp):
    """JL_112 keys made by the TypeScript client load in Python (key file); its enrolment and C′ pass the
    Server's validation; its s* unblinds to exactly the SED of the templates; decisions follow s < τ."""
    assert node(cmd="backend", name="gmp" if gmp else "bigint")["backend"] == ("gmp-wasm" if gmp else "bigint")
    params = Im2020Params()
    pj = _params_json(params)
    key = node(cmd="keygen", jl=pj["jl"], params=pj, id="alice", server="http://127.0.0.1:1")["key"]
    record = ClientKey.from_bytes(bytes.fromhex(key))
    sk = JoyeLibertPrivateKey.from_primes(record.p, record.q, record.k, record.y)  # Python's own checks
    assert sk.public_key.n.bit_length() == 2048 and record.k == 136 and int(sk.p).bit_length() == 768
    server = Server(open_store("sqlite://"), params)
    gamma, near, far = _templates(np.random.default_rng(1), params.dims)
    reg = node(cmd="enrol", key=key, params=pj, template=gamma)
    server.enrol(EnrolRequest.from_bytes(bytes.fromhex(reg["hex"])))
    for probe in (near, far, gamma):
        sed = sum((a - b) ** 2 for a, b in zip(gamma, probe))
        start = node(cmd="auth_start", key=key, params=pj, template=probe)
        challenge, session = server.auth_start(AuthStart.from_bytes(bytes.fromhex(start["hex"])))
        fin = node(cmd="finish", key=key, params=pj, challenge=challenge.to_bytes().hex())
        result, decision = server.auth_finish(session, AuthFinish.from_bytes(bytes.fromhex(fin["hex"])))
        assert decision.score == sed
        assert result.accepted == (sed < params.tau)


@pytest.mark.realsize
def test_python_key_file_drives_browser_client(node):
    """A key file written by the Python client (the CLI's format) drives the TypeScript client, and its s*
    equals the Python client's decryption of the same S*."""
    params = Im2020Params()
    pj = _params_json(params)
    client = Client("bob", params)
    key = key_record(client, "http://127.0.0.1:1").to_bytes().hex()
    server = Server(open_store("sqlite://"), params)
    gamma, near, _ = _templates(np.random.default_rng(2), params.dims)
    reg = node(cmd="enrol", key=key, params=pj, template=gamma)
    server.enrol(EnrolRequest.from_bytes(bytes.fromhex(reg["hex"])))
    challenge, _ = server.auth_start(client.auth_start(near))
    fin = node(cmd="finish", key=key, params=pj, challenge=challenge.to_bytes().hex())
    assert int(fin["s_star"]) == client.blinded_score(AuthChallenge.from_bytes(challenge.to_bytes()))


def test_browser_client_proves_key_possession_to_revoke(node):
    """The TypeScript client answers the Python Server's revocation challenge (revoke/start): the server accepts
    its ρ; a challenge holding a stored β_i instead (a server fishing for a decryption) gets no answer."""
    params = Im2020Params.toy()
    pj = _params_json(params)
    client = Client("kim", params)
    key = key_record(client, "http://127.0.0.1:1").to_bytes().hex()
    store = open_store("sqlite://")
    server = Server(store, params)
    server.enrol(client.enrol(_templates(np.random.default_rng(3), params.dims)[0]))
    challenge, session = server.revoke_start(RevokeStart("kim"))
    fishing = dataclasses.replace(challenge, ciphertext=EnrolRequest.from_bytes(store.get("im2020", "kim")).c_beta[0])
    refused = node(cmd="revoke_proof", key=key, params=pj, challenge=fishing.to_bytes().hex())
    assert refused["type"] == "ProtocolError" and "nothing was sent" in refused["error"]
    proof = node(cmd="revoke_proof", key=key, params=pj, challenge=challenge.to_bytes().hex())
    assert bytes.fromhex(proof["hex"]) == client.revoke_proof(challenge).to_bytes()
    assert server.revoke_finish(session, RevokeProof.from_bytes(bytes.fromhex(proof["hex"]))).revoked
    assert store.get("im2020", "kim") is None


def test_corrupt_or_foreign_key_file_refused(node):
    params = Im2020Params()
    pj = _params_json(params)
    toy = Client("eve", Im2020Params.toy())
    out = node(cmd="enrol", key=key_record(toy, "x").to_bytes().hex(), params=pj, template=[0] * 128)
    assert out["type"] == "KeyFileError" and "does not fit this server" in out["error"]
    out = node(cmd="enrol", key="00" * 40, params=pj, template=[0] * 128)
    assert out["type"] == "KeyFileError"


def test_browser_client_names_the_servers_backend_and_refuses_a_key_of_another(node):
    """Issue 36: the page's enrolment and C′ carry /app/params.json's ``backend``; a key file enrolled with another
    backend is refused before anything is sent; a key file from before backends were recorded is dlib-resnet128's."""
    from privface.protocols.im2020.messages import AuthStart, LegacyClientKey

    sface, dlib = Im2020Params.toy(), Im2020Params.toy(backend="dlib-resnet128")
    gamma = _templates(np.random.default_rng(4), sface.dims)[0]
    client = Client("ada", sface)
    key = key_record(client, "http://127.0.0.1:1").to_bytes().hex()
    reg = node(cmd="enrol", key=key, params=_params_json(sface), template=gamma)
    assert EnrolRequest.from_bytes(bytes.fromhex(reg["hex"])).backend == "sface"
    start = node(cmd="auth_start", key=key, params=_params_json(sface), template=gamma)
    assert AuthStart.from_bytes(bytes.fromhex(start["hex"])).backend == "sface"
    out = node(cmd="enrol", key=key, params=_params_json(dlib), template=gamma)
    assert out["type"] == "KeyFileError" and "enrolled with the face backend sface" in out["error"]
    sk = client._sk
    old = LegacyClientKey("ada", "x", int(sk.p), int(sk.q), int(client.pk.y), int(client.pk.k), True).to_bytes().hex()
    reg = node(cmd="enrol", key=old, params=_params_json(dlib), template=gamma)
    assert EnrolRequest.from_bytes(bytes.fromhex(reg["hex"])).backend == "dlib-resnet128"
    out = node(cmd="enrol", key=old, params=_params_json(sface), template=gamma)
    assert out["type"] == "KeyFileError" and "dlib-resnet128" in out["error"]


def test_codec_fixed_width_integers_match_and_refuse_another_width(node):
    """gsm wire v2 (issue 39): a ciphertext mod N² is 2·n_bytes bytes whatever its value, in both codecs; a
    receiver that knows its key's width refuses another; a retired v1 id is refused naming its successor."""
    small = encode("gsm.Challenge", {"variant": 2, "n_bytes": 384, "c_x": 7, "c_y": None})
    big = encode("gsm.Challenge", {"variant": 2, "n_bytes": 384, "c_x": 2 ** (8 * 768) - 1, "c_y": None})
    assert len(small) == len(big) == 3 + 3 + 1 + 2 + 768 + 1
    assert node(cmd="roundtrip", hex=small.hex())["hex"] == small.hex()
    assert codec.decode(small, widths={"n_bytes": 384})[1]["c_x"] == 7
    narrow = encode("gsm.Challenge", {"variant": 2, "n_bytes": 383, "c_x": 7, "c_y": None})
    with pytest.raises(codec.WireError, match="383 bytes where this key's are 384"):
        codec.decode(narrow, widths={"n_bytes": 384})
    out = node(cmd="roundtrip", hex=narrow.hex(), widths={"n_bytes": 384})
    assert out["type"] == "WireError" and "383 bytes where this key's are 384" in out["error"]
    with pytest.raises(codec.WireError, match="does not fit"):
        encode("gsm.Challenge", {"variant": 2, "n_bytes": 1, "c_x": 2**16, "c_y": None})
    v1 = b"PFw\x01\x02\x03\x00\x02\x07"  # a gsm wire v1 Challenge (id 515)
    with pytest.raises(codec.WireError, match="retired.*gsm wire v1.*id 529"):
        codec.decode(v1)
    out = node(cmd="roundtrip", hex=v1.hex())
    assert out["type"] == "WireError" and "gsm wire v1" in out["error"] and "id 529" in out["error"]
