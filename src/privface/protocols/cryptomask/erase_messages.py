"""The wire messages of cryptomask's erasure between the CS and the key generator (``erase``: the masked refresh),
for a KG served over HTTP (``privface serve --protocol cryptomask --role kg``, steps ``erase/attach`` and
``erase/refresh``, scope ``internal``).

CS → KG: ``EraseAttach`` (the gallery's public context, once: the KG checks it against the pk digest in its key
store) → ``EraseAttached``; ``EraseRefresh`` (ciphertexts ct + r, r a uniform plaintext pad mod t, and the 0/1
keep mask of their coefficients) → ``EraseRefreshed`` (fresh encryptions under pk of μ ⊙ Dec(ct + r)).

The KG receives no template and no id: padded ciphertexts and which coefficients to zero.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...wire import Message


@dataclass
class EraseAttach(Message):
    """CS → KG: the gallery's public context (pk, no secret)."""

    WIRE_NAME = "cryptomask.EraseAttach"
    public_context: bytes


@dataclass
class EraseAttached(Message):
    """KG → CS: SHA-256 of the public context it holds the secret key of."""

    WIRE_NAME = "cryptomask.EraseAttached"
    pk_sha256: bytes


@dataclass
class EraseRefresh(Message):
    """CS → KG: the attached pk's digest; padded ciphertexts as little-endian uint64 (k, 2, L, N) in coefficient
    form; the keep mask (k, N) as bits (little-endian bit order, ``numpy.packbits``)."""

    WIRE_NAME = "cryptomask.EraseRefresh"
    pk_sha256: bytes
    masked: bytes
    keep: bytes


@dataclass
class EraseRefreshed(Message):
    """KG → CS: fresh ciphertexts (k, 2, L, N), little-endian uint64."""

    WIRE_NAME = "cryptomask.EraseRefreshed"
    ciphertexts: bytes


__all__ = ["EraseAttach", "EraseAttached", "EraseRefresh", "EraseRefreshed"]
