"""Boolean circuits, a small circuit builder, and Yao garbling with free-XOR and half-gates.

* Circuits: XOR, AND and INV (= NOT) gates over numbered wires; integers are little-endian bit lists.
* Builder: k-bit add, subtract and multiply mod 2^k, less-than / greater-or-equal comparators,
  equality, constant inputs (seed 004 §7 Fig. 6 and seed 000 §VII Fig. 8 need no more).
* Garbling: free-XOR (Kolesnikov–Schneider 2008), point-and-permute, half-gates (Zahur–Rosulek–Evans,
  "Two halves make a whole", EUROCRYPT 2015, Fig. 2: two 128-bit ciphertexts per AND gate).
  Hash H(x, j) = π(σ(x) ⊕ j) ⊕ σ(x), π = AES-128 under a public key drawn per garbling, σ(x) = 2·x in
  GF(2^128) (a linear orthomorphism: 2x ⊕ x = 3x is a permutation) — the fixed-key form of Bellare et al.
  (S&P 2013) that ZRE15 uses, proven tweakable circular-correlation robust by Guo–Katz–Wang–Yu (S&P 2020).
* Output: the garbler keeps the decoding (both output labels); the evaluator returns the labels it got
  and learns nothing; a returned label that is neither valid label is an `OutputLabelError`.

The garbling and evaluation loops run in the native core (native/src/garble.rs, through ``native.ext``);
this module builds the circuits, draws the randomness (R, the inputs' 0-labels, the AES key) and checks
every message before the native code sees it.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import CryptoError
from .native import ext

LABEL_BYTES = 16
OPS = ("XOR", "AND", "INV", "GAND")
"""GAND = a ∧ b where a is a garbler input wire: a generator half-gate (ZRE15 §3.1), one ciphertext."""


class OutputLabelError(CryptoError):
    """The evaluator returned an output label that is neither label of its wire: it cheated (or garbage)."""


@dataclass(frozen=True, slots=True)
class Gate:
    op: str  # "XOR" | "AND" | "INV" | "GAND"
    a: int
    b: int  # -1 for INV
    out: int


@dataclass(frozen=True)
class Circuit:
    """A topologically ordered boolean circuit. Inputs are listed per party; constants are (wire, bit)."""

    n_wires: int
    garbler_inputs: tuple[int, ...]
    evaluator_inputs: tuple[int, ...]
    constants: tuple[tuple[int, int], ...]
    gates: tuple[Gate, ...]
    outputs: tuple[int, ...]

    @functools.cached_property
    def and_count(self) -> int:
        return sum(g.op == "AND" for g in self.gates)

    @functools.cached_property
    def half_count(self) -> int:
        """Generator half-gates (GAND): one 16-byte table each."""
        return sum(g.op == "GAND" for g in self.gates)

    @functools.cached_property
    def flat(self) -> tuple[tuple[int, int, int, int], ...]:
        """(op index in OPS, a, b, out) per gate: the garbling loops read plain ints, not Gate attributes."""
        return tuple((OPS.index(g.op), g.a, g.b, g.out) for g in self.gates)

    @functools.cached_property
    def native(self):
        """The circuit as the native core holds it (built once; circuits are immutable)."""
        return ext.Circuit(self.n_wires, list(self.flat), list(self.garbler_inputs), list(self.evaluator_inputs),
                           [w for w, _ in self.constants], list(self.outputs))

    def digest(self) -> bytes:
        """SHA-256 of the circuit: both parties check they garble and evaluate the same one."""
        return self._digest

    @functools.cached_property
    def _digest(self) -> bytes:
        h = hashlib.sha256(b"privface/circuit/v1")
        for part in (self.garbler_inputs, self.evaluator_inputs, self.outputs):
            h.update(struct.pack(f">I{len(part)}I", len(part), *part))
        h.update(struct.pack(">II", self.n_wires, len(self.constants)))
        for w, bit in self.constants:
            h.update(struct.pack(">IB", w, bit))
        for g in self.gates:
            h.update(struct.pack(">BiiI", OPS.index(g.op), g.a, g.b, g.out))
        return h.digest()

    def evaluate(self, garbler_bits: Sequence[int], evaluator_bits: Sequence[int]) -> tuple[int, ...]:
        """The plaintext value of the outputs (the reference the garbled evaluation must match)."""
        check_bits(garbler_bits, len(self.garbler_inputs), "garbler input")
        check_bits(evaluator_bits, len(self.evaluator_inputs), "evaluator input")
        v = [0] * self.n_wires
        for w, bit in zip(self.garbler_inputs, garbler_bits):
            v[w] = bit
        for w, bit in zip(self.evaluator_inputs, evaluator_bits):
            v[w] = bit
        for w, bit in self.constants:
            v[w] = bit
        for g in self.gates:
            v[g.out] = v[g.a] ^ v[g.b] if g.op == "XOR" else v[g.a] ^ 1 if g.op == "INV" else v[g.a] & v[g.b]
        return tuple(v[w] for w in self.outputs)


def check_bits(bits: Sequence[int], n: int, what: str) -> None:
    """n bits, each the integer 0 or 1; anything else is a CryptoError."""
    if len(bits) != n or any(b not in (0, 1) or isinstance(b, bool) for b in bits):
        raise CryptoError(f"{what}: expected {n} bits (integers 0/1)")


def to_bits(value: int, k: int) -> list[int]:
    """The k-bit little-endian representation of 0 ≤ value < 2^k."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << k:
        raise CryptoError(f"a {k}-bit input must be an integer in [0, 2^{k}), got {value!r}")
    return [(value >> i) & 1 for i in range(k)]


