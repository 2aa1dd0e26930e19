"""Template store: what a server keeps per enrolled subject, as opaque wire-encoded records.

`open_store(url)` picks the backend from the URL: `sqlite:///path.db` (default; WAL journal) or
`postgresql://…`. A record is whatever the protocol's server stores for one subject (for im2020:
public key, encrypted template, optional trusted-party signature), already encoded with `wire/`;
the store never looks inside it.
"""
from __future__ import annotations

from .base import StoreError, StoreUnavailableError, TemplateStore
from .postgres import PostgresStore
from .sqlite import SQLiteStore

__all__ = ["StoreError", "StoreUnavailableError", "TemplateStore", "open_store"]


def open_store(url: str = "sqlite:///privface.db") -> TemplateStore:
    """A store by URL: `sqlite:///relative.db`, `sqlite:////abs/path.db`, `sqlite://` (in memory)
    or `postgresql://user:pass@host:port/dbname`."""
    if url.startswith("sqlite:"):
        return SQLiteStore.from_url(url)
    if url.startswith(("postgresql:", "postgres:")):
        return PostgresStore(url)
    raise StoreError(f"unsupported store URL {url!r}: use sqlite:///path.db or postgresql://…")
