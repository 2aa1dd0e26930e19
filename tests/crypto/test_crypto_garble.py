"""Circuits, builder and half-gates garbling (crypto/garble.py) against Python arithmetic."""
import functools
import secrets

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto.garble import (
    LABEL_BYTES,
    CircuitBuilder,
    GarbledCircuit,
    OutputLabelError,
    evaluate,
    from_bits,
    garble,
    to_bits,
)
from privface.errors import CryptoError

OPS = ("add", "sub", "mul", "lt", "ge", "le")


@functools.cache
def arithmetic_circuit(k):
    """Evaluator x, garbler y → x+y, x−y, x·y (k bits each), [x<y], [x≥y], [x≤y], x+5, x·3 (constants)."""
    b = CircuitBuilder()
    x, y = b.evaluator_input(k), b.garbler_input(k)
    b.output(*b.add(x, y), *b.sub(x, y), *b.mul(x, y), b.lt(x, y), b.ge(x, y), b.le(x, y))
    b.output(*b.add(x, b.constant(5 % 2**k, k)), *b.mul(x, b.constant(3 % 2**k, k)))
    return b.build()


def expected(k, x, y):
    m = 2**k
    return [(x + y) % m, (x - y) % m, x * y % m, int(x < y), int(x >= y), int(x <= y), (x + 5) % m, 3 * x % m]


def split(k, bits):
    words = [from_bits(bits[i * k:(i + 1) * k]) for i in range(3)]
    flags = list(bits[3 * k:3 * k + 3])
    return words + flags + [from_bits(bits[3 * k + 3:4 * k + 3]), from_bits(bits[4 * k + 3:])]


def garbled_run(circuit, garbler_bits, evaluator_bits):
    gc, garbling = garble(circuit)
    gc = GarbledCircuit.from_bytes(gc.to_bytes())
    own = [pair[b] for pair, b in zip(garbling.evaluator_label_pairs(), evaluator_bits)]
    labels = evaluate(circuit, gc, garbling.garbler_labels(garbler_bits), own)
    return garbling.decode(labels)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 12), data=st.data())
def test_plain_circuits_match_python_arithmetic(k, data):
    x, y = data.draw(st.integers(0, 2**k - 1)), data.draw(st.integers(0, 2**k - 1))
    c = arithmetic_circuit(k)
    assert split(k, c.evaluate(to_bits(y, k), to_bits(x, k))) == expected(k, x, y)


@settings(max_examples=40, deadline=None)
@given(x=st.integers(0, 2**64 - 1), y=st.integers(0, 2**64 - 1))
def test_plain_k64_circuits_match_python_arithmetic(x, y):
    assert split(64, arithmetic_circuit(64).evaluate(to_bits(y, 64), to_bits(x, 64))) == expected(64, x, y)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 10), data=st.data())
def test_garbled_evaluation_matches_plain(k, data):
    x, y = data.draw(st.integers(0, 2**k - 1)), data.draw(st.integers(0, 2**k - 1))
    c = arithmetic_circuit(k)
    assert split(k, garbled_run(c, to_bits(y, k), to_bits(x, k))) == expected(k, x, y)


@functools.cache
def eq_circuit(k):
    b = CircuitBuilder()
    b.output(b.eq(b.evaluator_input(k), b.garbler_input(k)))
    return b.build()


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 9), data=st.data())
def test_equality_plain_and_garbled(k, data):
    x = data.draw(st.integers(0, 2**k - 1))
    y = data.draw(st.one_of(st.just(x), st.integers(0, 2**k - 1), st.sampled_from([x ^ (1 << i) for i in range(k)])))
    c = eq_circuit(k)
    assert c.and_count == k - 1
    assert c.evaluate(to_bits(y, k), to_bits(x, k)) == garbled_run(c, to_bits(y, k), to_bits(x, k)) == (int(x == y),)


def _edge_pairs(k):
    top = 2**k - 1
    r = secrets.randbits(k)
    return [(0, 0), (0, top), (top, 0), (top, top), (r, r), (r, (r + 1) % 2**k), ((r + 1) % 2**k, r),
            (1, 0), (0, 1), (top - 1, top), (top, top - 1)] + [(secrets.randbits(k), secrets.randbits(k))
                                                              for _ in range(3)]


def test_k64_edge_and_random_inputs_garbled():
    k, c = 64, arithmetic_circuit(64)
    for x, y in _edge_pairs(k):
        assert split(k, garbled_run(c, to_bits(y, k), to_bits(x, k))) == expected(k, x, y), (x, y)


