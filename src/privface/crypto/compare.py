"""Two-party secure comparison: Yao's garbled circuits (`garble`) with inputs by oblivious transfer (`ot`).

The garbler (honest-but-curious server) learns only the output bit; the evaluator (possibly malicious
client) learns nothing. Yao is secure against a malicious evaluator when the OT resists a malicious
receiver (Naor–Pinkas, `ot`) and the garbler keeps the output decoding (`Garbling.decode`).

Message flow (three messages, evaluator first — the OT is two-message, seed 004 App. B.4):

1. evaluator → garbler: `OTRequest` for the evaluator's input bits (`Evaluator.request`);
2. garbler → evaluator: `GarblerMessage` = garbled tables + garbler input labels + OT response
   (`Garbler.respond`);
3. evaluator → garbler: `EvaluatorResult` = output labels (`Evaluator.evaluate`); the garbler decodes
   them into its bit (`Garbler.decide`) and rejects a label that is not one of the two valid ones.

Circuits (one output bit unless noted): (a) `less_than_circuit` — [x < t], x from the evaluator, t from the
garbler; (b) `im2020_circuit` — seed 000 §VII Fig. 8: the evaluator holds the blinded score s* = r0²·SED + r1 mod 2^k
(seed 000 §IV-B, eq. (4)), the garbler r0_inv = (r0²)⁻¹ mod 2^k, r1 and τ; the circuit unblinds
s = r0_inv·(s* − r1) mod 2^k and outputs [s < τ], optionally ∧ [s ≤ s_max] (a range check on the
unblinded score; it adds nothing when τ ≤ s_max + 1, but refuses a τ set above the possible SED range);
(c) `gsm_pi3_circuit` — seed 004 §7 Fig. 6, two bits (consistency, match), read with `Garbler.decide_bits`.
"""
from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import CryptoError
from .garble import (
    LABEL_BYTES,
    Circuit,
    CircuitBuilder,
    GarbledCircuit,
    Garbling,
    OutputLabelError,
    check_bits,
    evaluate,
    garble,
    to_bits,
)
from .ot import MODP_2048, OTGroup, OTReceiver, OTRequest, OTResponse, OTSender, ReceiverRandomness

#: Who learns what, as data for the protocols that use this comparison (docs/architecture.md).
SECURITY = {
    "garbler": "honest-but-curious (the server)",
    "evaluator": "malicious (the client): OT secure against a malicious receiver, garbler keeps the decoding",
    "garbler_learns": "the output bit only",
    "evaluator_learns": "nothing (its output label is not decodable without the garbler's labels)",
    "assumptions": "CDH in the RFC 3526 group and SHAKE-256 as a random oracle (OT); AES-128 as an ideal "
                   "permutation (garbling hash)",
}


@functools.cache
def less_than_circuit(k: int) -> Circuit:
    """[x < t] for k-bit unsigned x (evaluator) and t (garbler). Circuits are immutable, so built once."""
    b = CircuitBuilder()
    x, t = b.evaluator_input(k), b.garbler_input(k)
    b.output(b.lt(x, t))
    return b.build()


@functools.cache
def gsm_pi3_circuit(k: int, range_check: bool = False, a_bits: int | None = None,
                    x_bits: int | None = None) -> Circuit:
    """Seed 004 §7 Fig. 6: evaluator X, Y; garbler pad, a, b, T. IP = X − pad mod 2^k; outputs
    ([a·IP + b = Y], [T ≤ IP]) — the first bit false is the figure's ⊥ (the device's inputs were not
    the ones the terminal encrypted). ``range_check`` adds a garbler input ip_max and a third bit
    [IP ≤ ip_max]: mod 2^k a forged IP′ = IP + 2^(k−1) passes the first check for every even a, so the
    terminal must refuse (⊥) an IP outside the possible range, as §6 does in Π2. ``a_bits``: a has only
    that many bits (§6: a < 2^λ), which drops the multiplier's rows for the higher bits of a; a is the
    garbler's, so its partial products are generator half-gates (``CircuitBuilder.and_known``).
    ``x_bits``: X, pad, T (and ip_max) have that many bits and IP = X − pad mod 2^x_bits, while a·IP + b and
    Y stay mod 2^k (``GsmParams.x_bits``: fewer OT inputs and a narrower multiplier)."""
    xb = x_bits or k
    if xb > k:
        raise CryptoError("gsm_pi3_circuit: x_bits must not exceed k")
    b = CircuitBuilder()
    X, Y = b.evaluator_input(xb), b.evaluator_input(k)
    pad, a = b.garbler_input(xb), b.garbler_input(a_bits or k)
    b_, T = b.garbler_input(k), b.garbler_input(xb)
    ip = b.sub(X, pad)
    prod = b.mul(ip, a, y_known=True) if xb == k else b.mul_wide(ip, a, k, y_known=True)
    bits = [b.eq(b.add(prod, b_), Y), b.le(T, ip)]
    if range_check:
        bits.append(b.le(ip, b.garbler_input(xb)))
    b.output(*bits)
    return b.build()


