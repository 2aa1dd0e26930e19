"""gsm enrolment Π_en (seed 004 §6, §8) through the parties: an honest device enrols in two rounds and its m1
matches; wrong norm, unknown plaintexts, a malformed modulus, tampered or replayed proofs are rejected with a
clear error, and the provider signs nothing. Toy 1024-bit keys."""
from __future__ import annotations

import dataclasses

import gmpy2
import numpy as np
import pytest

from privface.crypto.numbers import crt
from privface.crypto.paillier import generate_paillier_keypair
from privface.errors import ProtocolError
from privface.protocols.gsm import Device, EnrolRequest, GsmParams, ServiceProvider, Template, Terminal, zk
from privface.protocols.gsm.messages import key_width
from privface.protocols.gsm.parties import enrol_context
from privface.templates.fixed_norm import fixed_norm_template

P = GsmParams.toy(ell=16, m=8, cos_threshold=0.6)


def template(seed: int) -> np.ndarray:
    return fixed_norm_template(np.random.default_rng(seed).normal(size=P.ell), P.m)


@pytest.fixture(scope="module")
def sp():
    return ServiceProvider(P)


@pytest.fixture(scope="module")
def dev(sp):
    return Device("dora", P, provider_key=sp.public_key)


def cheat_request(dev: Device, values, provider) -> EnrolRequest:
    """What a cheating device sends: its own key and honest proofs for arbitrary plaintexts ``values``."""
    ctx = enrol_context(dev.subject_id, provider.public_key)
    cts, wit = zk.encrypt_with_witness(dev._sk, [int(v) for v in values])
    return EnrolRequest(dev.subject_id, key_width(dev.pk.n), int(dev.pk.n), [int(c.value) for c in cts],
                        zk.prove_modulus(dev._sk, context=ctx).to_bytes(),
                        zk.prove_plaintext_knowledge(dev.pk, cts, wit, context=ctx).to_bytes())


def test_honest_enrolment_through_the_wire_matches(sp, dev):
    u = template(1)
    req = EnrolRequest.from_bytes(dev.enrol_start(u).to_bytes())
    ch, session = sp.enrol_start(req)
    resp = dev.enrol_respond(zk.NormChallenge.from_bytes(ch.to_bytes(), dev.pk, P.ell))
    m1 = Template.from_bytes(sp.enrol_finish(session, zk.NormResponse.from_bytes(resp.to_bytes())).to_bytes())
    dev.accept_enrolment(m1)
    term = Terminal(P, provider_key=sp.public_key)
    e = term.receive(dev.first_message(), "pi2")
    ch2, s2 = term.challenge(e, u, "pi2")
    assert term.pi2_finish(s2, dev.pi2_reply(ch2)).match  # u against itself: cos = 1
    with pytest.raises(ProtocolError, match="already verified"):  # the Fig. 10 challenge is single use
        sp.enrol_finish(session, resp)


@pytest.mark.parametrize("change", ["one_component", "scaled", "zero"])
def test_wrong_norm_is_rejected_and_nothing_is_signed(sp, dev, change):
    u = template(2).astype(object)
    bad = {"one_component": np.concatenate([[u[0] + 1], u[1:]]), "scaled": u * 2, "zero": u * 0}[change]
    ch, session = sp.enrol_start(cheat_request(dev, bad, sp))  # Π_epk and Fig. 9 hold: the device knows them
    with pytest.raises(ProtocolError, match="norm"):
        sp.enrol_finish(session, dev.enrol_respond(ch))
    with pytest.raises(ProtocolError, match="already verified"):
        sp.enrol_finish(session, dev.enrol_respond(ch))


