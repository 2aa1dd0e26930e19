"""The browser's gsm Device (web/src/gsm, run under Node) against a Python provider and terminal over loopback
HTTP (seed 004 §5–§8): it enrols with Π_en and its proofs, keeps the signed m1, and presents to the terminal;
genuine captures are accepted and impostors rejected; a device that lies is refused; the Python Device and
the browser Device share one provider and one terminal. Toy 1024-bit keys except the realsize test."""
from __future__ import annotations

import numpy as np
import pytest

from privface.protocols.gsm import Challenge, Decision, Device, GsmParams, Reply, Template
from privface.service.app import create_app
from privface.service.bindings.gsm import GsmService, provider_key_bytes
from privface.service.clients.gsm import DeviceClient, device_key_record, fetch_provider_key, load_device
from privface.service.launch import serve_in_thread
from privface.store import open_store
from privface.templates.fixed_norm import fixed_norm_template

from .node_driver import GSM_DRIVER, NodeDriver

P = GsmParams.toy(ell=16, m=8, cos_threshold=0.6)
PJ = {"ell": P.ell, "m": P.m, "cos_threshold": P.cos_threshold, "insecure_test_params": True,
      "paillier_bits": P.paillier_bits, "backend": P.backend}


def template(seed: int, base=None, noise: float = 0.0, params: GsmParams = P) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=params.ell)
    return fixed_norm_template(x if base is None else base + x * noise * params.zeta, params.m)


@pytest.fixture(scope="module")
def node():
    d = NodeDriver(GSM_DRIVER)
    yield d
    d.close()


def serve(tmp_path_factory, params: GsmParams, **terminal):
    """A provider and a terminal (separate stores), the terminal capturing ``capture[0]``."""
    root = tmp_path_factory.mktemp("gsmweb")
    capture = [None]
    sp_store = open_store(f"sqlite:///{root / 'sp.db'}")
    t_store = open_store(f"sqlite:///{root / 't.db'}")
    provider = GsmService(sp_store, role="provider", params=params)
    with serve_in_thread(create_app(sp_store, [provider])) as sp_url:
        vk = provider_key_bytes(fetch_provider_key(sp_url))
        service = GsmService(t_store, role="terminal", params=params, provider_key=vk, capture=lambda: capture[0],
                             **terminal)
        with serve_in_thread(create_app(t_store, [service])) as t_url:
            yield sp_url, t_url, capture, sp_store
    sp_store.close()
    t_store.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    yield from serve(tmp_path_factory, P, allow_pi1=True)


@pytest.fixture(scope="module")
def browser_device(node, servers):
    """The TS device, enrolled at the Python provider with a key the TS code generated."""
    sp_url, _, _, store = servers
    key = node(cmd="keygen", bits=P.paillier_bits)
    u = template(1)
    out = node(cmd="enrol", dev="hana", p=key["p"], q=key["q"], id="hana", params=PJ, provider=sp_url,
               template=[int(x) for x in u])
    assert "error" not in out, out
    m1 = Template.from_bytes(bytes.fromhex(out["m1"]))
    assert Template.from_bytes(store.get("gsm", "hana")) == m1  # the provider kept the m1 it signed
    assert m1.pk_n == int(key["p"], 16) * int(key["q"], 16)
    assert [s["step"] for s in out["report"]["steps"]] == ["enrol/start", "enrol/finish"]
    return u, key


@pytest.mark.parametrize("variant", ["pi1", "pi2", "pi3"])
def test_browser_device_genuine_accepted_impostor_rejected(node, servers, browser_device, variant):
    _, t_url, capture, _ = servers
    u, _ = browser_device
    for w, seed in ((template(2, u, 0.1), "genuine"), (template(3), "impostor")):
        capture[0] = w
        if seed == "genuine":  # m1 ahead of the capture: the terminal precomputes, the device makes its OT randomness
            assert node(cmd="present", dev="hana", terminal=t_url, variant=variant)["expires_at"] > 0
        out = node(cmd="match", dev="hana", terminal=t_url, variant=variant)
        assert "error" not in out, out
        expected = int(u @ w) >= P.threshold
        assert out["report"]["match"] == expected and not out["report"]["aborted"], (seed, out)
    assert expected is False and (int(u @ template(2, u, 0.1)) >= P.threshold)


