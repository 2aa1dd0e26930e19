"""Ciphertexts living in a multiplicative group Z*_X (internal base of Paillier and Joye–Libert).

In both schemes the homomorphic operations of seed 000 §II-B are group operations:
C₁ ⊞ C₂ = C₁·C₂, a·C = C^a, ⊟C = C⁻¹ (mod X), and adding a public constant m multiplies by a
fixed encoding of m (Paillier: 1 + mN, Joye–Libert: y^m). Results of homomorphic operations are
not re-randomised: call ``rerandomize()`` before a ciphertext leaves the party that computed it
if the computation must stay hidden from the key owner.
"""
from __future__ import annotations

import gmpy2

from ..errors import CryptoError
from ._common import as_int, pack, unpack


class GroupCiphertext:
    """A validated ciphertext bound to its public key; immutable; operators do the homomorphic work.

    The key class provides: ``SCHEME``, ``TAG``, ``fingerprint``, ``ciphertext_bytes``,
    ``group_modulus`` (X), ``message_space``, ``validate(value)`` and ``plain_factor(m)``.
    """

    __slots__ = ("public_key", "value")

    def __init__(self, public_key, value) -> None:
        self.public_key = public_key
        self.value = public_key.validate(value)

    @classmethod
    def _trusted(cls, public_key, value):
        """A ciphertext computed by the group operations from valid ones: no re-validation."""
        c = object.__new__(cls)
        c.public_key = public_key
        c.value = value
        return c

    # ---------------------------------------------------------------- homomorphic operations

    def _same_key(self, other) -> None:
        if other.public_key is not self.public_key and other.public_key != self.public_key:
            raise CryptoError(f"{self.public_key.SCHEME} ciphertexts under different public keys cannot be combined")

    def __add__(self, other):
        """C ⊞ C' (another ciphertext) or C + m (a public integer constant)."""
        pk = self.public_key
        if isinstance(other, GroupCiphertext):
            if type(other) is not type(self):
                raise CryptoError(f"cannot add a {type(other).__name__} to a {type(self).__name__}")
            self._same_key(other)
            factor = other.value
        else:
            factor = pk.plain_factor(as_int(other, "plaintext constant") % pk.message_space)
        return self._trusted(pk, self.value * factor % pk.group_modulus)

    __radd__ = __add__

    def __neg__(self):
        pk = self.public_key
        return self._trusted(pk, gmpy2.invert(self.value, pk.group_modulus))

    def __sub__(self, other):
        if isinstance(other, GroupCiphertext):
            return self + (-other)
        return self + (-as_int(other, "plaintext constant"))

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, scalar):
        """a·C = C^a, with a reduced modulo the message space (a negative a multiplies by −|a|)."""
        if isinstance(scalar, GroupCiphertext):
            raise CryptoError(
                f"{self.public_key.SCHEME} is linearly homomorphic: a ciphertext can be multiplied by an "
                "integer, not by another ciphertext"
            )
        pk = self.public_key
        a = as_int(scalar, "scalar") % pk.message_space
        if a > pk.message_space // 2:  # the shorter exponent: C^a = (C⁻¹)^(M − a) as plaintexts
            return self._trusted(pk, gmpy2.powmod(gmpy2.invert(self.value, pk.group_modulus),
                                                  pk.message_space - a, pk.group_modulus))
        return self._trusted(pk, gmpy2.powmod(self.value, a, pk.group_modulus))

    __rmul__ = __mul__

    def rerandomize(self):
        """The same plaintext under fresh randomness: C ⊞ Enc(0)."""
        pk = self.public_key
        return self._trusted(pk, self.value * pk.encrypt(0).value % pk.group_modulus)

    # ---------------------------------------------------------------- bytes

    def to_bytes(self) -> bytes:
        """Fixed-length encoding: 12-byte header (magic, scheme, version, key fingerprint) + big-endian value."""
        pk = self.public_key
        return pack(pk.TAG, pk.fingerprint, self.value, pk.ciphertext_bytes)

    @classmethod
    def from_bytes(cls, public_key, data):
        """Parse and validate: wrong length, header or key, or a value outside the group → CryptoError."""
        value = unpack(public_key.TAG, public_key.fingerprint, data, public_key.ciphertext_bytes, public_key.SCHEME)
        return cls(public_key, value)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.public_key == self.public_key and other.value == self.value

    def __hash__(self) -> int:
        return hash((self.public_key.fingerprint, int(self.value)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.public_key.fingerprint.hex()}, value=0x{int(self.value):x}"[:80] + "…)"