def from_bits(bits: Sequence[int]) -> int:
    return sum(b << i for i, b in enumerate(bits))


class CircuitBuilder:
    """Builds a `Circuit`; words are little-endian lists of wire numbers."""

    def __init__(self) -> None:
        self._n = 0
        self._garbler: list[int] = []
        self._evaluator: list[int] = []
        self._constants: list[tuple[int, int]] = []
        self._gates: list[Gate] = []
        self._outputs: list[int] = []

    def _wire(self) -> int:
        self._n += 1
        return self._n - 1

    def garbler_input(self, k: int) -> list[int]:
        ws = [self._wire() for _ in range(k)]
        self._garbler += ws
        return ws

    def evaluator_input(self, k: int) -> list[int]:
        ws = [self._wire() for _ in range(k)]
        self._evaluator += ws
        return ws

    def constant(self, value: int, k: int) -> list[int]:
        """A public k-bit constant (its labels travel with the garbler's)."""
        ws = [self._wire() for _ in range(k)]
        self._constants += zip(ws, to_bits(value, k))
        return ws

    def _gate(self, op: str, a: int, b: int = -1) -> int:
        out = self._wire()
        self._gates.append(Gate(op, a, b, out))
        return out

    def xor(self, a: int, b: int) -> int:
        return self._gate("XOR", a, b)

    def and_(self, a: int, b: int) -> int:
        return self._gate("AND", a, b)

    def inv(self, a: int) -> int:
        return self._gate("INV", a)

    def and_known(self, a: int, b: int) -> int:
        """a ∧ b for a garbler input wire a (the garbler knows its bit): a generator half-gate, half the
        garbled table and hashing of ``and_``."""
        if a not in self._garbler:
            raise CryptoError("and_known: the first input must be a garbler input wire")
        return self._gate("GAND", a, b)

    def _add(self, x: Sequence[int], y: Sequence[int], carry: int | None) -> tuple[list[int], int | None]:
        """Ripple-carry x + y + carry, one AND per bit: c' = c ⊕ ((x ⊕ c) ∧ (y ⊕ c)). None = carry 0."""
        out = []
        for a, b in zip(x, y, strict=True):
            if carry is None:
                out.append(self.xor(a, b))
                carry = self.and_(a, b)
                continue
            out.append(self.xor(self.xor(a, b), carry))
            carry = self.xor(carry, self.and_(self.xor(a, carry), self.xor(b, carry)))
        return out, carry

    def add(self, x: Sequence[int], y: Sequence[int]) -> list[int]:
        """x + y mod 2^k."""
        return self._add(x, y, None)[0]

    def _x_plus_not_y_plus_1(self, x: Sequence[int], y: Sequence[int]) -> tuple[list[int], int]:
        """x + ¬y + 1 = x − y mod 2^k; its carry out is [x ≥ y]."""
        one = self.constant(1, 1)[0]
        return self._add(x, [self.inv(b) for b in y], one)  # type: ignore[return-value]  # carry in → carry out

    def sub(self, x: Sequence[int], y: Sequence[int]) -> list[int]:
        """x − y mod 2^k."""
        return self._x_plus_not_y_plus_1(x, y)[0]

    def mul(self, x: Sequence[int], y: Sequence[int], *, y_known: bool = False) -> list[int]:
        """x · y mod 2^k for k = len(x) and a y of at most k bits, schoolbook: Σ_i y_i·x·2^i keeping the low
        k bits (≈ 2·Σ_{i < len(y)} (k − i) ANDs: a short y, e.g. a λ-bit factor, saves rows). ``y_known``: y
        is a garbler input, so the partial products are generator half-gates (``and_known``)."""
        k = len(x)
        if not 0 < len(y) <= k:
            raise CryptoError("mul: the second operand must have 1 … len(x) bits")
        bit = (lambda a, yi: self.and_known(yi, a)) if y_known else self.and_
        acc = [bit(a, y[0]) for a in x]
        for i in range(1, len(y)):
            partial = [bit(a, y[i]) for a in x[:k - i]]
            acc = acc[:i] + self._add(acc[i:], partial, None)[0]
        return acc

    def mul_wide(self, x: Sequence[int], y: Sequence[int], k: int, *, y_known: bool = False) -> list[int]:
        """x · y mod 2^k for a k ≥ len(x): the product is not truncated to x's width. Schoolbook with
        len(x)-bit partial products: row i adds y_i·x into bits [i, i + len(x)] of the accumulator, so each
        row costs len(x) (half-)ANDs and len(x) ANDs whatever k is — a 31-bit x times a 40-bit y into 71 bits
        costs ≈ 2·40·31 gates instead of ≈ 2·Σ(71 − i) for ``mul`` on x zero-extended to 71 bits."""
        if not 0 < len(y) or len(x) > k:
            raise CryptoError("mul_wide: need a non-empty y and len(x) ≤ k")
        bit = (lambda a, yi: self.and_known(yi, a)) if y_known else self.and_
        acc = [bit(a, y[0]) for a in x]
        for i in range(1, min(len(y), k)):
            partial = [bit(a, y[i]) for a in x[:k - i]]
            high = acc[i:]  # len(partial) − 1 bits (or fewer at the top), then the carry
            out, carry = self._add(high, partial[:len(high)], None)
            for b in partial[len(high):]:  # half adders for the partial product's top bit(s)
                if carry is None:
                    out.append(b)
                    continue
                out.append(self.xor(b, carry))
                carry = self.and_(b, carry)
            acc = acc[:i] + out + ([carry] if carry is not None and i + len(out) < k else [])
        return acc + self.constant(0, k - len(acc)) if len(acc) < k else acc[:k]

    def ge(self, x: Sequence[int], y: Sequence[int]) -> int:
        """[x ≥ y] (unsigned): the carry out of x + ¬y + 1."""
        return self._x_plus_not_y_plus_1(x, y)[1]

    def lt(self, x: Sequence[int], y: Sequence[int]) -> int:
        """[x < y] (unsigned)."""
        return self.inv(self.ge(x, y))

    def le(self, x: Sequence[int], y: Sequence[int]) -> int:
        """[x ≤ y] (unsigned) = [y ≥ x]."""
        return self.ge(y, x)

    def eq(self, x: Sequence[int], y: Sequence[int]) -> int:
        """[x = y]: the AND (balanced tree, k − 1 gates) of ¬(x_i ⊕ y_i)."""
        level = [self.inv(self.xor(a, b)) for a, b in zip(x, y, strict=True)]
        while len(level) > 1:
            level = [self.and_(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)] + level[len(level) & ~1:]
        return level[0]

    def output(self, *bits: int) -> None:
        self._outputs += bits

    def build(self) -> Circuit:
        return Circuit(self._n, tuple(self._garbler), tuple(self._evaluator), tuple(self._constants),
                       tuple(self._gates), tuple(self._outputs))


