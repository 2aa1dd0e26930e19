"""The template-store interface every backend implements."""
from __future__ import annotations

import re
from abc import ABC, abstractmethod

from ..errors import PrivfaceError

_ID = re.compile(r"^[A-Za-z0-9._@+-]{1,128}$")
_PROTOCOL = re.compile(r"^[a-z0-9_-]{1,32}$")
MAX_RECORD_BYTES = 64 * 1024 * 1024


class StoreError(PrivfaceError):
    """The store URL is wrong, the database is unreachable, or a key/record is out of bounds."""


class StoreUnavailableError(StoreError):
    """The database failed during a call (server gone, disk error): the caller's input was fine."""


def check_key(protocol: str, subject_id: str) -> None:
    """Reject protocol names and subject ids that are not short printable identifiers."""
    if not isinstance(protocol, str) or not _PROTOCOL.fullmatch(protocol):
        raise StoreError(f"bad protocol name {protocol!r}")
    if not isinstance(subject_id, str) or not _ID.fullmatch(subject_id):
        raise StoreError("subject id must be 1–128 characters of A–Z a–z 0–9 . _ @ + -")


def url_password(url: str) -> str:
    """The password in a store URL's user info (``scheme://user:password@host…``), '' if none. The user info
    ends at the last ``@``, so a password holding ``@`` (or ``/``) is taken whole."""
    scheme, sep, rest = url.partition("://")
    user_info = rest.rpartition("@")[0] if sep else ""
    return user_info.partition(":")[2]


def redact(url: str) -> str:
    """The store URL with its password replaced by `***` (fit for messages and logs)."""
    password = url_password(url)
    if not password:
        return url
    scheme, _, rest = url.partition("://")
    user_info, _, host = rest.rpartition("@")
    return f"{scheme}://{user_info.partition(':')[0]}:***@{host}"


def check_record(record: bytes) -> bytes:
    if not isinstance(record, (bytes, bytearray, memoryview)):
        raise StoreError("a record must be bytes")
    record = bytes(record)
    if not record or len(record) > MAX_RECORD_BYTES:
        raise StoreError(f"a record must hold 1 to {MAX_RECORD_BYTES} bytes, got {len(record)}")
    return record


class TemplateStore(ABC):
    """Records keyed by (protocol, subject id).

    put replaces an existing record atomically (a reader sees the old or the new record, never
    neither); delete revokes; swap replaces only what the caller last read (a lost update is refused,
    not made); each call is its own transaction, durable when it returns.
    """

    @abstractmethod
    def put(self, protocol: str, subject_id: str, record: bytes) -> bool:
        """Store or replace; True when a record was replaced."""

    @abstractmethod
    def get(self, protocol: str, subject_id: str) -> bytes | None:
        """The record, or None when the subject is not enrolled."""

    @abstractmethod
    def delete(self, protocol: str, subject_id: str) -> bool:
        """Revoke; True when a record existed."""

    def swap(self, protocol: str, subject_id: str, expected: bytes | None, record: bytes | None) -> bool:
        """Compare-and-swap in one transaction: when the stored record is byte-for-byte ``expected`` (None:
        no record), make it ``record`` (None: delete it) and return True; otherwise change nothing and
        return False. Atomic against every other writer of the database, other processes included."""
        check_key(protocol, subject_id)
        expected = None if expected is None else check_record(expected)
        record = None if record is None else check_record(record)
        if expected is None:
            if record is None:
                return self.get(protocol, subject_id) is None
            return self._swap_insert(protocol, subject_id, record)
        if record is None:
            return self._swap_delete(protocol, subject_id, expected)
        return self._swap_update(protocol, subject_id, expected, record)

    @abstractmethod
    def _swap_insert(self, protocol: str, subject_id: str, record: bytes) -> bool:
        """One statement: insert unless a record exists; True if inserted."""

    @abstractmethod
    def _swap_delete(self, protocol: str, subject_id: str, expected: bytes) -> bool:
        """One statement: delete the record if it equals ``expected``; True if deleted."""

    @abstractmethod
    def _swap_update(self, protocol: str, subject_id: str, expected: bytes, record: bytes) -> bool:
        """One statement: replace the record if it equals ``expected``; True if replaced."""

    @abstractmethod
    def ids(self, protocol: str) -> list[str]:
        """Enrolled subject ids of a protocol, sorted."""

    def purge(self) -> bool:
        """Remove what superseded or deleted records left in the store's files (SQLite: the WAL); True when
        done. PostgreSQL keeps dead row versions until the operator runs ``VACUUM (FULL)`` on
        ``privface_records`` (docs/operations.md, "Changing a gallery"): this returns False there."""
        return False

    def close(self) -> None:  # noqa: B027 (optional hook: stores without connections keep this no-op)
        """Release connections (the store is unusable afterwards)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

