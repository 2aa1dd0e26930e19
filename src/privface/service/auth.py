"""Who may call what: API keys with scopes, kept in the template store (issue 8).

A key is ``pfk_<key id>_<secret>``: a 48-bit random key id (12 hex digits, safe to log) and a 256-bit
secret from ``secrets``. The store keeps, under ``(KEY_NAMESPACE, key id)``, only
``HMAC-SHA256(pepper, key id ‖ secret)``, the scopes and an optional party name — never the secret, which
``privface keys create`` prints once. A slow KDF would protect low-entropy passwords; a 256-bit random
secret cannot be guessed, so one HMAC (compared in constant time) suffices and keeps each request cheap.
The pepper (``PRIVFACE_API_KEY_PEPPER``, optional) lives outside the store: a copy of the store alone then
does not even allow checking a stolen key. Create and serve with the same pepper.

Each ProtocolService declares, as data next to its steps, the scope every step needs: ``scopes:
dict[step, scope or tuple of scopes (any one suffices)]``. A step without an entry is refused (fail closed).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
from dataclasses import dataclass

from ..errors import PrivfaceError
from ..store.base import TemplateStore
from .base import ScopeError

SCOPES = ("enrol", "verify", "admin", "internal", "metrics")
"""``enrol``: register a template · ``verify``: authentication / matching / identification flows ·
``admin``: revoke, rotate keys, gallery import · ``internal``: service to service (kolberg DB → auth) ·
``metrics``: read ``/metrics`` only (a Prometheus scraper)."""
KEY_NAMESPACE = "privface-apikeys"
PEPPER_ENV = "PRIVFACE_API_KEY_PEPPER"
API_KEY_ENV = "PRIVFACE_API_KEY"
_KEY = re.compile(r"^pfk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_NAME = re.compile(r"^[A-Za-z0-9._@+ -]{1,64}$")


class AuthError(PrivfaceError):
    """No API key, a malformed or unknown one, or a wrong secret (HTTP 401)."""


@dataclass(frozen=True)
class ApiKey:
    """A stored key as the server sees it (no secret)."""

    key_id: str
    scopes: frozenset[str]
    name: str | None = None
    created: float = 0.0

    def to_dict(self) -> dict:
        return {"key_id": self.key_id, "scopes": sorted(self.scopes), "name": self.name,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created))}


def parse_scopes(text: str | list[str] | tuple[str, ...]) -> frozenset[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    scopes = frozenset(s.strip() for s in items if s.strip())
    unknown = scopes - set(SCOPES)
    if not scopes or unknown:
        raise PrivfaceError(f"scopes must be a non-empty subset of {', '.join(SCOPES)}"
                            + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else ""))
    return scopes


def required_scopes(service, step: str) -> frozenset[str]:
    """The scopes any one of which allows ``step`` of ``service``; empty when the step declares none."""
    need = (getattr(service, "scopes", None) or {}).get(step)
    if need is None:
        return frozenset()
    return frozenset((need,) if isinstance(need, str) else need)


class ApiKeys:
    """The key table in a template store: ``create``, ``authenticate``, ``list``, ``revoke``."""

    def __init__(self, store: TemplateStore, pepper: bytes | str | None = None) -> None:
        if pepper is None:
            pepper = os.environ.get(PEPPER_ENV, "")
        self.store = store
        self._pepper = pepper.encode() if isinstance(pepper, str) else bytes(pepper)

    def _digest(self, key_id: str, secret: str) -> str:
        return hmac.new(self._pepper, f"privface-api-key|{key_id}|{secret}".encode(), hashlib.sha256).hexdigest()

    def create(self, scopes, name: str | None = None) -> tuple[ApiKey, str]:
        """A new key; returns it and the full secret key string (shown once, never stored)."""
        scopes = parse_scopes(scopes)
        if name is not None and not _NAME.fullmatch(name):
            raise PrivfaceError("a key name is 1–64 characters of A–Z a–z 0–9 . _ @ + - and space")
        while True:
            key_id = secrets.token_hex(6)
            if self.store.get(KEY_NAMESPACE, key_id) is None:
                break
        secret = secrets.token_urlsafe(32)
        key = ApiKey(key_id, scopes, name, time.time())
        record = {"v": 1, "hmac": self._digest(key_id, secret), "scopes": sorted(scopes), "name": name,
                  "created": key.created}
        self.store.put(KEY_NAMESPACE, key_id, json.dumps(record).encode())
        return key, f"pfk_{key_id}_{secret}"

    def _load(self, key_id: str) -> tuple[ApiKey, str] | None:
        raw = self.store.get(KEY_NAMESPACE, key_id)
        if raw is None:
            return None
        r = json.loads(raw)
        return ApiKey(key_id, frozenset(r["scopes"]), r.get("name"), float(r.get("created", 0))), r["hmac"]

    def authenticate(self, presented: str | None) -> ApiKey:
        """The key behind a presented ``pfk_…`` string; AuthError otherwise (same message for every cause)."""
        m = _KEY.fullmatch(presented or "")
        found = self._load(m.group(1)) if m else None
        expected = found[1] if found else "0" * 64
        actual = self._digest(m.group(1), m.group(2)) if m else "1" * 64
        if not hmac.compare_digest(expected, actual) or found is None:
            raise AuthError("a valid API key is required (Authorization: Bearer pfk_…)")
        return found[0]

    def list(self) -> list[ApiKey]:
        found = (self._load(i) for i in self.store.ids(KEY_NAMESPACE))
        return [f[0] for f in found if f is not None]

    def revoke(self, key_id: str) -> bool:
        """Delete the key (effective on the next request: keys are not cached)."""
        if not re.fullmatch(r"[0-9a-f]{12}", key_id or ""):
            raise PrivfaceError("a key id is 12 hex digits (privface keys list)")
        return self.store.delete(KEY_NAMESPACE, key_id)


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    scheme, _, token = (header or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


__all__ = ["SCOPES", "ApiKey", "ApiKeys", "AuthError", "ScopeError", "parse_scopes", "required_scopes", "bearer",
           "KEY_NAMESPACE", "API_KEY_ENV", "PEPPER_ENV"]