# --- garbling ---------------------------------------------------------------------------------


def _label(x: int) -> bytes:
    return x.to_bytes(LABEL_BYTES, "little")


class GarbledCircuit:
    """What the evaluator receives: circuit digest, public AES key, two ciphertexts per AND gate and one per
    generator half-gate (GAND). Encoding: digest (32) ‖ key (16) ‖ n u32 ‖ n × (T_G ‖ T_E), then, only when
    there are half-gates, h u32 ‖ h × T. Immutable; ``tables`` / ``half_tables`` are the tables one by one,
    ``table_bytes`` / ``half_bytes`` the same concatenated (what the native evaluation reads)."""

    __slots__ = ("digest", "key", "table_bytes", "half_bytes")
    digest: bytes
    key: bytes
    table_bytes: bytes
    half_bytes: bytes

    def __init__(self, digest: bytes, key: bytes, tables: Sequence[tuple[bytes, bytes]] = (),
                 half_tables: Sequence[bytes] = ()) -> None:
        self._set(digest, key, b"".join(a + b for a, b in tables), b"".join(half_tables))

    def _set(self, digest: bytes, key: bytes, table_bytes: bytes, half_bytes: bytes) -> None:
        for name, value in (("digest", digest), ("key", key), ("table_bytes", table_bytes), ("half_bytes", half_bytes)):
            object.__setattr__(self, name, bytes(value))

    @classmethod
    def _of(cls, digest: bytes, key: bytes, table_bytes: bytes, half_bytes: bytes) -> GarbledCircuit:
        gc = cls.__new__(cls)
        gc._set(digest, key, table_bytes, half_bytes)
        return gc

    def __setattr__(self, name, value):
        raise AttributeError("GarbledCircuit is immutable")

    def __eq__(self, other) -> bool:
        if not isinstance(other, GarbledCircuit):
            return NotImplemented
        return (self.digest, self.key, self.table_bytes, self.half_bytes) == (
            other.digest, other.key, other.table_bytes, other.half_bytes)

    def __hash__(self) -> int:
        return hash((self.digest, self.key, self.table_bytes, self.half_bytes))

    def __repr__(self) -> str:
        return f"GarbledCircuit({self.table_count} AND tables, {self.half_count} half-gate tables)"

    @property
    def table_count(self) -> int:
        return len(self.table_bytes) // (2 * LABEL_BYTES)

    @property
    def half_count(self) -> int:
        return len(self.half_bytes) // LABEL_BYTES

    @property
    def tables(self) -> tuple[tuple[bytes, bytes], ...]:
        t = self.table_bytes
        return tuple((t[i:i + 16], t[i + 16:i + 32]) for i in range(0, len(t), 32))

    @property
    def half_tables(self) -> tuple[bytes, ...]:
        h = self.half_bytes
        return tuple(h[i:i + 16] for i in range(0, len(h), 16))

    def to_bytes(self) -> bytes:
        out = self.digest + self.key + struct.pack(">I", self.table_count) + self.table_bytes
        if self.half_bytes:
            out += struct.pack(">I", self.half_count) + self.half_bytes
        return out

    @classmethod
    def from_bytes(cls, data: bytes) -> GarbledCircuit:
        if not isinstance(data, (bytes, bytearray)) or len(data) < 52:
            raise CryptoError("garbled circuit: shorter than its header")
        data = bytes(data)
        (n,) = struct.unpack_from(">I", data, 48)
        end = 52 + 32 * n
        half = b""
        if len(data) > end + 4:
            (h,) = struct.unpack_from(">I", data, end)
            if h == 0 or len(data) != end + 4 + 16 * h:
                raise CryptoError(f"garbled circuit: {h} half-gate tables need {end + 4 + 16 * h} bytes, "
                                  f"got {len(data)}")
            half = data[end + 4:]
        elif len(data) != end:
            raise CryptoError(f"garbled circuit: {n} tables need {end} bytes, got {len(data)}")
        return cls._of(data[:32], data[32:48], data[52:end], half)


