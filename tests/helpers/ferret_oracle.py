"""A numpy oracle of one Ferret iteration (Yang et al., CCS 2020; semi-honest, regular noise, primal LPN), written
from the paper and native/src/ferret.rs's stated layout, for the tests of the native core on small sets.

Layout (both sides): the reserve is the LPN secret's k COTs, then t·h for the trees (tree j, level i + 1 at
k + j·h + i); the receiver opens K_b of each level, b that COT's choice, so its point's bits are the ¬b.
GGM: G(s) = (AES_{L}(s) ⊕ s, AES_{R}(s) ⊕ s) with the fixed keys below. H: TCCR with tweak
ctr + j·h + i. LPN row i: words 0..10 of bytes 48·i.. of AES-CTR(lpn_seed) (little-endian uint32) mod k.
"""
from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.helpers.otext_oracle import tccr

GGM_KEYS = (b"ferret GGM left ", b"ferret GGM right")
D = 10


def _ecb(key: bytes, x: np.ndarray) -> np.ndarray:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return np.frombuffer(enc.update(x.tobytes()), np.uint8).reshape(x.shape)


def _ctr(key: bytes, pos: int, n: int) -> np.ndarray:
    """Bytes pos..pos + n of AES-CTR(key), zero initial counter (pos a multiple of 16)."""
    assert pos % 16 == 0
    ctr = (pos // 16).to_bytes(16, "big")
    enc = Cipher(algorithms.AES(key), modes.CTR(ctr)).encryptor()
    return np.frombuffer(enc.update(bytes(n)), np.uint8)


def expand(level: np.ndarray) -> np.ndarray:
    """(m, 16) nodes → (2m, 16) children, node p's at 2p, 2p + 1."""
    out = np.empty((2 * len(level), 16), np.uint8)
    out[0::2] = _ecb(GGM_KEYS[0], level) ^ level
    out[1::2] = _ecb(GGM_KEYS[1], level) ^ level
    return out


def neighbours(lpn_seed: bytes, n: int, k: int) -> np.ndarray:
    words = _ctr(lpn_seed, 0, 48 * n).reshape(n, 48)[:, :4 * D].copy().view("<u4")
    return (words % k).astype(np.int64)


def neighbour_bits(p: dict, bits: np.ndarray, lpn_seed: bytes) -> np.ndarray:
    """A·u: the XOR of the LPN secret's choice bits at each output's D indices."""
    nb = neighbours(lpn_seed, p["n"], p["k"])
    return np.bitwise_xor.reduce(bits[:p["k"]][nb], axis=1)


def points(p: dict, bits: np.ndarray) -> np.ndarray:
    """The receiver's points α_j: bit i from the root = ¬b of tree j's level-(i + 1) base COT."""
    k, t, h = p["k"], p["t"], p["h"]
    path = 1 - bits[k:k + t * h].reshape(t, h).astype(np.int64)
    return (path << (h - 1 - np.arange(h))).sum(axis=1)


def sender(p: dict, delta: bytes, base: np.ndarray, lpn_seed: bytes, roots: np.ndarray,
           ctr: int = 0) -> tuple[bytes, np.ndarray]:
    """One iteration of the sender: (the message, all n outputs s incl. the next reserve)."""
    n, k, t, h = p["n"], p["k"], p["t"], p["h"]
    dl = np.frombuffer(delta, np.uint8)
    s = base[k:]
    tw = np.arange(ctr, ctr + t * h, dtype=np.uint64)
    h0, h1 = tccr(s, tw), tccr(s ^ dl, tw)
    msg, leaves = [], []
    for j in range(t):
        level = roots[j:j + 1]
        for i in range(h):
            level = expand(level)
            x = j * h + i
            msg += [np.bitwise_xor.reduce(level[0::2]) ^ h0[x], np.bitwise_xor.reduce(level[1::2]) ^ h1[x]]
        msg.append(np.bitwise_xor.reduce(level) ^ dl)
        leaves.append(level)
    v = np.concatenate(leaves)
    nb = neighbours(lpn_seed, n, k)
    v = v ^ np.bitwise_xor.reduce(base[:k][nb], axis=1)
    return b"".join(m.tobytes() for m in msg), v


def receiver(p: dict, bits: np.ndarray, base: np.ndarray, lpn_seed: bytes, msg: bytes,
             ctr: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One iteration of the receiver: (all n choice bits, all n r)."""
    n, k, t, h = p["n"], p["k"], p["t"], p["h"]
    alpha = points(p, bits)
    m = np.frombuffer(msg, np.uint8).reshape(t, 2 * h + 1, 16)
    hr = tccr(base[k:], np.arange(ctr, ctr + t * h, dtype=np.uint64))
    leaves = []
    for j in range(t):
        a = int(alpha[j])
        level = np.zeros((1, 16), np.uint8)
        for i in range(h):
            level = expand(level)
            path = a >> (h - 1 - i)
            c = 1 - (path & 1)
            others = [x for x in range(c, len(level), 2) if x != path ^ 1]
            sib = m[j, 2 * i + c] ^ hr[j * h + i]
            for x in others:
                sib = sib ^ level[x]
            level[path ^ 1], level[path] = sib, 0
        level[a] = m[j, 2 * h] ^ np.bitwise_xor.reduce(level)
        leaves.append(level)
    w = np.concatenate(leaves)
    e = np.zeros(n, np.uint8)
    e[np.arange(t) * (1 << h) + alpha] = 1
    nb = neighbours(lpn_seed, n, k)
    w = w ^ np.bitwise_xor.reduce(base[:k][nb], axis=1)
    e = e ^ neighbour_bits(p, bits, lpn_seed)
    return e, w
