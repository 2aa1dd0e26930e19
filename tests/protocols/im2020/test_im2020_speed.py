"""im2020 secure-comparison speed-ups (seed 000 §VII Fig. 8): the circuit's generator half-gates for the
garbler's r0_inv, and the OT receiver's randomness made ahead of time (``ot.ReceiverRandomness``,
``Client.prepare_comparison``). Same results, same checks; toy HE keys, real OT group."""
import secrets

import numpy as np
import pytest

from privface.crypto.compare import Evaluator, Garbler, im2020_circuit, inverse_square
from privface.crypto.garble import LABEL_BYTES
from privface.crypto.ot import ED25519, MODP_2048, OTReceiver, OTRequest, OTResponse, OTSender, ReceiverRandomness
from privface.errors import CryptoError
from privface.eval import im2020_attacks as attacks
from privface.protocols.im2020 import AuthChallenge, AuthStart, Client, CompareChallenge, CompareRequest, Im2020Params
from privface.protocols.im2020.parties import Server
from privface.store import open_store

SECURE = Im2020Params.toy(mode="secure-comparison")


def _pairs(n):
    return [(secrets.token_bytes(16), secrets.token_bytes(16)) for _ in range(n)]


@pytest.mark.parametrize("group", [ED25519, MODP_2048])
def test_precomputed_receiver_gets_its_messages(group):
    choices = [secrets.randbits(1) for _ in range(12)]
    messages = _pairs(12)
    receiver = OTReceiver(choices, group, precomputed=ReceiverRandomness(16, group))
    request = OTRequest.from_bytes(receiver.request().to_bytes())
    response = OTResponse.from_bytes(OTSender(group).respond(request, messages).to_bytes())
    assert receiver.receive(response) == [pair[c] for pair, c in zip(messages, choices)]


def test_precomputed_randomness_is_single_use_and_of_one_group():
    pool = ReceiverRandomness(8, ED25519)
    OTReceiver([0, 1, 1], ED25519, precomputed=pool)
    assert len(pool) == 0
    with pytest.raises(CryptoError):
        OTReceiver([0, 1], ED25519, precomputed=pool)  # already taken
    with pytest.raises(CryptoError):
        OTReceiver([0] * 9, ED25519, precomputed=ReceiverRandomness(8, ED25519))  # too few
    with pytest.raises(CryptoError):
        OTReceiver([0, 1], MODP_2048, precomputed=ReceiverRandomness(4, ED25519))


def test_precomputed_request_hides_the_choices():
    """PK_{j,0} is g^k or C/g^k of fresh k either way: all distinct, all group elements."""
    pool = ReceiverRandomness(64, ED25519)
    pk0 = OTReceiver([0] * 32 + [1] * 32, ED25519, precomputed=pool).request().pk0
    assert len(set(pk0)) == 64 and all(ED25519.check(y, "PK") for y in pk0)


def test_im2020_circuit_uses_generator_half_gates_and_is_correct():
    k = 32
    c = im2020_circuit(k)
    assert c.half_count > 0 and c.and_count < k * k
    rng = np.random.default_rng(3)
    for _ in range(4):
        r0 = 2 * int(rng.integers(0, 2**30)) + 1
        r1, sed, tau = int(rng.integers(0, 2**32)), int(rng.integers(0, 5000)), 4777
        s_star = (r0 * r0 * sed + r1) % 2**k
        garbler = Garbler.im2020(k, inverse_square(r0, k), r1, tau, group=ED25519)
        evaluator = Evaluator.im2020(k, s_star, group=ED25519, precomputed=ReceiverRandomness(k, ED25519))
        result = evaluator.evaluate(garbler.respond(evaluator.request()))
        assert len(result.labels[0]) == LABEL_BYTES
        assert garbler.decide(result) == (sed < tau)


def test_client_prepare_comparison_feeds_one_comparison(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'im2020.db'}") as store:
        client, server = Client("alice", SECURE, workers=1), Server(store, SECURE)
        enrolled = attacks.face_like_template(SECURE, np.random.default_rng(1))
        server.enrol(client.enrol(enrolled))
        for prepared in (True, False, True):
            if prepared:
                client.prepare()
                assert not client.prepare_comparison()  # already made
            start = AuthStart.from_bytes(client.auth_start(enrolled).to_bytes())
            challenge, session = server.auth_start(start)
            request, evaluator = client.compare_request(AuthChallenge.from_bytes(challenge.to_bytes()))
            assert client._ot_pool is None  # used (or never made): never reused
            garbled, csession = server.auth_compare(session, CompareRequest.from_bytes(request.to_bytes()))
            finish = client.compare_finish(evaluator, CompareChallenge.from_bytes(garbled.to_bytes()))
            assert server.compare_finish(csession, finish).accepted
    assert not Client("bob", Im2020Params.toy(), workers=1).prepare_comparison()  # basic mode: nothing to make


def test_edwards_receiver_keys_by_the_x25519_ladder_equal_the_senders():
    """u(R^k) by the ladder (and by the fallback for a k with neither sign in range) = u of libsodium's R^k."""
    from privface.crypto.ot import _ELL, _u_coordinate, _x25519_scalar

    R = ED25519.base(ED25519.random_exponent())
    ks = [ED25519.random_exponent() for _ in range(32)] + [(8).to_bytes(32, "little"),
                                                          (_ELL - 8).to_bytes(32, "little")]
    assert _x25519_scalar(ks[-1]) is None and _x25519_scalar(ks[-2]) is None
    assert ED25519.shared_keys(R, ks) == [ED25519.key_encoding(ED25519.power(R, k)) for k in ks]
    assert all(len(_u_coordinate(ED25519.power(R, k))) == 32 for k in ks[:2])


def test_precomputed_randomness_serves_one_taker_among_concurrent_ones():
    import threading

    pool, got, barrier = ReceiverRandomness(4, ED25519), [], threading.Barrier(8)

    def take():
        barrier.wait()
        try:
            got.append(pool.take(1))
        except CryptoError:
            pass

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 1 and len(pool) == 0
