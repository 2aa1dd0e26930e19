"""Template store: what a server keeps per enrolled subject, as opaque wire-encoded records.

`open_store(url)` picks the backend from the URL: `sqlite:///path.db` (default; WAL journal) or
`postgresql://…`. A record is whatever the protocol's server stores for one subject (for im2020:
public key, encrypted template, optional trusted-party signature), already encoded with `wire/`;
the store never looks inside it.
"""
from .base import StoreError, StoreUnavailableError, TemplateStore, open_store

__all__ = ["StoreError", "StoreUnavailableError", "TemplateStore", "open_store"]