def test_lying_browser_device_refused(node, servers, browser_device):
    """Tampered enrolment proofs are refused by the Python provider, a tampered m1 and a forged Π2 X by the
    Python terminal."""
    sp_url, t_url, capture, _ = servers
    u, key = browser_device
    for what, needle in (("plaintext_proof", "Fig. 9"), ("modulus_proof", "Π_epk"), ("norm", "Fig. 10")):
        out = node(cmd="enrol", dev="liar", p=key["p"], q=key["q"], id="liar", params=PJ, provider=sp_url,
                   template=[int(x) for x in u], tamper=what)
        assert out.get("type") == "ServiceError" and needle in out["error"], (what, out)
    capture[0] = u
    out = node(cmd="match", dev="hana", terminal=t_url, variant="pi2", tamper="m1")
    assert out.get("type") == "ServiceError" and "signature" in out["error"], out
    for variant, what in (("pi2", "reply"), ("pi3", "pi3_x")):
        out = node(cmd="match", dev="hana", terminal=t_url, variant=variant, tamper=what)
        assert "error" not in out and out["report"]["aborted"] and not out["report"]["match"], (what, out)
    assert node(cmd="match", dev="hana", terminal=t_url, variant="pi2")["report"]["match"]  # honest still works


def test_pow_square_equals_python_pow(node):
    """bignum.ts modPowSquare (p-adic digits, Paillier decryption's CRT halves) is pow(b, e, p²): short and long
    exponents, bases above p², multiples of p, 0 and 1, a 1536-bit prime."""
    import secrets

    from privface.crypto.numbers import random_prime

    for bits in (64, 512, 1536):
        p = int(random_prime(bits))
        cases = [(0, p - 1), (1, p - 1), (p, p - 1), (p * p + 5, 3), (secrets.randbelow(p * p), 0),
                 (secrets.randbelow(p * p), 63), (secrets.randbelow(p * p), 64), (secrets.randbelow(p**3), p - 1),
                 (secrets.randbelow(p * p), p * p), (secrets.randbelow(p * p), secrets.randbits(3 * bits))]
        for b, e in cases:
            out = node(cmd="pow_square", base=format(b, "x"), exp=format(e, "x"), p=format(p, "x"))
            assert int(out["hex"], 16) == pow(b, e, p * p), (bits, b, e)


def test_precomputed_enrolment_accepted(node, servers):
    """Π_en with the pairs, Fig. 9's mask and Π_epk made ahead (``precomputeEnrolment``) is what the Python provider
    accepts."""
    sp_url, _, _, store = servers
    key = node(cmd="keygen", bits=P.paillier_bits)
    out = node(cmd="enrol", dev="pre1", p=key["p"], q=key["q"], id="pre1", params=PJ, provider=sp_url,
               template=[int(x) for x in template(7)], precompute=True)
    assert "error" not in out, out
    assert out["report"]["phases_ms"]["precomputed"] == 1 and "modulus_proof_ms" not in out["report"]["phases_ms"]
    assert Template.from_bytes(store.get("gsm", "pre1")).pk_n == int(key["p"], 16) * int(key["q"], 16)


def test_ot_point_c_is_pythons(node):
    """The OT's C (libsodium's Elligator 2 map of a hash, built in Python) is the constant in web/src/gsm/ot.ts."""
    from privface.crypto.ot import ED25519
    assert node(cmd="ot_c")["hex"] == ED25519.C.hex()


def test_browser_device_refuses_foreign_first_message(node, servers, browser_device):
    """The device keeps only an m1 for its own key, signed by its provider."""
    sp_url, _, _, _ = servers
    _, key = browser_device
    other = Device("hana", P, provider_key=fetch_provider_key(sp_url))
    m1 = DeviceClient(other).enrol(sp_url, template(4))
    vk = provider_key_bytes(fetch_provider_key(sp_url)).hex()
    out = node(cmd="load", dev="x", p=key["p"], q=key["q"], id="hana", params=PJ, provider_key=vk,
               m1=m1.to_bytes().hex())
    assert out.get("type") == "ProtocolError" and "another device" in out["error"]


def test_python_and_browser_devices_share_provider_and_terminal(node, servers, browser_device):
    """A Python Device and the browser Device enrol at one provider and match at one terminal; for the same
    Challenge the browser's Π2 reply equals the Python Device's (same key, same m1)."""
    sp_url, t_url, capture, _ = servers
    u, key = browser_device
    py = DeviceClient(Device("kai", P, provider_key=fetch_provider_key(sp_url)))
    v = template(5)
    py.enrol(sp_url, v)
    capture[0] = template(6, v, 0.1)
    assert py.match(t_url, "pi2") == Decision(int(v @ capture[0]) >= P.threshold)
    capture[0] = template(2, u, 0.1)
    assert node(cmd="match", dev="hana", terminal=t_url, variant="pi2")["report"]["match"]
    # the same key in both languages: the browser device's key and m1 drive a Python Device
    from privface.crypto.paillier import PaillierPrivateKey
    sk = PaillierPrivateKey.from_primes(int(key["p"], 16), int(key["q"], 16), insecure_test_params=True)
    twin = Device("hana2", P, keypair=(sk.public_key, sk), provider_key=fetch_provider_key(sp_url))
    out = node(cmd="enrol", dev="hana2", p=key["p"], q=key["q"], id="hana2", params=PJ, provider=sp_url,
               template=[int(x) for x in u])
    assert "error" not in out, out
    m1 = Template.from_bytes(bytes.fromhex(out["m1"]))
    twin.accept_enrolment(m1)
    from privface.protocols.gsm import Terminal
    term = Terminal(P, provider_key=fetch_provider_key(sp_url))
    ch, session = term.challenge(term.receive(m1, "pi2"), template(7), "pi2")
    out = node(cmd="reply", dev="hana2", variant="pi2", challenge=ch.to_bytes().hex())
    assert bytes.fromhex(out["hex"]) == twin.pi2_reply(Challenge.from_bytes(ch.to_bytes())).to_bytes()
    assert isinstance(Reply.from_bytes(bytes.fromhex(out["hex"])), Reply)


