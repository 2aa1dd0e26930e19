"""Secure comparison by garbled circuits + OT (crypto/compare.py): decisions equal plaintext decisions,
a cheating evaluator is caught, bad messages are refused without changing state."""
import secrets

import pytest

from privface.crypto.compare import (
    Evaluator,
    EvaluatorResult,
    Garbler,
    GarblerMessage,
    im2020_circuit,
    inverse_square,
    less_than_circuit,
)
from privface.crypto.garble import LABEL_BYTES, OutputLabelError
from privface.crypto.ot import OTRequest
from privface.errors import CryptoError

K = 64


def run(garbler, evaluator):
    """The three messages, each through its byte encoding."""
    request = OTRequest.from_bytes(evaluator.request().to_bytes())
    message = GarblerMessage.from_bytes(garbler.respond(request).to_bytes())
    result = EvaluatorResult.from_bytes(evaluator.evaluate(message).to_bytes())
    return garbler.decide(result)


def blinded(sed, k=K):
    r0, r1 = secrets.randbits(k) | 1, secrets.randbits(k)
    return (r0 * r0 * sed + r1) % 2**k, inverse_square(r0, k), r1


@pytest.mark.parametrize("k", [1, 8, 64])
def test_less_than_equals_plaintext_on_edges(k):
    top = 2**k - 1
    cases = {(0, 0), (0, top), (top, 0), (top, top), (top // 2, top // 2 + 1), (top // 2 + 1, top // 2)}
    for x, t in sorted(cases) + [(secrets.randbits(k), secrets.randbits(k))]:
        assert run(Garbler.less_than(k, t), Evaluator.less_than(k, x)) == (x < t), (x, t)


def test_im2020_decision_equals_plaintext_k64():
    tau = secrets.randbelow(2**20) + 1
    seds = [0, tau - 1, tau, tau + 1, 2**40] + [secrets.randbelow(2 * tau) for _ in range(3)]
    for sed in seds:
        s_star, r0_inv, r1 = blinded(sed)
        assert run(Garbler.im2020(K, r0_inv, r1, tau), Evaluator.im2020(K, s_star)) == (sed < tau), sed


def test_im2020_random_full_range_k64():
    """Random s, r0, r1, τ over all of Z_{2^64}, with and without the range check."""
    for _ in range(3):
        sed, tau, s_max = secrets.randbits(K), secrets.randbits(K), secrets.randbits(K)
        s_star, r0_inv, r1 = blinded(sed)
        assert run(Garbler.im2020(K, r0_inv, r1, tau), Evaluator.im2020(K, s_star)) == (sed < tau)
        s_star, r0_inv, r1 = blinded(sed)
        garbler = Garbler.im2020(K, r0_inv, r1, tau, s_max=s_max)
        assert run(garbler, Evaluator.im2020(K, s_star, range_check=True)) == (sed < tau and sed <= s_max)


def test_range_check_refuses_a_score_outside_the_sed_range():
    s_max, tau = 1000, 2**63  # τ above the possible range: only the range check refuses s = 5000
    for sed, accept in ((5000, False), (1000, True), (999, True)):
        s_star, r0_inv, r1 = blinded(sed)
        assert run(Garbler.im2020(K, r0_inv, r1, tau, s_max=s_max),
                   Evaluator.im2020(K, s_star, range_check=True)) is accept
    s_star, r0_inv, r1 = blinded(5000)
    assert run(Garbler.im2020(K, r0_inv, r1, tau), Evaluator.im2020(K, s_star)) is True


def test_gsm_pi3_circuit_k64():
    """Seed 004 Fig. 6: honest (X, Y) give (1, [T ≤ IP]); a Y inconsistent with X is caught (the ⊥ bit)."""
    k = 64
    T = secrets.randbits(20) + 1
    for ip in (T - 1, T, T + 1, 0, secrets.randbits(21)):
        pad, a, b = secrets.randbits(k), secrets.randbits(k), secrets.randbits(k)
        X, Y = (ip + pad) % 2**k, (a * ip + b) % 2**k
        garbler = Garbler.gsm_pi3(k, pad, a, b, T)
        assert run_bits(garbler, Evaluator.gsm_pi3(k, X, Y)) == (True, T <= ip)
        with pytest.raises(CryptoError, match="decide_bits"):
            Garbler.gsm_pi3(k, pad, a, b, T).decide(EvaluatorResult((bytes(16), bytes(16))))
    garbler = Garbler.gsm_pi3(k, pad, a, b, T)
    assert run_bits(garbler, Evaluator.gsm_pi3(k, (X + 1) % 2**k, Y))[0] is False


def run_bits(garbler, evaluator):
    request = OTRequest.from_bytes(evaluator.request().to_bytes())
    message = GarblerMessage.from_bytes(garbler.respond(request).to_bytes())
    return garbler.decide_bits(EvaluatorResult.from_bytes(evaluator.evaluate(message).to_bytes()))


def _started(k=16, x=3, t=9):
    garbler, evaluator = Garbler.less_than(k, t), Evaluator.less_than(k, x)
    return garbler, evaluator, garbler.respond(evaluator.request())


def test_a_made_up_output_label_is_detected_and_ends_the_run():
    garbler, evaluator, message = _started()
    honest = evaluator.evaluate(message)
    forged = EvaluatorResult((secrets.token_bytes(LABEL_BYTES),))
    with pytest.raises(OutputLabelError):
        garbler.decide(forged)
    with pytest.raises(CryptoError, match="state aborted"):
        garbler.decide(honest)


def test_an_input_label_returned_as_output_is_detected():
    garbler, evaluator, message = _started()
    with pytest.raises(OutputLabelError):
        garbler.decide(EvaluatorResult((message.garbler_labels[0],)))


def test_a_malformed_result_changes_no_state():
    garbler, evaluator, message = _started(x=10, t=9)
    honest = evaluator.evaluate(message)
    for bad in (EvaluatorResult(()), EvaluatorResult((honest.labels[0][:-1],)), EvaluatorResult(honest.labels * 2),
                b"x"):
        with pytest.raises(CryptoError):
            garbler.decide(bad)
    for data in (b"", b"\0\0\0\x01" + honest.labels[0][:-1], honest.to_bytes() + b"\0"):
        with pytest.raises(CryptoError):
            EvaluatorResult.from_bytes(data)
    assert garbler.decide(honest) is False
    with pytest.raises(CryptoError, match="state done"):
        garbler.decide(honest)


def test_evaluator_refuses_a_message_for_another_circuit_and_can_still_finish():
    garbler, evaluator, message = _started()
    other_g, other_e = Garbler.less_than(17, 1), Evaluator.less_than(17, 0)
    other = other_g.respond(other_e.request())
    with pytest.raises(CryptoError, match="agreed circuit"):
        evaluator.evaluate(other)
    with pytest.raises(CryptoError, match="garbler labels"):
        evaluator.evaluate(GarblerMessage(message.garbled, message.garbler_labels[1:], message.ot))
    with pytest.raises(CryptoError, match="GarblerMessage"):
        evaluator.evaluate(GarblerMessage(message.garbled, message.garbler_labels, b"not an OT response"))
    with pytest.raises(CryptoError, match="OT response"):
        evaluator.evaluate(GarblerMessage(message.garbled, message.garbler_labels, other.ot))
    data = message.to_bytes()
    for bad in (b"", data[:3], data[:100], data[:-1], data + b"\0"):
        with pytest.raises(CryptoError):
            GarblerMessage.from_bytes(bad)
    assert garbler.decide(evaluator.evaluate(message)) is True
    with pytest.raises(CryptoError, match="once"):
        evaluator.evaluate(message)


def test_garbler_refuses_bad_requests_and_steps_out_of_order():
    garbler = Garbler.less_than(16, 5)
    with pytest.raises(CryptoError, match="needs a sent"):
        garbler.decide(EvaluatorResult((bytes(16),)))
    with pytest.raises(CryptoError, match="16 input bits"):
        garbler.respond(Evaluator.less_than(8, 1).request())
    evaluator = Evaluator.less_than(16, 7)
    honest = evaluator.request()
    with pytest.raises(CryptoError, match="not an element"):
        garbler.respond(OTRequest(honest.group, (1,) + honest.pk0[1:]))
    message = garbler.respond(evaluator.request())
    with pytest.raises(CryptoError, match="once per run"):
        garbler.respond(evaluator.request())
    assert garbler.decide(evaluator.evaluate(message)) is False


def test_bad_parameters_are_refused():
    with pytest.raises(CryptoError):
        Evaluator.im2020(K, 2**64)
    with pytest.raises(CryptoError):
        Evaluator.less_than(8, -1)
    with pytest.raises(CryptoError, match="odd"):
        Garbler.im2020(K, 2, 0, 10)
    with pytest.raises(CryptoError, match="odd"):
        inverse_square(4, K)
    with pytest.raises(CryptoError):
        Garbler.im2020(K, 1, 0, 2**64)
    assert (inverse_square(3, 8) * 9) % 256 == 1


def test_circuit_sizes():
    """Costs in AND gates (2 × 16 bytes each): comparator k, im2020 ≈ k² + 3k."""
    assert less_than_circuit(64).and_count == 64
    assert im2020_circuit(64).and_count < im2020_circuit(64, range_check=True).and_count < 64 * 64 + 4 * 64
