"""The native half-gates garbling and evaluation (native/src/garble.rs) against the pure-Python oracle
(tests/helpers/garble_oracle.py, the code garble.py ran before): the same tables, labels and output labels,
byte for byte, on random circuits, inputs and randomness — hence the same wire bytes as before."""
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto import compare
from privface.crypto.garble import LABEL_BYTES, CircuitBuilder, evaluate, garble_with
from tests.helpers import garble_oracle as oracle


@st.composite
def circuits(draw):
    """A random circuit over XOR, AND, INV and GAND gates, with garbler, evaluator and constant inputs."""
    b = CircuitBuilder()
    g = b.garbler_input(draw(st.integers(1, 4)))
    wires = g + b.evaluator_input(draw(st.integers(1, 4)))
    wires += b.constant(draw(st.integers(0, 3)), 2) if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 40))):
        op = draw(st.sampled_from(("xor", "and", "inv", "gand")))
        x, y = draw(st.sampled_from(wires)), draw(st.sampled_from(wires))
        wires.append(b.xor(x, y) if op == "xor" else b.and_(x, y) if op == "and" else b.inv(x) if op == "inv"
                     else b.and_known(draw(st.sampled_from(g)), y))
    b.output(*draw(st.lists(st.sampled_from(wires), min_size=1, max_size=6)))
    return b.build()


def randomness(c, data):
    n_in = len(c.garbler_inputs) + len(c.evaluator_inputs) + len(c.constants)
    R = data.draw(st.integers(0, 2**128 - 1)) | 1
    zero = [data.draw(st.integers(0, 2**128 - 1)) for _ in range(n_in)]
    return R, zero, data.draw(st.binary(min_size=16, max_size=16))


def check_against_oracle(c, gbits, ebits, R, zero, key):
    gc, garbling = garble_with(c, gbits, R, b"".join(z.to_bytes(LABEL_BYTES, "little") for z in zero), key)
    tables, half, zero_all = oracle.garble_with(c, gbits, R, zero, key)
    assert gc.table_bytes == tables and gc.half_bytes == half and gc.key == key
    assert [garbling.label(w, 0) for w in range(c.n_wires)] == [z.to_bytes(16, "little") for z in zero_all]
    fixed = garbling.garbler_labels(gbits)
    own = [pair[b] for pair, b in zip(garbling.evaluator_label_pairs(), ebits)]
    out = evaluate(c, gc, fixed, own)
    assert out == oracle.evaluate_with(c, key, tables, half, fixed, own)
    assert garbling.decode(out) == c.evaluate(gbits, ebits)


@settings(max_examples=150, deadline=None)
@given(c=circuits(), data=st.data())
def test_native_garbling_equals_the_oracle_on_random_circuits(c, data):
    gbits = data.draw(st.lists(st.integers(0, 1), min_size=len(c.garbler_inputs), max_size=len(c.garbler_inputs)))
    ebits = data.draw(st.lists(st.integers(0, 1), min_size=len(c.evaluator_inputs),
                               max_size=len(c.evaluator_inputs)))
    check_against_oracle(c, gbits, ebits, *randomness(c, data))


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_native_garbling_equals_the_oracle_on_the_protocol_circuits(seed):
    """im2020 §VII at full k = 136 and gsm Π3 with its generator half-gates."""
    rng = random.Random(seed)
    for c in (compare.im2020_circuit(136), compare.gsm_pi3_circuit(64, True, 40, 32)):
        gbits = [rng.getrandbits(1) for _ in c.garbler_inputs]
        ebits = [rng.getrandbits(1) for _ in c.evaluator_inputs]
        zero = [rng.getrandbits(128) for _ in range(len(c.garbler_inputs) + len(c.evaluator_inputs)
                                                    + len(c.constants))]
        check_against_oracle(c, gbits, ebits, rng.getrandbits(128) | 1, zero, rng.randbytes(16))