def test_key_file_moves_between_browser_and_python(node, servers, browser_device):
    """The browser's key file (gsm.DeviceKey) drives a Python Device at the terminal, and a Python Device's key
    file drives the browser; a key file of toy parameters is refused by a real-size device, garbage too."""
    sp_url, t_url, capture, _ = servers
    u, _ = browser_device
    data = bytes.fromhex(node(cmd="export", dev="hana", provider=sp_url)["hex"])
    py, record = load_device(data, P)
    assert record.provider == sp_url and py.first_message().subject_id == "hana"
    capture[0] = template(2, u, 0.1)
    assert DeviceClient(py).match(t_url, "pi3").match
    lee = DeviceClient(Device("lee", P, provider_key=fetch_provider_key(sp_url)))
    v = template(8)
    lee.enrol(sp_url, v)
    out = node(cmd="import", dev="lee", key=device_key_record(lee.device, sp_url).to_bytes().hex(), params=PJ)
    assert out == {"provider": sp_url, "enrolled": True}
    capture[0] = template(9, v, 0.1)
    assert node(cmd="match", dev="lee", terminal=t_url, variant="pi2")["report"]["match"]
    real = {"ell": P.ell, "m": P.m, "cos_threshold": P.cos_threshold}
    assert node(cmd="import", dev="x", key=data.hex(), params=real)["type"] == "KeyFileError"
    assert node(cmd="import", dev="x", key="00" * 40, params=PJ)["type"] == "KeyFileError"
    assert record.backend == P.backend  # the page's key file names the server's backend (params.json)
    other = {**PJ, "backend": "dlib-resnet128" if P.backend != "dlib-resnet128" else "sface"}
    lees = device_key_record(lee.device, sp_url).to_bytes().hex()
    assert node(cmd="import", dev="x", key=lees, params=other)["type"] == "KeyFileError"


def test_eval_device_browser_agrees_with_python_device():
    """`eval --device browser`'s chunk runner: the TypeScript Device's decisions equal the Python Device's and the
    plaintext decisions (Π2 replies byte-identical, checked inside), for genuine and impostor pairs."""
    from privface.eval.gsm_browser import run_chunk
    u = template(11)
    templates = {0: u, 1: template(12, u, 0.1), 2: template(13)}
    for variant in ("pi2", "pi3"):
        rows = run_chunk(P, variant, templates, [(0, 1), (0, 2), (1, 0)])
        plain = [int(templates[a] @ templates[b]) >= P.threshold for a, b in ((0, 1), (0, 2), (1, 0))]
        assert [r[0] for r in rows] == [r[1] for r in rows] == plain and plain == [True, False, True]


@pytest.mark.slow
@pytest.mark.realsize
def test_browser_device_real_size(node, tmp_path_factory):
    """3072-bit keys made by the TypeScript Device, ℓ = 128, m = 16: enrolment with every proof at a Python
    provider, Π2 and Π3 at a Python terminal, genuine accepted and impostor rejected."""
    R = GsmParams()
    gen = serve(tmp_path_factory, R)
    sp_url, t_url, capture, _ = next(gen)
    try:
        node(cmd="backend", name="gmp")
        key = node(cmd="keygen", bits=R.paillier_bits)
        assert (int(key["p"], 16) * int(key["q"], 16)).bit_length() == 3072
        u = template(21, params=R)
        out = node(cmd="enrol", dev="real", p=key["p"], q=key["q"], id="real", params={"ell": R.ell, "m": R.m},
                   provider=sp_url, template=[int(x) for x in u])
        assert "error" not in out, out
        for variant in ("pi2", "pi3"):
            for w in (template(22, u, 0.02, params=R), template(23, params=R)):
                capture[0] = w
                rep = node(cmd="match", dev="real", terminal=t_url, variant=variant)["report"]
                assert rep["match"] == (int(u @ w) >= R.threshold) and not rep["aborted"]
        assert int(u @ template(22, u, 0.02, params=R)) >= R.threshold
    finally:
        gen.close()
