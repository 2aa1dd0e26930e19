"""Naor–Pinkas 1-out-of-2 OT (crypto/ot.py): correctness for both choice bits, group checks, refusals."""
import secrets
import shutil
import subprocess
import warnings

import gmpy2
import nacl.bindings as nacl
import pytest
from gmpy2 import mpz
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto.ot import (
    ED25519,
    GROUPS,
    MODP_2048,
    MODP_3072,
    OTReceiver,
    OTRequest,
    OTResponse,
    OTSender,
    _pad,
    _u_coordinate,
)
from privface.errors import CryptoError


def _pairs(n, length=16):
    return [(secrets.token_bytes(length), secrets.token_bytes(length)) for _ in range(n)]


def _run(choices, messages, group=MODP_2048):
    receiver = OTReceiver(choices, group)
    request = OTRequest.from_bytes(receiver.request().to_bytes())
    response = OTResponse.from_bytes(OTSender(group).respond(request, messages).to_bytes())
    return receiver.receive(response)


@pytest.mark.parametrize("group,bits,c", [(MODP_2048, 2048, 124476), (MODP_3072, 3072, 1690314)])
def test_groups_are_the_rfc3526_safe_primes(group, bits, c):
    gmpy2.get_context().precision = bits + 200
    pi_part = int(gmpy2.floor(gmpy2.const_pi() * mpz(2) ** (bits - 130)))
    assert group.p == 2**bits - 2**(bits - 64) - 1 + 2**64 * (pi_part + c)
    assert gmpy2.is_prime(group.p, 30) and gmpy2.is_prime(group.q, 30)
    assert gmpy2.powmod(group.g, group.q, group.p) == 1 and group.check(group.g, "g") == 2
    assert gmpy2.powmod(group.C, group.q, group.p) == 1
    assert group.security_bits >= 112


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
@pytest.mark.parametrize("group", [MODP_2048, MODP_3072])
def test_groups_match_openssl(group):
    """Cross-check against OpenSSL's built-in RFC 3526 groups (`genpkey -pkeyopt group:modp_N`)."""
    pem = subprocess.run(["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt",
                          f"group:modp_{group.p.bit_length()}"], capture_output=True, check=True).stdout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cryptography deprecates finite-field DH; we only read p and g
        from cryptography.hazmat.primitives.serialization import load_pem_parameters

        numbers = load_pem_parameters(pem).parameter_numbers()
    assert (numbers.p, numbers.g) == (group.p, group.g)


def test_both_choice_bits_random_batch():
    choices = [secrets.randbelow(2) for _ in range(40)] + [0, 1]
    messages = _pairs(len(choices))
    assert _run(choices, messages) == [pair[c] for pair, c in zip(messages, choices)]


@pytest.mark.parametrize("choice", [0, 1])
def test_all_same_choice_and_long_messages(choice):
    messages = _pairs(5, length=100)
    assert _run([choice] * 5, messages) == [pair[choice] for pair in messages]


def test_3072_bit_group():
    messages = _pairs(3)
    assert _run([1, 0, 1], messages, MODP_3072) == [messages[0][1], messages[1][0], messages[2][1]]


def test_the_other_message_stays_hidden_from_an_honest_receiver():
    """With its own key the receiver's pad for the other index is not the sender's: E_{1−σ} stays masked."""
    messages = _pairs(8)
    receiver = OTReceiver([0] * 8)
    response = OTSender().respond(receiver.request(), messages)
    k = receiver._k
    for j, (pair, pk0) in enumerate(zip(response.ciphertexts, receiver.request().pk0)):
        guess = bytes(a ^ b for a, b in zip(pair[1], _pad(MODP_2048, j, 1, pk0, response.R,
                                                             gmpy2.powmod(response.R, k[j], MODP_2048.p), 16)))
        assert guess != messages[j][1]
    assert receiver.receive(response) == [m[0] for m in messages]


def _bad_elements(group):
    p = group.p
    non_residue = p - group.C  # −1 is a non-residue for p ≡ 3 (mod 4), so −C is one
    return [0, 1, p - 1, p, p + 4, non_residue, 2**(8 * group.element_bytes) - 1]


@pytest.mark.parametrize("index", range(7))
def test_request_with_a_non_group_element_is_refused(index):
    bad = _bad_elements(MODP_2048)[index]
    good = OTReceiver([0, 1]).request()
    data = bytearray(good.to_bytes())
    L = MODP_2048.element_bytes
    data[5 + L:5 + 2 * L] = bad.to_bytes(L, "big")
    with pytest.raises(CryptoError, match="not an element"):
        OTRequest.from_bytes(bytes(data))
    forged = OTRequest(MODP_2048, (good.pk0[0], mpz(bad)))
    with pytest.raises(CryptoError, match="not an element"):
        OTSender().respond(forged, _pairs(2))


def test_response_with_a_bad_R_is_refused_and_the_receiver_can_still_finish():
    messages = _pairs(3)
    receiver = OTReceiver([1, 1, 0])
    response = OTSender().respond(receiver.request(), messages)
    L = MODP_2048.element_bytes
    for bad in _bad_elements(MODP_2048):
        data = bytearray(response.to_bytes())
        data[7:7 + L] = bad.to_bytes(L, "big")
        with pytest.raises(CryptoError, match="not an element"):
            OTResponse.from_bytes(bytes(data))
        with pytest.raises(CryptoError, match="not an element"):
            receiver.receive(OTResponse(MODP_2048, mpz(bad), response.ciphertexts))
    assert receiver.receive(response) == [messages[0][1], messages[1][1], messages[2][0]]
    with pytest.raises(CryptoError, match="already received"):
        receiver.receive(response)


