"""Structure-blind mutations of a valid message, shared by the schemathesis hooks and the corpus writer."""
from __future__ import annotations

import random

EXTREMES = (b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x00\x00\xff\xff", b"\x7f\xff\xff\xff")


def mutate(seed: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    """1–4 of: bit flip, truncation, inserted random bytes, a would-be length/count field set to an extreme
    value, a splice with another message of ``pool``, a byte set to a boundary value."""
    b = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        if kind == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 1 and b:
            del b[rng.randrange(len(b)):]
        elif kind == 2:
            at = rng.randrange(len(b) + 1)
            b[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == 3 and len(b) >= 4:
            at = rng.randrange(len(b) - 3)
            b[at:at + 4] = rng.choice(EXTREMES)
        elif kind == 4 and pool:
            other = rng.choice(pool)
            b = b[:rng.randrange(len(b) + 1)] + other[rng.randrange(len(other) + 1):]
        elif kind == 5 and b:
            b[rng.randrange(len(b))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF])
    return bytes(b)