def test_norm_right_mod_n_only_is_rejected(sp):
    """u_0 replaced by a square root mod N of ζ² − Σ_{i>0} u_i² + 5 … claiming ζ² instead: Σ x_i² ≡ ζ² (mod N)
    with a huge x_0, i.e. the norm holds mod N but not over the integers — the mod-N̂ check catches it."""
    cheat = Device("mod-cheat", P, provider_key=sp.public_key)
    sk, n = cheat._sk, int(cheat.pk.n)
    rest = [int(x) for x in template(3)[1:]]
    while True:
        target = (P.zeta**2 - sum(x * x for x in rest)) % n
        if gmpy2.legendre(target, sk.p) == 1 and gmpy2.legendre(target, sk.q) == 1:
            break
        rest[0] += 1
    # of the four square roots mod N, take one that is not ±(a small integer): a "mixed" one
    rp, rq = gmpy2.powmod(target, (sk.p + 1) // 4, sk.p), gmpy2.powmod(target, (sk.q + 1) // 4, sk.q)
    roots = [int(crt(rp, sq % sk.q, sk.p, sk.q, gmpy2.invert(sk.q, sk.p))) for sq in (rq, -rq)]
    root = next(r for r in roots if min(r, n - r) > 2**64)
    values = [root] + rest
    assert sum(x * x for x in values) % n == P.zeta**2 != sum(x * x for x in values)
    ch, session = sp.enrol_start(cheat_request(cheat, values, sp))
    with pytest.raises(ProtocolError, match="norm"):
        sp.enrol_finish(session, cheat.enrol_respond(ch))


def test_unknown_plaintexts_are_rejected(sp, dev):
    """One ⟦u_i⟧ swapped for another device's ciphertext (whose plaintext and r this device does not know)."""
    req = dev.enrol_start(template(4))
    other = Device("olga", P, keypair=(dev.pk, dev._sk), provider_key=sp.public_key)  # same key, other ciphertexts
    copied = other.enrol_start(template(5)).c_u
    forged = dataclasses.replace(req, c_u=[copied[0]] + req.c_u[1:])
    with pytest.raises(ProtocolError, match="Fig. 9"):
        sp.enrol_start(forged)
    random_ct = int(dev.pk.encrypt(7).value)  # made by someone without the witness the proof was built for
    with pytest.raises(ProtocolError, match="Fig. 9"):
        sp.enrol_start(dataclasses.replace(req, c_u=req.c_u[:-1] + [random_ct]))


def test_malformed_modulus_is_rejected(sp, dev):
    """A non-Blum key cannot be proven by an honest device; a key whose proof is another's is refused."""
    plain = generate_paillier_keypair(1024, insecure_test_params=True)
    while plain[1].p % 4 == 3 and plain[1].q % 4 == 3:
        plain = generate_paillier_keypair(1024, insecure_test_params=True)
    with pytest.raises(ProtocolError, match="Blum"):
        Device("pat", P, keypair=plain, provider_key=sp.public_key).enrol_start(template(6))
    req = dev.enrol_start(template(6))
    another = generate_paillier_keypair(1024, insecure_test_params=True, blum=True)
    other = cheat_request(Device("dora", P, keypair=another, provider_key=sp.public_key), template(6), sp)
    with pytest.raises(ProtocolError):  # Π_epk transcript of another modulus: out of range or not verifying
        sp.enrol_start(dataclasses.replace(req, modulus_proof=other.modulus_proof))


def test_tampered_or_replayed_proofs_are_rejected(sp, dev):
    req = dev.enrol_start(template(7))
    for field in ("modulus_proof", "plaintext_proof"):
        data = getattr(req, field)
        for pos in (12, len(data) // 2, len(data) - 2):
            bad = bytearray(data)
            bad[pos] ^= 0x10
            with pytest.raises(ProtocolError):
                sp.enrol_start(dataclasses.replace(req, **{field: bytes(bad)}))
        with pytest.raises(ProtocolError, match="zero-knowledge"):
            sp.enrol_start(dataclasses.replace(req, **{field: b""}))
    with pytest.raises(ProtocolError, match="Π_epk"):  # the same transcript replayed to another provider
        ServiceProvider(P).enrol_start(req)
    with pytest.raises(ProtocolError, match="Π_epk"):  # … or under another subject id
        sp.enrol_start(dataclasses.replace(req, subject_id="someone-else"))


def test_tampered_norm_response_and_foreign_session_are_rejected(sp, dev):
    ch, session = sp.enrol_start(dev.enrol_start(template(8)))
    resp = dev.enrol_respond(ch)
    with pytest.raises(ProtocolError, match="(?i)norm"):
        sp.enrol_finish(session, dataclasses.replace(resp, z=(resp.z + 1) % int(dev.pk.n)))
    ch2, session2 = sp.enrol_start(dev.enrol_start(template(8)))
    with pytest.raises(ProtocolError, match="(?i)norm"):  # the answer to another session's challenge
        sp.enrol_finish(session2, dev.enrol_respond(ch))
    with pytest.raises(ProtocolError, match="session"):
        sp.enrol_finish(None, resp)
    with pytest.raises(ProtocolError, match="N̂"):  # a malformed challenge is refused by the device
        dev.enrol_respond(dataclasses.replace(ch2, n_hat=ch2.n_hat + 1))


def test_device_needs_the_provider_key_and_provider_refuses_unproven_by_default(sp):
    with pytest.raises(ProtocolError, match="verification key"):
        Device("nokey", P).enrol_start(template(9))
    d = Device("quick", P)
    with pytest.raises(ProtocolError, match="zero-knowledge"):
        sp.enrol_unproven(d.unproven_enrol_request(template(9)))
    lax = ServiceProvider(P, insecure_skip_proofs=True)
    assert lax.enrol_unproven(d.unproven_enrol_request(template(9))).subject_id == "quick"


@pytest.mark.slow
def test_real_size_enrolment_at_3072_bits():
    """Π_en through the parties with the default 3072-bit Blum key; the signed m1 matches under Π2."""
    p = GsmParams(ell=8, m=16, cos_threshold=0.8)
    provider = ServiceProvider(p)
    device = Device("rita", p, provider_key=provider.public_key)
    u = fixed_norm_template(np.random.default_rng(11).normal(size=p.ell), p.m)
    ch, session = provider.enrol_start(device.enrol_start(u))
    device.accept_enrolment(provider.enrol_finish(session, device.enrol_respond(ch)))
    term = Terminal(p, provider_key=provider.public_key)
    ch2, s2 = term.challenge(term.receive(device.first_message(), "pi2"), u, "pi2")
    assert device.pk.bits == 3072 and term.pi2_finish(s2, device.pi2_reply(ch2)).match
    bad = np.concatenate([[u[0] + 1], u[1:]]).astype(object)
    ch3, session3 = provider.enrol_start(cheat_request(device, bad, provider))
    with pytest.raises(ProtocolError, match="norm"):
        provider.enrol_finish(session3, device.enrol_respond(ch3))
