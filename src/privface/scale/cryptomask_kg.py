"""cryptomask's key generator over the wire (issue 37): the masked refresh of ``protocols.cryptomask.erase`` between
the CS (pk only) and the KG (sk, in its key store), for ``privface serve --protocol cryptomask --role kg`` and the
CS's ``gallery/remove`` (``service.bindings.cryptomask_kg``).

``KeyGeneratorRole`` is the KG: ``attach`` (``EraseAttach`` → ``EraseAttached``: the public context, checked against
the pk digest its key store recorded at enrolment) and ``refresh`` (``EraseRefresh`` → ``EraseRefreshed``): 1 to
``REFRESH_CIPHERTEXTS`` ciphertexts of the attached pk's shape, every residue below its prime, and a keep mask of
exactly their coefficients — all checked before anything is decrypted. What leaves is a fresh encryption under pk of
μ ⊙ Dec(ct) — never a plaintext, and never a refusal that depends on what a ciphertext decrypts to or on its noise
(``EraseKey.refresh(strict=False)``): whatever an ``internal``-key holder sends, it learns nothing about sk or any
plaintext from the answer.

``KGLink`` is the CS's side: ``refresh(masked, keep)`` as ``EraseKey``'s, over a link with ``erase_attach`` and
``erase_refresh`` (a ``KeyGeneratorRole`` in process, ``service.clients.cryptomask_kg.HttpKeyGenerator``), in
frames of at most ``REFRESH_BYTES``, each answer checked for shape.
"""
from __future__ import annotations

import hashlib
import json
import threading

import numpy as np

from ..crypto.lattice import LatticePublicContext, LatticeSecretContext
from ..errors import CryptoError, PrivfaceError, ProtocolError
from ..protocols.common import read_message
from ..protocols.cryptomask.erase import EraseKey
from ..protocols.cryptomask.erase_messages import EraseAttach, EraseAttached, EraseRefresh, EraseRefreshed
from ..store.base import TemplateStore
from .layout import KEY, record_key

REFRESH_BYTES = 3 << 20
"""Ciphertext bytes per ``EraseRefresh`` frame (the wire's frames are ≤ 4 MiB)."""


class KeyGeneratorRole:
    """The KG of gallery ``name`` over the wire (module docstring); ``store`` is the gallery's key store."""

    def __init__(self, store: TemplateStore, name: str = "default", *, insecure_test_params: bool = False) -> None:
        sk, meta = store.get(KEY, record_key(name, "sk")), store.get(KEY, record_key(name, "meta"))
        if sk is None or meta is None:
            raise PrivfaceError(f"the key store holds no key of gallery {name!r} (privface gallery enrol --key-store)")
        try:
            self._pk_sha256 = bytes.fromhex(json.loads(meta)["pk_sha256"])
        except (ValueError, KeyError, TypeError):
            raise PrivfaceError(f"the key store's record of gallery {name!r} is damaged") from None
        self._sk, self.insecure_test_params = sk, insecure_test_params
        self._key: EraseKey | None = None
        self._lock = threading.Lock()

    def attach(self, body) -> EraseAttached:
        msg = read_message(EraseAttach, body)
        if hashlib.sha256(msg.public_context).digest() != self._pk_sha256:
            raise ProtocolError("the public context does not belong to this key generator's secret key")
        from ..protocols.cryptomask.params import CM_BFV, CM_BFV_TOY

        try:
            pub = LatticePublicContext.from_bytes(msg.public_context, insecure_test_params=self.insecure_test_params)
            if pub.params != (CM_BFV_TOY if self.insecure_test_params else CM_BFV):
                raise ProtocolError("EraseAttach: other parameters than cryptomask's")
            key = EraseKey(LatticeSecretContext.from_bytes(pub, self._sk))
        except CryptoError as e:
            raise ProtocolError(f"EraseAttach: {e}") from None
        with self._lock:
            self._key = key
        return EraseAttached(self._pk_sha256)

    def refresh(self, body) -> EraseRefreshed:
        msg = read_message(EraseRefresh, body)
        key = self._key
        if key is None or msg.pk_sha256 != self._pk_sha256:
            raise ProtocolError("no gallery attached (the CS attaches before its first refresh)")
        per = 2 * key.basis.L * key.n * 8
        k = len(msg.masked) // per
        if not msg.masked or len(msg.masked) % per or len(msg.masked) > REFRESH_BYTES:
            raise ProtocolError(f"EraseRefresh: 1 to {REFRESH_BYTES // per} ciphertexts of {per} bytes")
        if len(msg.keep) != k * key.n // 8:
            raise ProtocolError(f"EraseRefresh: the keep mask must be {k} × {key.n} bits")
        masked = np.frombuffer(msg.masked, dtype="<u8").astype(np.uint64).reshape(k, 2, key.basis.L, key.n)
        keep = np.unpackbits(np.frombuffer(msg.keep, dtype=np.uint8), bitorder="little").astype(bool).reshape(k, key.n)
        fresh = key.refresh(masked, keep, strict=False)  # shapes and residues checked before decryption
        return EraseRefreshed(np.ascontiguousarray(fresh, dtype="<u8").tobytes())


    erase_attach, erase_refresh = attach, refresh  # the names a link calls (``KGLink``, in process)


class KGLink:
    """The CS's link to the KG (module docstring); ``pk_bytes``: the gallery's public context."""

    def __init__(self, key, pk_bytes: bytes) -> None:
        self.key, self.pk_bytes = key, pk_bytes
        self.digest = hashlib.sha256(pk_bytes).digest()
        self.attached = False

    def refresh(self, masked: np.ndarray, keep: np.ndarray) -> np.ndarray:
        if not self.attached:
            reply = read_message(EraseAttached, self.key.erase_attach(EraseAttach(self.pk_bytes)))
            if reply.pk_sha256 != self.digest:
                raise ProtocolError("the key generator holds the key of another public context")
            self.attached = True
        per = int(np.prod(masked.shape[1:])) * 8
        step = max(1, REFRESH_BYTES // per)
        out = []
        for lo in range(0, masked.shape[0], step):
            part, kp = masked[lo:lo + step], keep[lo:lo + step]
            frame = EraseRefresh(self.digest, np.ascontiguousarray(part, dtype="<u8").tobytes(),
                                 np.packbits(kp, axis=None, bitorder="little").tobytes())
            reply = read_message(EraseRefreshed, self.key.erase_refresh(frame))
            if len(reply.ciphertexts) != part.shape[0] * per:
                raise ProtocolError("the key generator's EraseRefreshed has the wrong length")
            out.append(np.frombuffer(reply.ciphertexts, dtype="<u8").astype(np.uint64).reshape(part.shape))
        return np.concatenate(out)


__all__ = ["REFRESH_BYTES", "KGLink", "KeyGeneratorRole"]
