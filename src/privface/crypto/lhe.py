"""The interface of a linearly homomorphic encryption scheme (LHE), seed 000 §II-B.

The Catalano–Fiore transform (`catalano_fiore.py`) needs only this much of its base scheme
\\widehat{HE}: a public message space M = Z_|M|, Enc, ⊞ / ⊟ between ciphertexts, the constant
multiplication a·C, and Dec. Paillier (M = Z_N) and Joye–Libert (M = Z_{2^k}) implement it.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class LHECiphertext(Protocol):
    """A ciphertext; ``c1 + c2`` is ⊞, ``c1 - c2`` is ⊟, ``a * c`` is a·C, ``-c`` is ⊟C."""

    @property
    def public_key(self) -> LHEPublicKey: ...

    def __add__(self, other): ...

    def __sub__(self, other): ...

    def __neg__(self): ...

    def __mul__(self, scalar: int): ...

    def __rmul__(self, scalar: int): ...


@runtime_checkable
class LHEPublicKey(Protocol):
    """pk: anyone can encrypt; plaintexts are residues modulo ``message_space``."""

    @property
    def message_space(self) -> int: ...

    def encrypt(self, m: int) -> LHECiphertext: ...


@runtime_checkable
class LHEPrivateKey(Protocol):
    """sk: decrypts to the representative in [0, message_space); encrypts faster than pk (key owner)."""

    @property
    def public_key(self) -> LHEPublicKey: ...

    @property
    def message_space(self) -> int: ...

    def encrypt(self, m: int) -> LHECiphertext: ...

    def decrypt(self, c: LHECiphertext) -> int: ...