class Garbling:
    """The garbler's secrets for one garbled circuit: the offset R (lsb 1) and every wire's 0-label (16 bytes
    each, little-endian, wire by wire)."""

    def __init__(self, circuit: Circuit, R: int, zero: bytes) -> None:
        self.circuit, self._R, self._zero = circuit, R, zero

    def label(self, wire: int, bit: int) -> bytes:
        zero = self._zero[LABEL_BYTES * wire:LABEL_BYTES * (wire + 1)]
        return _label(int.from_bytes(zero, "little") ^ self._R) if bit else zero

    def garbler_labels(self, garbler_bits: Sequence[int]) -> list[bytes]:
        """Active labels of the garbler's inputs followed by those of the constants."""
        c = self.circuit
        check_bits(garbler_bits, len(c.garbler_inputs), "garbler input")
        return ([self.label(w, b) for w, b in zip(c.garbler_inputs, garbler_bits)]
                + [self.label(w, b) for w, b in c.constants])

    def evaluator_label_pairs(self) -> list[tuple[bytes, bytes]]:
        """(label of 0, label of 1) for each evaluator input: the OT sender's messages."""
        return [(self.label(w, 0), self.label(w, 1)) for w in self.circuit.evaluator_inputs]

    def decode(self, output_labels: Sequence[bytes]) -> tuple[int, ...]:
        """The output bits the returned labels stand for; any other label is an `OutputLabelError`."""
        outs = self.circuit.outputs
        if len(output_labels) != len(outs) or any(not isinstance(x, bytes) or len(x) != LABEL_BYTES
                                                  for x in output_labels):
            raise CryptoError(f"expected {len(outs)} output labels of {LABEL_BYTES} bytes")
        bits = []
        for w, got in zip(outs, output_labels):
            is0, is1 = hmac.compare_digest(got, self.label(w, 0)), hmac.compare_digest(got, self.label(w, 1))
            if not (is0 or is1):
                raise OutputLabelError("the evaluator returned an output label that is not a label of its wire")
            bits.append(int(is1))
        return tuple(bits)


