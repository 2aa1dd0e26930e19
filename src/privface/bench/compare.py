"""Rows of `privface bench crypto` for the garbled-circuit secure comparison (crypto/compare.py).

Scheme ``gc-compare``, ``bits`` = k: for the im2020 circuit (seed 000 Fig. 8, range check on) at k = 64,
``garble`` (garbling the circuit), ``ot`` (k Naor–Pinkas transfers: request, response, receive),
``evaluate`` (evaluating the garbled circuit) and ``total`` (all three messages encoded and decoded plus
the garbler's decision); and ``total_lt`` for the plain k-bit comparator. Each row carries ``bytes`` (the
communication of that step; ``total``: all messages), and ``and_gates``.
"""
from __future__ import annotations

import secrets

from ..crypto import compare, garble
from ..crypto.ot import MODP_2048, OTReceiver, OTRequest, OTResponse, OTSender
from ..errors import CryptoError


def _run(garbler, evaluator) -> tuple[bool, int]:
    request = OTRequest.from_bytes(evaluator.request().to_bytes())
    message = garbler.respond(request).to_bytes()
    result = evaluator.evaluate(compare.GarblerMessage.from_bytes(message)).to_bytes()
    bit = garbler.decide(compare.EvaluatorResult.from_bytes(result))
    return bit, len(request.to_bytes()) + len(message) + len(result)


def _im2020_parties(k: int):
    sed, tau = secrets.randbelow(2**20), secrets.randbelow(2**20)
    r0, r1 = secrets.randbits(k) | 1, secrets.randbits(k)
    s_star = (r0 * r0 * sed + r1) % 2**k
    garbler = compare.Garbler.im2020(k, compare.inverse_square(r0, k), r1, tau, s_max=2**21)
    return garbler, compare.Evaluator.im2020(k, s_star, range_check=True), sed < tau


def gc_compare_rows(median_ms, row, k: int = 64, repeat: int = 5) -> list[dict]:
    """The rows described in the module docstring; `median_ms(fn, repeat)` and `row(...)` come from
    bench.crypto so that all rows share one timing rule and one shape."""
    circuit = compare.im2020_circuit(k, range_check=True)
    gcs = []
    gbits = [secrets.randbelow(2) for _ in circuit.garbler_inputs]  # its generator half-gates need them
    garble_ms = median_ms(lambda: gcs.append(garble.garble(circuit, gbits)), repeat)
    gc, garbling = gcs[-1]
    bits = [secrets.randbelow(2) for _ in circuit.evaluator_inputs]
    own = [pair[b] for pair, b in zip(garbling.evaluator_label_pairs(), bits)]
    glabels = garbling.garbler_labels(gbits)
    evaluate_ms = median_ms(lambda: garble.evaluate(circuit, gc, glabels, own), repeat)
    ot_bytes = []

    def ot() -> None:
        receiver = OTReceiver(bits, MODP_2048)
        request = OTRequest.from_bytes(receiver.request().to_bytes())
        response = OTSender(MODP_2048).respond(request, garbling.evaluator_label_pairs()).to_bytes()
        if receiver.receive(OTResponse.from_bytes(response)) != own:
            raise CryptoError("gc-compare benchmark: the OT delivered wrong labels")
        ot_bytes.append(len(request.to_bytes()) + len(response))

    ot_ms = median_ms(ot, repeat)
    totals = []

    def total(parties) -> None:
        garbler, evaluator, expected = parties()
        bit, n = _run(garbler, evaluator)
        if bit != expected:
            raise CryptoError("gc-compare benchmark: the garbler's decision differs from the plaintext one")
        totals.append(n)

    total_ms = median_ms(lambda: total(lambda: _im2020_parties(k)), repeat)
    total_bytes = totals[-1]

    def lt_parties():
        x, t = secrets.randbits(k), secrets.randbits(k)
        return compare.Garbler.less_than(k, t), compare.Evaluator.less_than(k, x), x < t

    lt_ms = median_ms(lambda: total(lt_parties), repeat)
    ands = circuit.and_count
    gc_bytes = len(gc.to_bytes()) + 4 + 4 + len(glabels) * garble.LABEL_BYTES
    return [
        row("gc-compare", k, "im2020_garble", garble_ms, repeat, bytes=gc_bytes, and_gates=ands),
        row("gc-compare", k, "im2020_ot", ot_ms, repeat, bytes=ot_bytes[-1], transfers=k, group=MODP_2048.name),
        row("gc-compare", k, "im2020_evaluate", evaluate_ms, repeat, bytes=4 + garble.LABEL_BYTES, and_gates=ands),
        row("gc-compare", k, "im2020_total", total_ms, repeat, bytes=total_bytes, and_gates=ands),
        row("gc-compare", k, "lt_total", lt_ms, repeat, bytes=totals[-1], and_gates=k),
    ]
