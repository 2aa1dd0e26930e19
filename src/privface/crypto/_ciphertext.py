"""Keys and ciphertexts of schemes living in a multiplicative group Z*_X (internal base of Paillier and
Joye–Libert).

In both schemes the homomorphic operations of seed 000 §II-B are group operations:
C₁ ⊞ C₂ = C₁·C₂, a·C = C^a, ⊟C = C⁻¹ (mod X), and adding a public constant m multiplies by a
fixed encoding of m (Paillier: 1 + mN, Joye–Libert: y^m). Results of homomorphic operations are
not re-randomised: call ``rerandomize()`` before a ciphertext leaves the party that computed it
if the computation must stay hidden from the key owner.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import gmpy2

from ..errors import CryptoError
from ._format import pack, unpack
from .numbers import as_int, centered, security_bits


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
        return f"{type(self).__name__}(key={self.public_key.fingerprint.hex()}, value=0x{int(self.value):x}"[:72] + "…)"


class GroupPublicKey:
    """What Paillier's and Joye–Libert's public keys share. Subclasses set ``SCHEME``, ``TAG``,
    ``CIPHERTEXT`` and the attributes ``n``, ``bits``, ``fingerprint``, and define ``message_space``,
    ``group_modulus``, ``plain_factor``, ``encrypt``, ``validate`` and ``_public_values``."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the subclasses set (see above)
        SCHEME: ClassVar[str]
        TAG: ClassVar[bytes]
        CIPHERTEXT: ClassVar[type[GroupCiphertext]]
        n: Any
        bits: int
        fingerprint: bytes

        @property
        def group_modulus(self) -> Any: ...

        def _public_values(self) -> tuple: ...

    @property
    def security_bits(self) -> int:
        return security_bits(self.bits)

    def ciphertext(self, value):
        """A ciphertext from its integer value (e.g. from python-paillier or the wire), validated."""
        return self.CIPHERTEXT(self, value)

    def _unit(self, value, group: str, bound: str):
        """The value as mpz if 0 < c < X and gcd(c, N) = 1, else CryptoError (group Z_X, bound X as text)."""
        c = as_int(value, f"{self.SCHEME} ciphertext")
        if not 0 < c < self.group_modulus:
            raise CryptoError(f"{self.SCHEME} ciphertext is outside {group} for this key "
                              f"(must satisfy 0 < c < {bound})")
        if gmpy2.gcd(c, self.n) != 1:
            raise CryptoError(f"{self.SCHEME} ciphertext is not a unit of {group} (gcd(c, N) ≠ 1)")
        return c

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other._public_values() == self._public_values()

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        extra = "".join(f"{k}={v}, " for k, v in self._repr_fields().items())
        return f"{type(self).__name__}(bits={self.bits}, {extra}fingerprint={self.fingerprint.hex()})"

    def _repr_fields(self) -> dict:
        return {}


class GroupPrivateKey:
    """What the private keys share: the message space, checking a ciphertext before decryption,
    signed decryption, and a ``repr`` that names the key but never shows the secret."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the subclasses set (public_key: their scheme's GroupPublicKey)
        public_key: Any

        def decrypt(self, c) -> int: ...

    @property
    def message_space(self) -> int:
        return self.public_key.message_space

    def _own(self, c):
        """The value of a ciphertext of this scheme under this key, else CryptoError."""
        cls = self.public_key.CIPHERTEXT
        if not isinstance(c, cls):
            raise CryptoError(f"expected a {cls.__name__}, got {type(c).__name__}")
        if c.public_key != self.public_key:
            raise CryptoError(f"{self.public_key.SCHEME} ciphertext was made under a different public key")
        return c.value

    def decrypt_signed(self, c) -> int:
        """Dec(c) as a signed integer in (−|M|/2, |M|/2]."""
        return centered(self.decrypt(c), self.message_space)

    def __repr__(self) -> str:
        public = repr(self.public_key)
        return public.replace("PublicKey(", "PrivateKey(", 1)[:-1] + ", secret)"
