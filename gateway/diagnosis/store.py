"""The bounded record of recent requests, per tenant: what a diagnosis compares a request with.

Bounds, all enforced on every :meth:`RecentRequests.add`: a count and a byte total over all tenants
(oldest first out), a count per tenant (that tenant's oldest out), and an age (older than the TTL
out). A tenant's records are only ever read by a lookup naming that tenant: another tenant's request
id is simply not there."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice

from kvgate.gateway.diagnosis.config import DiagnosisSettings
from kvgate.gateway.diagnosis.record import RequestRecord
from kvgate.gateway.tenancy.bounded import Bounds, TenantBounded


class RecentRequests:
    """Owned by the cache diagnostics; not thread-safe (the event loop's only)."""

    def __init__(self, settings: DiagnosisSettings, clock: Callable[[], float]) -> None:
        bounds = Bounds(settings.max_requests, settings.max_bytes, settings.max_per_tenant, settings.ttl_s)
        self._kept: TenantBounded[RequestRecord] = TenantBounded(bounds, clock)

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def nbytes(self) -> int:
        return self._kept.nbytes

    def add(self, record: RequestRecord) -> None:
        """Records ``record`` (replacing one of the same tenant and id), then drops what is over a
        bound. A record bigger than the whole byte cap is not kept."""
        self._kept.put(record.tenant, record.request_id, record, record.nbytes)

    def get(self, tenant: str, request_id: str) -> RequestRecord | None:
        """``tenant``'s record of ``request_id``; None when it has none (expired, dropped, never
        seen, or another tenant's)."""
        return self._kept.get(tenant, request_id)

    def recent(self, tenant: str, limit: int) -> list[RequestRecord]:
        """``tenant``'s ``limit`` most recent unexpired records, newest first."""
        return list(islice(self._kept.newest(tenant), limit))

    def tenants(self) -> tuple[str, ...]:
        """The tenants with records kept."""
        return self._kept.tenants()
