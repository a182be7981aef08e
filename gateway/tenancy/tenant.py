"""A tenant: the unit of cache isolation and of rate limits.

The cache salt of a request is derived here, on the server, from the authenticated tenant: a client
never sends it, so it can neither choose another tenant's salt nor copy it. Different tenants get
different hash roots (``CacheLayout.root(cache_salt=...)``) and so never share a cached block, on
the gateway (index lookups) and on the worker (which hashes with the same salt) alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SHARED_PREFIX = "shared:"
TENANT_PREFIX = "tenant:"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Requests and tokens (prompt + max_tokens) per minute; None: unlimited."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):  # bool is not a count
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True, slots=True)
class Tenant:
    """``name``: unique, ``[A-Za-z0-9._-]``, at most 64 characters. ``shared_namespaces``: the shared
    cache namespaces this tenant may opt requests into (e.g. ``public`` for a published system prompt)."""

    name: str
    rate: RateLimit = field(default_factory=RateLimit)
    shared_namespaces: frozenset[str] = frozenset()
    anonymous: bool = False

    def __post_init__(self) -> None:
        if not self.anonymous and not _NAME.match(self.name):
            raise ValueError(f"tenant name {self.name!r} must match {_NAME.pattern}")
        for namespace in self.shared_namespaces:
            if not _NAME.match(namespace):
                raise ValueError(f"shared namespace {namespace!r} must match {_NAME.pattern}")

    def cache_salt(self, namespace: str | None = None) -> str:
        """The salt of this tenant's requests; of the shared ``namespace`` when given (which must be
        one of ``shared_namespaces``: PermissionError otherwise). The anonymous tenant's own salt is
        empty (a single-tenant deployment hashes exactly as without tenants)."""
        if namespace is not None:
            if namespace not in self.shared_namespaces:
                raise PermissionError(
                    f"tenant {self.name!r} may not use the shared cache namespace {namespace!r}"
                )
            return SHARED_PREFIX + namespace
        return "" if self.anonymous else TENANT_PREFIX + self.name


ANONYMOUS = Tenant("anonymous", anonymous=True)
"""The one tenant of a gateway without API keys."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request (the authenticated tenant) and the shared namespace it opted into, if any."""

    tenant: Tenant = ANONYMOUS
    namespace: str | None = None

    def cache_salt(self) -> str:
        """See :meth:`Tenant.cache_salt` (PermissionError for a namespace the tenant may not use)."""
        return self.tenant.cache_salt(self.namespace)
