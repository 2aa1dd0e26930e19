"""gsm wire v2 (issue 39): every residue mod N and ciphertext mod N² in fixed width, so message sizes depend on the
key alone; a width other than the key's refused at every receiver; gsm wire v1 ids refused naming the version; an
m1 signed under v1 (``LegacyTemplate``) still read, verified and usable until it expires. Toy 1024-bit keys."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from privface.errors import ProtocolError
from privface.protocols.gsm import (
    Device,
    GsmParams,
    LegacyTemplate,
    Reply,
    ServiceProvider,
    Template,
    Terminal,
    read_template,
    zk,
)
from privface.protocols.gsm.messages import key_width
from privface.protocols.gsm.parties import signed_bytes
from privface.templates.fixed_norm import fixed_norm_template
from privface.wire import WireError, decode

P = GsmParams.toy(ell=24, m=8, cos_threshold=0.6)


def template(seed: int) -> np.ndarray:
    return fixed_norm_template(np.random.default_rng(seed).normal(size=P.ell), P.m)


@pytest.fixture(scope="module")
def world():
    sp = ServiceProvider(P)
    dev = Device("wira", P, provider_key=sp.public_key)
    u = template(1)
    req = dev.enrol_start(u)
    ch, session = sp.enrol_start(req)
    resp = dev.enrol_respond(ch)
    m1 = sp.enrol_finish(session, resp)
    dev.accept_enrolment(m1)
    return sp, dev, Terminal(P, provider_key=sp.public_key), u, (req, ch, resp, m1)


def test_every_big_integer_has_the_keys_width(world):
    """Sizes are functions of N's width: a ciphertext of value 1 takes as many bytes as a random one."""
    _, dev, _, _, (req, ch, resp, m1) = world
    w = key_width(dev.pk.n)
    assert w == 128 and req.n_bytes == ch.n_bytes == resp.n_bytes == m1.n_bytes == w
    for msg in (req, ch, resp, m1, zk.PlaintextKnowledgeProof.from_bytes(req.plaintext_proof, dev.pk)):
        small = dataclasses.replace(msg, **{f: 1 for f in ("pk_n", "c_sum", "z", "a", "v", "v_hat") if hasattr(msg, f)})
        assert len(small.to_bytes()) == len(msg.to_bytes()), type(msg).__name__
    assert len(req.to_bytes()) == len(dataclasses.replace(req, c_u=[1] * len(req.c_u)).to_bytes())


def test_a_width_other_than_the_keys_is_refused(world):
    sp, dev, term, u, (req, ch, resp, m1) = world
    pk = dev.pk
    proof = zk.PlaintextKnowledgeProof.from_bytes(req.plaintext_proof, pk)
    wide = dataclasses.replace(proof, n_bytes=129).to_bytes()
    with pytest.raises(ProtocolError, match="129 bytes where this key's are 128"):
        zk.PlaintextKnowledgeProof.from_bytes(wide, pk)
    with pytest.raises(ProtocolError, match="129 bytes; its key N is 128"):
        sp.enrol_start(dataclasses.replace(req, n_bytes=129))
    with pytest.raises(ProtocolError, match="129 bytes where this key's are 128"):
        zk.NormChallenge.from_bytes(dataclasses.replace(ch, n_bytes=129).to_bytes(), pk, P.ell)
    with pytest.raises(ProtocolError, match="129 bytes; its key N is 128"):
        read_template(dataclasses.replace(m1, n_bytes=129).to_bytes())
    e = term.receive(dev.first_message(), "pi2")
    challenge, session = term.challenge(e, u, "pi2")
    with pytest.raises(ProtocolError, match="129 bytes; this key's are 128"):
        dev.pi2_reply(dataclasses.replace(challenge, n_bytes=129))
    honest = dev.pi2_reply(challenge)
    with pytest.raises(ProtocolError, match="reply X carries"):
        term.pi2_finish(session, Reply(honest.x_bytes + 1, honest.x))
    verifier = zk.NormVerifier(pk, [zk.PaillierCiphertext(pk, c) for c in req.c_u], P.zeta**2)
    verifier.challenge()
    with pytest.raises(ProtocolError, match="NormResponse carries integers of 127 bytes"):
        verifier.verify(dataclasses.replace(resp, n_bytes=127))


def test_a_truncated_or_padded_integer_is_refused(world):
    *_, (_, _, resp, _) = world
    data = resp.to_bytes()
    with pytest.raises(WireError, match="truncated"):
        decode(data[:-1])
    with pytest.raises(WireError, match="trailing"):
        decode(data + b"\x00")
    with pytest.raises(WireError, match="does not fit"):
        dataclasses.replace(resp, z=2 ** (8 * 128)).to_bytes()


def test_wire_v1_ids_are_refused_naming_the_version():
    for tid, new in ((513, 527), (515, 529), (516, 530), (1025, 1029), (1028, 1032)):
        frame = b"PFw\x01" + tid.to_bytes(2, "big") + b"\x00" * 8
        with pytest.raises(WireError, match=f"id {tid} is retired: .*gsm wire v1.*id {new}"):
            decode(frame)


def test_an_m1_signed_under_wire_v1_still_works(world):
    """A LegacyTemplate (id 514, minimal-length integers) signed by the provider: the device keeps it, the terminal
    verifies its σ over its own encoding and runs Π2 on it — decisions as with a v2 m1."""
    sp, dev, term, u, (*_, m1) = world
    fields = {f.name: getattr(m1, f.name) for f in dataclasses.fields(LegacyTemplate)}
    legacy = LegacyTemplate(**{**fields, "signature": b""})
    legacy = dataclasses.replace(legacy, signature=sp._signing_key.sign(signed_bytes(legacy)))
    data = legacy.to_bytes()
    assert decode(data)[0] == "gsm.LegacyTemplate"
    assert read_template(data) == legacy
    old = Device("wira", P, keypair=(dev.pk, dev._sk), provider_key=sp.public_key)
    old.accept_enrolment(read_template(data))
    assert old.first_message().to_bytes() == data  # re-sent as signed
    e = term.receive(read_template(old.first_message().to_bytes()), "pi2")
    for w, want in ((u, True), (template(7), False)):
        ch, s = term.challenge(e, w, "pi2")
        assert term.pi2_finish(s, old.pi2_reply(ch)).match is want
    forged = dataclasses.replace(legacy, c_sum=legacy.c_sum + 1)
    with pytest.raises(ProtocolError, match="signature"):
        term.receive(forged, "pi2")
    assert isinstance(read_template(m1.to_bytes()), Template)
