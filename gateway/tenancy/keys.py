"""API keys: stored only as SHA-256 digests, checked in constant time against every entry.

A key is ``kvg-`` and 32 random bytes in URL-safe base64 (256 bits: no brute force, so an unsalted
fast hash is the right tool, as for other high-entropy API tokens). Its stored form is
``sha256:<hex>``. :meth:`KeyRing.authenticate` hashes the presented key once and compares the digest
with every stored digest using ``hmac.compare_digest``, without an early exit, so the time taken does
not depend on which entry (if any) matched.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable

from kvgate.gateway.tenancy.tenant import Tenant

PREFIX = "sha256:"
_MAX_KEY_CHARS = 256


def new_key() -> str:
    """A fresh random API key."""
    return "kvg-" + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """The stored form of ``key``: ``sha256:`` and 64 hex digits."""
    return PREFIX + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def parse_digest(stored: str) -> bytes:
    """The 32 digest bytes of a stored ``sha256:<hex>``; ValueError for anything else (a plain key
    in a config file is refused, so keys never sit there in the clear)."""
    if not stored.startswith(PREFIX):
        raise ValueError("API keys are configured by their hash: 'sha256:<64 hex digits>' (kvgate keys hash)")
    digest = bytes.fromhex(stored[len(PREFIX) :]) if _is_hex(stored[len(PREFIX) :]) else b""
    if len(digest) != 32:
        raise ValueError(f"not a SHA-256 digest: {stored[:16]}...")
    return digest


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


class KeyRing:
    """The configured keys and their tenants; immutable after construction, safe to share."""

    def __init__(self, entries: Iterable[tuple[str, Tenant]]) -> None:
        self._entries: list[tuple[bytes, Tenant]] = []
        seen: dict[bytes, str] = {}
        for stored, tenant in entries:
            digest = parse_digest(stored)
            if digest in seen and seen[digest] != tenant.name:
                raise ValueError(f"one key is configured for two tenants ({seen[digest]}, {tenant.name})")
            seen[digest] = tenant.name
            self._entries.append((digest, tenant))
        if not self._entries:
            raise ValueError("a key ring needs at least one key")

    @property
    def tenants(self) -> list[Tenant]:
        return list({t.name: t for _, t in self._entries}.values())

    def authenticate(self, key: str | None) -> Tenant | None:
        """The tenant of ``key``; None when it is missing or matches no entry."""
        if not key or len(key) > _MAX_KEY_CHARS:
            return None
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        found: Tenant | None = None
        for stored, tenant in self._entries:
            if hmac.compare_digest(stored, digest):  # every entry compared: no early exit
                found = tenant
        return found
