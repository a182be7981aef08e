"""Prompt tokens, cached prompt tokens and finished requests per tenant, on a bounded label set.

The ``tenant`` label values are fixed when the gateway starts: the name of each tenant of the key file
(``--api-keys`` / ``KVGATE_API_KEYS``) and ``anonymous`` (every request of a gateway without keys). A
request's tenant is the one its key authenticated (``Job.tenant``, set from the :class:`Caller`), never
a name the client sends, and a name outside the set counts under ``anonymous``: no request can add a
label value, so the series stay as many as the key file's tenants plus one. Every value is created at
zero at start, so a dashboard sees each tenant before its first request.

With keys configured every request is authenticated, so ``anonymous`` stays at zero there (a key-file
tenant literally named ``anonymous`` would share its series; it cannot meet unauthenticated requests).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter

from kvgate.gateway.tenancy import ANONYMOUS
from kvgate.proto.sampling import Usage

ANONYMOUS_LABEL = ANONYMOUS.name


class TenantUsage:
    """The per-tenant counters on ``registry``; ``tenants``: the configured tenants' names."""

    def __init__(self, registry: CollectorRegistry, tenants: Iterable[str] = ()) -> None:
        self.labels = frozenset(tenants) | {ANONYMOUS_LABEL}
        self.prompt_tokens = Counter(
            "kvgate_tenant_prompt_tokens", "Prompt tokens served, by tenant.", ["tenant"], registry=registry
        )
        self.cached_tokens = Counter(
            "kvgate_tenant_cached_prompt_tokens",
            "Prompt tokens whose KV was reused (any tier, worker's count), by tenant.",
            ["tenant"],
            registry=registry,
        )
        self.requests = Counter(
            "kvgate_tenant_requests",
            "Requests that finished normally, by tenant.",
            ["tenant"],
            registry=registry,
        )
        for label in sorted(self.labels):
            for counter in (self.prompt_tokens, self.cached_tokens, self.requests):
                counter.labels(label)

    def label(self, tenant: str) -> str:
        """The label value ``tenant`` counts under: its own name if configured, else ``anonymous``."""
        return tenant if tenant in self.labels else ANONYMOUS_LABEL

    def finished(self, tenant: str, usage: Usage) -> None:
        """Counts one normally finished request of ``tenant``; ``usage`` is the worker's own count."""
        label = self.label(tenant)
        self.prompt_tokens.labels(label).inc(usage.prompt_tokens)
        self.cached_tokens.labels(label).inc(usage.cached_tokens)
        self.requests.labels(label).inc()
