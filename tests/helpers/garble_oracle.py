"""The pure-Python half-gates garbling and evaluation that privface.crypto.garble ran before the native core
(native/src/garble.rs): the test oracle the native functions are compared with, byte for byte, on the same
randomness. ZRE15 Fig. 2 with the fixed-key hash H(x, j) = π(σ(x) ⊕ j) ⊕ σ(x), π = AES-128, σ(x) = 2·x in
GF(2^128) (see garble.py's module docstring)."""
from __future__ import annotations

from collections.abc import Sequence

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from privface.crypto.garble import Circuit

MASK = (1 << 128) - 1
HALF_TWEAK = 1 << 96


def double(x: int) -> int:
    """σ(x) = 2·x in GF(2^128) mod x^128 + x^7 + x^2 + x + 1."""
    return ((x << 1) & MASK) ^ (0x87 if x >> 127 else 0)


def hash_blocks(aes, sig: list[int], tweaks: list[int]) -> list[int]:
    """[H(x_i, j_i)] = [π(σ(x_i) ⊕ j_i) ⊕ σ(x_i)] given sig = [σ(x_i)]."""
    data = b"".join((s ^ t).to_bytes(16, "little") for s, t in zip(sig, tweaks))
    enc = aes.update(data)
    return [int.from_bytes(enc[16 * i:16 * i + 16], "little") ^ s for i, s in enumerate(sig)]


def garble_with(circuit: Circuit, garbler_bits: Sequence[int] | None, R: int, input_zero: Sequence[int],
                key: bytes) -> tuple[bytes, bytes, list[int]]:
    """(AND tables T_G ‖ T_E, half-gate tables, 0-label of every wire) for the given offset R, 0-labels of the
    inputs (garbler inputs, evaluator inputs, constants) and AES key."""
    known = dict(zip(circuit.garbler_inputs, garbler_bits or ()))
    zero = [0] * circuit.n_wires
    for w, z in zip((*circuit.garbler_inputs, *circuit.evaluator_inputs, *(w for w, _ in circuit.constants)),
                    input_zero, strict=True):
        zero[w] = z
    aes = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    tables, half, j = [], [], 0
    sR = double(R)
    for op, a, b, out in circuit.flat:
        if op == 0:  # XOR
            zero[out] = zero[a] ^ zero[b]
        elif op == 2:  # INV
            zero[out] = zero[a] ^ R
        elif op == 3:  # GAND
            B0, t = zero[b], HALF_TWEAK + len(half)
            sB = double(B0)
            hB0, hB1 = hash_blocks(aes, [sB, sB ^ sR], [t, t])
            T = hB0 ^ hB1 ^ (R if known[a] else 0)
            zero[out] = hB0 ^ (T if B0 & 1 else 0)
            half.append(T.to_bytes(16, "little"))
        else:  # AND
            A0, B0 = zero[a], zero[b]
            pa, pb = A0 & 1, B0 & 1
            sA, sB = double(A0), double(B0)
            hA0, hA1, hB0, hB1 = hash_blocks(aes, [sA, sA ^ sR, sB, sB ^ sR], [j, j, j + 1, j + 1])
            TG = hA0 ^ hA1 ^ (R if pb else 0)
            WG = hA0 ^ (TG if pa else 0)
            TE = hB0 ^ hB1 ^ A0
            WE = hB0 ^ ((TE ^ A0) if pb else 0)
            zero[out] = WG ^ WE
            tables.append(TG.to_bytes(16, "little") + TE.to_bytes(16, "little"))
            j += 2
    return b"".join(tables), b"".join(half), zero


def evaluate_with(circuit: Circuit, key: bytes, tables: bytes, half: bytes, fixed: Sequence[bytes],
                  own: Sequence[bytes]) -> list[bytes]:
    """Output labels from the active labels of the garbler inputs and constants (``fixed``) and of the
    evaluator inputs (``own``)."""
    W = [0] * circuit.n_wires
    wires = (*circuit.garbler_inputs, *(w for w, _ in circuit.constants), *circuit.evaluator_inputs)
    for w, x in zip(wires, (*fixed, *own), strict=True):
        W[w] = int.from_bytes(x, "little")
    aes = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    t = hi = 0
    for op, a, b, out in circuit.flat:
        if op == 0:
            W[out] = W[a] ^ W[b]
        elif op == 2:
            W[out] = W[a]
        elif op == 3:
            Wb = W[b]
            (h,) = hash_blocks(aes, [double(Wb)], [HALF_TWEAK + hi])
            W[out] = h ^ (int.from_bytes(half[16 * hi:16 * hi + 16], "little") if Wb & 1 else 0)
            hi += 1
        else:
            Wa, Wb = W[a], W[b]
            ha, hb = hash_blocks(aes, [double(Wa), double(Wb)], [2 * t, 2 * t + 1])
            tg = int.from_bytes(tables[32 * t:32 * t + 16], "little")
            te = int.from_bytes(tables[32 * t + 16:32 * t + 32], "little")
            W[out] = ha ^ (tg if Wa & 1 else 0) ^ hb ^ ((te ^ Wa) if Wb & 1 else 0)
            t += 1
    return [W[w].to_bytes(16, "little") for w in circuit.outputs]