def test_half_gates_size_and_fresh_garbling():
    c = arithmetic_circuit(8)
    gc1, g1 = garble(c)
    gc2, g2 = garble(c)
    assert len(gc1.tables) == c.and_count and len(gc1.to_bytes()) == 52 + 2 * LABEL_BYTES * c.and_count
    assert gc1.tables != gc2.tables and gc1.key != gc2.key
    assert g1.label(0, 0) != g2.label(0, 0)
    w = c.evaluator_inputs[0]
    assert g1.label(w, 0) != g1.label(w, 1) and g1.label(w, 0)[0] & 1 != g1.label(w, 1)[0] & 1  # permute bits differ


def _lt_setup(k=16):
    b = CircuitBuilder()
    b.output(b.lt(b.evaluator_input(k), b.garbler_input(k)))
    c = b.build()
    gc, garbling = garble(c)
    x, t = 3, 9
    labels = evaluate(c, gc, garbling.garbler_labels(to_bits(t, k)),
                      [p[bit] for p, bit in zip(garbling.evaluator_label_pairs(), to_bits(x, k))])
    return c, gc, garbling, labels


def test_output_label_does_not_reveal_the_output():
    """Point-and-permute: the lsb of the evaluator's output label is random, whatever the output bit."""
    b = CircuitBuilder()
    b.output(b.lt(b.evaluator_input(4), b.garbler_input(4)))
    c = b.build()
    seen = set()
    for _ in range(40):
        gc, garbling = garble(c)
        labels = evaluate(c, gc, garbling.garbler_labels(to_bits(9, 4)),
                          [p[bit] for p, bit in zip(garbling.evaluator_label_pairs(), to_bits(3, 4))])
        assert garbling.decode(labels) == (1,)
        seen.add(labels[0][0] & 1)
    assert seen == {0, 1}


def test_made_up_or_wrong_wire_output_labels_are_detected():
    c, _, garbling, labels = _lt_setup()
    assert garbling.decode(labels) == (1,)
    flipped = bytes([labels[0][0] ^ 1]) + labels[0][1:]
    for bad in (secrets.token_bytes(LABEL_BYTES), flipped, bytes(LABEL_BYTES),
                garbling.label(c.evaluator_inputs[0], 0), garbling.label(c.evaluator_inputs[0], 1)):
        with pytest.raises(OutputLabelError):
            garbling.decode([bad])
    for bad in ([], [labels[0], labels[0]], [labels[0][:-1]], ["x" * 16]):
        with pytest.raises(CryptoError, match="output labels"):
            garbling.decode(bad)


def test_evaluate_refuses_a_mismatched_circuit_or_inputs():
    c, gc, garbling, _ = _lt_setup()
    other = arithmetic_circuit(16)
    glabels = garbling.garbler_labels(to_bits(1, 16))
    elabels = [p[0] for p in garbling.evaluator_label_pairs()]
    with pytest.raises(CryptoError, match="different circuit"):
        evaluate(other, gc, glabels, elabels)
    with pytest.raises(CryptoError, match="AND tables"):
        evaluate(c, GarbledCircuit(gc.digest, gc.key, gc.tables[:-1]), glabels, elabels)
    with pytest.raises(CryptoError, match="evaluator labels"):
        evaluate(c, gc, glabels, elabels[:-1])
    with pytest.raises(CryptoError, match="garbler labels"):
        evaluate(c, gc, glabels + [b"\0" * 16], elabels)
    data = gc.to_bytes()
    for bad in (b"", data[:-1], data + b"\0"):
        with pytest.raises(CryptoError):
            GarbledCircuit.from_bytes(bad)


def test_bad_inputs_are_refused():
    c = arithmetic_circuit(4)
    with pytest.raises(CryptoError):
        to_bits(16, 4)
    with pytest.raises(CryptoError):
        to_bits(-1, 4)
    with pytest.raises(CryptoError):
        to_bits(True, 4)
    with pytest.raises(CryptoError):
        c.evaluate([0, 1, 2, 0], [0] * 4)
    with pytest.raises(CryptoError):
        c.evaluate([0] * 3, [0] * 4)
    _, garbling = garble(c)
    with pytest.raises(CryptoError):
        garbling.garbler_labels([0] * 5)
    assert c.digest() == arithmetic_circuit(4).digest() != arithmetic_circuit(5).digest()