@functools.cache
def im2020_circuit(k: int, range_check: bool = False) -> Circuit:
    """Seed 000 Fig. 8: evaluator s*; garbler r0_inv, r1, τ (and s_max) → [s < τ] (∧ [s ≤ s_max]).

    r0_inv is the garbler's input, so the product's partial products r0_inv_i ∧ (s* − r1)_j are generator
    half-gates (ZRE15 §3.1, ``CircuitBuilder.and_known``): one 16-byte table each instead of two, and half the
    hashing, for the same function and the same security (the garbler knows its own bits)."""
    b = CircuitBuilder()
    s_star = b.evaluator_input(k)
    r0_inv, r1, tau = b.garbler_input(k), b.garbler_input(k), b.garbler_input(k)
    s = b.mul(b.sub(s_star, r1), r0_inv, y_known=True)
    accept = b.lt(s, tau)
    if range_check:
        accept = b.and_(accept, b.le(s, b.garbler_input(k)))
    b.output(accept)
    return b.build()


def inverse_square(r0: int, k: int) -> int:
    """(r0²)⁻¹ mod 2^k for odd r0: the garbler's r0_inv (seed 000 §IV-B unblinding (s* − r1)/r0²)."""
    if isinstance(r0, bool) or not isinstance(r0, int) or r0 % 2 == 0:
        raise CryptoError("r0 must be an odd integer (a unit mod 2^k)")
    return pow(r0 * r0, -1, 1 << k)


def _labels_to_bytes(labels: Sequence[bytes]) -> bytes:
    return struct.pack(">I", len(labels)) + b"".join(labels)


def _labels_from_bytes(data: bytes, offset: int, what: str) -> tuple[tuple[bytes, ...], int]:
    if len(data) < offset + 4:
        raise CryptoError(f"{what}: truncated label count")
    (n,) = struct.unpack_from(">I", data, offset)
    end = offset + 4 + n * LABEL_BYTES
    if len(data) < end:
        raise CryptoError(f"{what}: {n} labels do not fit in {len(data)} bytes")
    return tuple(bytes(data[i:i + LABEL_BYTES]) for i in range(offset + 4, end, LABEL_BYTES)), end


@dataclass(frozen=True)
class GarblerMessage:
    """Garbler → evaluator.
    Encoding: gc length u32 ‖ garbled circuit ‖ labels (u32 n ‖ n × 16) ‖ OT response."""

    garbled: GarbledCircuit
    garbler_labels: tuple[bytes, ...]
    ot: OTResponse

    def to_bytes(self) -> bytes:
        gc = self.garbled.to_bytes()
        return struct.pack(">I", len(gc)) + gc + _labels_to_bytes(self.garbler_labels) + self.ot.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> GarblerMessage:
        if not isinstance(data, (bytes, bytearray)) or len(data) < 4:
            raise CryptoError("garbler message: shorter than its header")
        (n,) = struct.unpack_from(">I", data)
        if len(data) < 4 + n:
            raise CryptoError("garbler message: truncated garbled circuit")
        gc = GarbledCircuit.from_bytes(bytes(data[4:4 + n]))
        labels, end = _labels_from_bytes(data, 4 + n, "garbler message")
        return cls(gc, labels, OTResponse.from_bytes(bytes(data[end:])))