def test_malformed_encodings_and_arguments_are_refused():
    request = OTReceiver([0, 1, 1]).request()
    data = request.to_bytes()
    for bad in (b"", data[:-1], data + b"\0", b"\x09" + data[1:], data[:1] + b"\0\0\0\0"):
        with pytest.raises(CryptoError):
            OTRequest.from_bytes(bad)
    response = OTSender().respond(request, _pairs(3))
    rdata = response.to_bytes()
    for bad in (rdata[:-1], rdata + b"\0", rdata[:5] + b"\0\0" + rdata[7:]):
        with pytest.raises(CryptoError):
            OTResponse.from_bytes(bad)
    with pytest.raises(CryptoError, match="transfers"):
        OTSender().respond(request, _pairs(2))
    with pytest.raises(CryptoError, match="one length"):
        OTSender().respond(request, [(b"a" * 16, b"b" * 15)] + _pairs(2))
    with pytest.raises(CryptoError, match="group"):
        OTSender(MODP_3072).respond(request, _pairs(3))
    for choices in ([], [2], [True], [0, -1]):
        with pytest.raises(CryptoError):
            OTReceiver(choices)
    with pytest.raises(CryptoError, match="expected 3"):
        OTReceiver([0, 1, 1]).receive(OTSender().respond(OTReceiver([0, 1]).request(), _pairs(2)))
    assert set(GROUPS) == {1, 2, 3}


# ---------------------------------------------------------------- edwards25519 (libsodium)

# encodings that are not prime-order-subgroup points: the identity, a point of order 2 ((0, −1)), a
# non-canonical y ≥ p, and (most likely) a y with no x on the curve
_ED_BAD = [bytes([1]) + bytes(31), bytes([0xEC]) + b"\xff" * 30 + b"\x7f", b"\xff" * 31 + b"\x7f",
           bytes([2]) + bytes(31)]


def test_edwards_both_choice_bits_and_wire_round_trip():
    choices = [secrets.randbelow(2) for _ in range(30)] + [0, 1]
    messages = _pairs(len(choices))
    assert _run(choices, messages, ED25519) == [pair[c] for pair, c in zip(messages, choices)]
    request = OTReceiver([0, 1], ED25519).request()
    assert len(request.to_bytes()) == 5 + 2 * 32  # 32-byte points instead of 256-byte MODP elements


def test_edwards_C_is_a_fixed_subgroup_point_and_pk1_is_C_over_pk0():
    assert ED25519.check(ED25519.C, "C") == ED25519.C
    receiver = OTReceiver([1, 0], ED25519)
    for pk0, k, c in zip(receiver.request().pk0, receiver._k, (1, 0)):
        pk_sigma = ED25519.base(k)
        assert (ED25519.mul(pk0, pk_sigma) == ED25519.C) if c else pk0 == pk_sigma


@pytest.mark.parametrize("bad", _ED_BAD)
def test_edwards_points_outside_the_group_are_refused(bad):
    with pytest.raises(CryptoError, match="not an element"):
        ED25519.check(bad, "y")
    good = OTReceiver([0, 1], ED25519).request()
    with pytest.raises(CryptoError, match="not an element"):
        OTSender(ED25519).respond(OTRequest(ED25519, (good.pk0[0], bad)), _pairs(2))
    receiver = OTReceiver([1, 0], ED25519)
    messages = _pairs(2)
    response = OTSender(ED25519).respond(receiver.request(), messages)
    with pytest.raises(CryptoError, match="not an element"):
        receiver.receive(OTResponse(ED25519, bad, response.ciphertexts))
    assert receiver.receive(response) == [messages[0][1], messages[1][0]]  # unchanged by the bad response


def test_edwards_request_is_refused_by_a_modp_sender_and_vice_versa():
    with pytest.raises(CryptoError, match="group"):
        OTSender(MODP_2048).respond(OTReceiver([0], ED25519).request(), _pairs(1))
    with pytest.raises(CryptoError, match="group"):
        OTSender(ED25519).respond(OTReceiver([0], MODP_2048).request(), _pairs(1))


@settings(max_examples=25, deadline=None)
@given(count=st.integers(1, 40))
def test_edwards_native_sender_keys_equal_libsodium(count):
    """native/src/ot.rs against the sender's libsodium computation (its oracle): u(PK^r), u(C^r / PK^r)."""
    receiver = OTReceiver([secrets.randbelow(2) for _ in range(count)], ED25519)
    pk0s = receiver.request().pk0
    r = ED25519.random_exponent()
    Cr = ED25519.power(ED25519.C, r)
    want = []
    for pk0 in pk0s:
        k0 = ED25519.power(pk0, r)
        want.append((_u_coordinate(k0), _u_coordinate(ED25519.div(Cr, k0))))
    assert ED25519.sender_keys(pk0s, r, Cr) == want


def test_edwards_sender_refuses_a_point_with_a_small_order_component():
    """P + T with T of order 2 is on the curve and canonical but outside the prime-order subgroup."""
    order2 = bytes([0xEC]) + b"\xff" * 30 + b"\x7f"  # (0, −1)
    mixed = nacl.crypto_core_ed25519_add(ED25519.base(ED25519.random_exponent()), order2)
    good = OTReceiver([0], ED25519).request().pk0[0]
    with pytest.raises(CryptoError, match="PK_j,0 1 is not an element"):
        OTSender(ED25519).respond(OTRequest(ED25519, (good, mixed)), _pairs(2))
