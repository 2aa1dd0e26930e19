"""The gsm provider's Ed25519 signing key (seed 004 §6 enrolment: the provider signs m1) in a key file of its
own, never in the template store: whoever holds it forges m1 for any subject, so a copy of the database must
not be enough.

``provider_signing_key(store, path)`` loads the PKCS#8 PEM at ``path`` (refused when group or others may read
it), or creates it mode 0600. A store written by an older privface holds the key in clear under
``LEGACY_RECORD``: it is moved into the file and deleted from the store (a migration logged without the key);
without a path such a store is refused, with the way to migrate.
"""
from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)

from ...errors import PrivfaceError, ProtocolError
from ...store.base import TemplateStore

log = logging.getLogger("privface.gsm")
LEGACY_RECORD = ("gsm-provider", "ed25519-signing-key")
"""Where privface before the key file kept the provider's signing key, in clear (read only to migrate it)."""


class SigningKeyError(PrivfaceError):
    """The signing key file is unreadable, readable by others, not an Ed25519 key, or conflicts with the
    store's legacy copy; or the store holds a legacy copy and no key file was named."""


def pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


def public_hex(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def load_pem(data: bytes, where: str) -> Ed25519PrivateKey:
    try:
        key = load_pem_private_key(bytes(data), password=None)
    except (ValueError, TypeError):
        raise SigningKeyError(f"{where} is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{where}: the gsm provider's signing key must be an Ed25519 key")
    return key


def read_key_file(path: Path) -> Ed25519PrivateKey:
    """The key at ``path``; refused when its mode lets group or others read or write it (like ssh)."""
    try:
        st = path.stat()
        if st.st_mode & 0o077:
            raise SigningKeyError(f"signing key file {path} is accessible by others (mode "
                                  f"{st.st_mode & 0o777:o}); chmod 600 it")
        data = path.read_bytes()
    except OSError as e:
        raise SigningKeyError(f"cannot read signing key file {path}: {e.strerror}") from None
    return load_pem(data, f"signing key file {path}")


def write_key_file(path: Path, key: Ed25519PrivateKey) -> None:
    """Create ``path`` (mode 0600, never overwriting): written to a private temporary name, then linked."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(pem(key))
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise SigningKeyError(f"signing key file {path} appeared while it was being created; start again") from None
    finally:
        tmp.unlink(missing_ok=True)


def provider_signing_key(store: TemplateStore, path: str | os.PathLike | None) -> Ed25519PrivateKey:
    """The provider's key from the file ``path`` (created 0600 when absent: from the store's legacy clear copy
    if there is one, else new), the legacy copy deleted from the store. ``path`` None: a key for this process
    only (a warning: m1 signed now stop verifying after a restart), refused while the store holds a legacy key."""
    legacy_raw = store.get(*LEGACY_RECORD)
    legacy = None if legacy_raw is None else load_pem(legacy_raw, "the store's legacy signing key")
    if path is None:
        if legacy is not None:
            raise SigningKeyError(
                "the template store holds the gsm provider's signing key in clear (written by an older privface); "
                "start the provider once with --signing-key PATH to move it into a 0600 key file and delete it "
                "from the store")
        log.warning("gsm provider: no signing key file given, using a key for this process only (m1 it signs "
                    "stop verifying after a restart); pass --signing-key PATH")
        return Ed25519PrivateKey.generate()
    path = Path(path)
    if path.exists():
        key = read_key_file(path)
        if legacy is not None and public_hex(legacy) != public_hex(key):
            raise SigningKeyError(
                f"the template store holds a different gsm signing key in clear (public key {public_hex(legacy)}) "
                f"than {path} (public key {public_hex(key)}); move {path} away to migrate the store's key into it")
    else:
        key = legacy if legacy is not None else Ed25519PrivateKey.generate()
        write_key_file(path, key)
        log.info("gsm provider: %s signing key file %s (mode 0600)",
                 "migrated the store's clear-text key into" if legacy is not None else "created", path)
    if legacy is not None:
        if store.swap(*LEGACY_RECORD, legacy_raw, None):
            log.warning("gsm provider: deleted the clear-text signing key from the template store (now only in "
                        "%s); old backups of the store still hold it", path)
    return key


def provider_key_from_bytes(raw: bytes) -> Ed25519PublicKey:
    """The provider's Ed25519 verification key from its 32 raw bytes (as the provider publishes it)."""
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise ProtocolError("an Ed25519 verification key is 32 bytes")
    return Ed25519PublicKey.from_public_bytes(raw)


def provider_key_bytes(key: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of a verification key."""
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)