@dataclass(frozen=True)
class EvaluatorResult:
    """Evaluator → garbler: the output labels. Encoding: u32 n ‖ n × 16 bytes."""

    labels: tuple[bytes, ...]

    def to_bytes(self) -> bytes:
        return _labels_to_bytes(self.labels)

    @classmethod
    def from_bytes(cls, data: bytes) -> EvaluatorResult:
        if not isinstance(data, (bytes, bytearray)):
            raise CryptoError("evaluator result: not bytes")
        labels, end = _labels_from_bytes(data, 0, "evaluator result")
        if end != len(data):
            raise CryptoError("evaluator result: trailing bytes")
        return cls(labels)


class Garbler:
    """Holds its input, garbles once per run, keeps the output decoding and learns only the output bit."""

    def __init__(self, circuit: Circuit, inputs: Sequence[int], group: OTGroup = MODP_2048) -> None:
        if not circuit.outputs:
            raise CryptoError("a circuit without outputs decides nothing")
        check_bits(inputs, len(circuit.garbler_inputs), "garbler input")
        self.circuit, self._bits, self._sender = circuit, list(inputs), OTSender(group)
        self._garbling: Garbling | None = None
        self._state = "new"

    @classmethod
    def less_than(cls, k: int, t: int, group: OTGroup = MODP_2048) -> Garbler:
        return cls(less_than_circuit(k), to_bits(t, k), group)

    @classmethod
    def im2020(cls, k: int, r0_inv: int, r1: int, tau: int, s_max: int | None = None,
               group: OTGroup = MODP_2048) -> Garbler:
        """Seed 000 Fig. 8 server side; r0_inv = `inverse_square(r0, k)`; s_max enables the range check."""
        if isinstance(r0_inv, int) and r0_inv % 2 == 0:
            raise CryptoError("r0_inv must be odd (a unit mod 2^k)")
        bits = to_bits(r0_inv, k) + to_bits(r1, k) + to_bits(tau, k)
        if s_max is not None:
            bits += to_bits(s_max, k)
        return cls(im2020_circuit(k, range_check=s_max is not None), bits, group)

    @classmethod
    def gsm_pi3(cls, k: int, pad: int, a: int, b: int, T: int, ip_max: int | None = None,
                group: OTGroup = MODP_2048, a_bits: int | None = None, x_bits: int | None = None) -> Garbler:
        """Seed 004 Fig. 5 round 4, terminal side (`gsm_pi3_circuit`); decide with `decide_bits`;
        ``ip_max`` enables the range check; ``a_bits`` (a < 2^a_bits) a shorter multiplier; ``x_bits`` the
        width of pad, T, ip_max (and of the device's X)."""
        xb = x_bits or k
        bits = to_bits(pad, xb) + to_bits(a, a_bits or k) + to_bits(b, k) + to_bits(T, xb)
        if ip_max is not None:
            bits += to_bits(ip_max, xb)
        return cls(gsm_pi3_circuit(k, ip_max is not None, a_bits, x_bits), bits, group)

    def respond(self, request: OTRequest) -> GarblerMessage:
        """Garble afresh and answer the evaluator's OT request; a bad request changes no state."""
        if self._state != "new":
            raise CryptoError(f"garbler: respond() once per run (state {self._state})")
        if not isinstance(request, OTRequest) or len(request.pk0) != len(self.circuit.evaluator_inputs):
            raise CryptoError(f"garbler: expected an OT request for {len(self.circuit.evaluator_inputs)} input bits")
        gc, garbling = garble(self.circuit, self._bits)
        ot = self._sender.respond(request, garbling.evaluator_label_pairs())
        self._garbling, self._state = garbling, "sent"
        return GarblerMessage(gc, tuple(garbling.garbler_labels(self._bits)), ot)

    def decide(self, result: EvaluatorResult) -> bool:
        """The output bit of a one-output circuit; see `decide_bits`."""
        if len(self.circuit.outputs) != 1:
            raise CryptoError("garbler: decide() is for one-output circuits; use decide_bits()")
        return self.decide_bits(result)[0]

    def decide_bits(self, result: EvaluatorResult) -> tuple[bool, ...]:
        """The output bits. A malformed result changes no state; a well-formed result with an invalid label
        raises `OutputLabelError` and ends the run (a cheating evaluator gets no second try)."""
        if self._state != "sent":
            raise CryptoError(f"garbler: decide() needs a sent garbled circuit (state {self._state})")
        n = len(self.circuit.outputs)
        if not isinstance(result, EvaluatorResult) or len(result.labels) != n:
            raise CryptoError(f"garbler: expected exactly {n} output label{'s' * (n > 1)}")
        try:
            bits = self._garbling.decode(result.labels)  # type: ignore[union-attr]  # state "sent" holds one
        except OutputLabelError:
            self._garbling, self._state = None, "aborted"
            raise
        self._garbling, self._state = None, "done"
        return tuple(map(bool, bits))