def garble(circuit: Circuit, garbler_bits: Sequence[int] | None = None) -> tuple[GarbledCircuit, Garbling]:
    """Garble with free-XOR and half-gates (ZRE15 Fig. 2); fresh R, labels and AES key each call. A circuit
    with generator half-gates (GAND) needs the garbler's input bits: T = H(B₀) ⊕ H(B₁) ⊕ a·R and the
    0-label H(B₀) ⊕ lsb(B₀)·T (ZRE15 §3.1), so the evaluator's H(B_b) ⊕ lsb(B_b)·T is the label of a ∧ b."""
    if circuit.half_count:
        if garbler_bits is None:
            raise CryptoError("garble: a circuit with generator half-gates needs the garbler's input bits")
        check_bits(garbler_bits, len(circuit.garbler_inputs), "garbler input")
    n_inputs = len(circuit.garbler_inputs) + len(circuit.evaluator_inputs) + len(circuit.constants)
    R = secrets.randbits(128) | 1  # lsb(R) = 1: the point-and-permute bit of a label is its lsb
    return garble_with(circuit, garbler_bits, R, secrets.token_bytes(LABEL_BYTES * n_inputs), secrets.token_bytes(16))


def garble_with(circuit: Circuit, garbler_bits: Sequence[int] | None, R: int, input_zero: bytes,
                key: bytes) -> tuple[GarbledCircuit, Garbling]:
    """``garble`` with given randomness: offset R (odd), the 0-labels of the inputs (garbler inputs,
    evaluator inputs, constants; 16 bytes each) and the AES key. Only ``garble`` and tests call it."""
    bits = bytes(garbler_bits) if circuit.half_count and garbler_bits is not None else b""
    tables, half, zero = ext.garble_circuit(circuit.native, bits, _label(R), input_zero, key)
    return GarbledCircuit._of(circuit.digest(), key, tables, half), Garbling(circuit, R, zero)


def evaluate(circuit: Circuit, gc: GarbledCircuit, garbler_labels: Sequence[bytes],
             evaluator_labels: Sequence[bytes]) -> list[bytes]:
    """Evaluate `gc` on active labels (garbler inputs + constants, then evaluator inputs); returns the
    output labels, which only the garbler can decode. A circuit/size mismatch is a CryptoError."""
    if gc.digest != circuit.digest():
        raise CryptoError("garbled circuit: it was garbled from a different circuit")
    if gc.table_count != circuit.and_count or gc.half_count != circuit.half_count:
        raise CryptoError(f"garbled circuit: {circuit.and_count} AND tables and {circuit.half_count} half-gate "
                          f"tables expected, got {gc.table_count} and {gc.half_count}")
    fixed = (*circuit.garbler_inputs, *(w for w, _ in circuit.constants))
    for labels, wires, what in ((garbler_labels, fixed, "garbler"),
                                (evaluator_labels, circuit.evaluator_inputs, "evaluator")):
        if len(labels) != len(wires) or any(not isinstance(x, bytes) or len(x) != LABEL_BYTES for x in labels):
            raise CryptoError(f"garbled circuit: expected {len(wires)} {what} labels of {LABEL_BYTES} bytes")
    out = ext.evaluate_circuit(circuit.native, gc.key, gc.table_bytes, gc.half_bytes, b"".join(garbler_labels),
                               b"".join(evaluator_labels))
    return [out[i:i + LABEL_BYTES] for i in range(0, len(out), LABEL_BYTES)]