class Evaluator:
    """Holds its input bits; obtains their labels by OT, evaluates, returns the output labels."""

    def __init__(self, circuit: Circuit, inputs: Sequence[int], group: OTGroup = MODP_2048, *,
                 precomputed: ReceiverRandomness | None = None) -> None:
        """``precomputed``: the OT receiver's randomness made ahead of time (`ot.ReceiverRandomness`, consumed)."""
        check_bits(inputs, len(circuit.evaluator_inputs), "evaluator input")
        self.circuit, self._receiver = circuit, OTReceiver(list(inputs), group, precomputed=precomputed)
        self._done = False

    @classmethod
    def less_than(cls, k: int, x: int, group: OTGroup = MODP_2048) -> Evaluator:
        return cls(less_than_circuit(k), to_bits(x, k), group)

    @classmethod
    def im2020(cls, k: int, s_star: int, range_check: bool = False, group: OTGroup = MODP_2048, *,
               precomputed: ReceiverRandomness | None = None) -> Evaluator:
        """Seed 000 Fig. 8 client side: s* is the decrypted blinded score."""
        return cls(im2020_circuit(k, range_check), to_bits(s_star, k), group, precomputed=precomputed)

    @classmethod
    def gsm_pi3(cls, k: int, X: int, Y: int, range_check: bool = False, group: OTGroup = MODP_2048,
                a_bits: int | None = None, x_bits: int | None = None) -> Evaluator:
        """Seed 004 Fig. 5 round 3, device side: X = IP + pad, Y = a·IP + b (``a_bits``, ``x_bits`` as the
        garbler's)."""
        return cls(gsm_pi3_circuit(k, range_check, a_bits, x_bits), to_bits(X, x_bits or k) + to_bits(Y, k),
                   group)

    def request(self) -> OTRequest:
        return self._receiver.request()

    def evaluate(self, message: GarblerMessage) -> EvaluatorResult:
        """Check the message against the circuit, receive the input labels, evaluate; a bad message changes
        no state (the OT exponents stay for a correct retry)."""
        if self._done:
            raise CryptoError("evaluator: evaluate() once per run")
        if not (isinstance(message, GarblerMessage) and isinstance(message.garbled, GarbledCircuit)
                and isinstance(message.ot, OTResponse)):
            raise CryptoError("evaluator: expected a GarblerMessage")
        c = self.circuit
        if (message.garbled.digest != c.digest() or message.garbled.table_count != c.and_count
                or message.garbled.half_count != c.half_count):
            raise CryptoError("evaluator: the garbled circuit is not the agreed circuit")
        if len(message.garbler_labels) != len(c.garbler_inputs) + len(c.constants):
            raise CryptoError("evaluator: wrong number of garbler labels")
        if len(message.ot.ciphertexts) != len(c.evaluator_inputs) or message.ot.message_bytes != LABEL_BYTES:
            raise CryptoError("evaluator: the OT response does not carry one label per input bit")
        own = self._receiver.receive(message.ot)
        self._done = True
        return EvaluatorResult(tuple(evaluate(c, message.garbled, message.garbler_labels, own)))
