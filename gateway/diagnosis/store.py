"""The bounded record of recent requests, per tenant: what a diagnosis compares a request with.

Bounds, all enforced on every :meth:`RecentRequests.add`: a count and a byte total over all tenants
(oldest first out), a count per tenant (that tenant's oldest out), and an age (older than the TTL
out). A tenant's records are only ever read by a lookup naming that tenant: another tenant's request
id is simply not there."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from kvgate.gateway.diagnosis.config import DiagnosisSettings
from kvgate.gateway.diagnosis.record import RequestRecord


class RecentRequests:
    """Owned by the cache diagnostics; not thread-safe (the event loop's only)."""

    def __init__(self, settings: DiagnosisSettings, clock: Callable[[], float]) -> None:
        self._settings = settings
        self._clock = clock
        self._all: OrderedDict[tuple[str, str], RequestRecord] = OrderedDict()  # oldest first
        self._tenants: dict[str, OrderedDict[str, RequestRecord]] = {}
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._all)

    def add(self, record: RequestRecord) -> None:
        """Records ``record`` (replacing one of the same tenant and id), then drops what is over a
        bound. A record bigger than the whole byte cap is not kept."""
        self._remove(record.tenant, record.request_id)
        if record.nbytes > self._settings.max_bytes:
            return
        self._all[(record.tenant, record.request_id)] = record
        self._tenants.setdefault(record.tenant, OrderedDict())[record.request_id] = record
        self.nbytes += record.nbytes
        self._trim(record.tenant)

    def get(self, tenant: str, request_id: str) -> RequestRecord | None:
        """``tenant``'s record of ``request_id``; None when it has none (expired, dropped, never
        seen, or another tenant's)."""
        record = self._tenants.get(tenant, {}).get(request_id)
        if record is not None and record.at_s < self._clock() - self._settings.ttl_s:
            return None
        return record

    def recent(self, tenant: str, limit: int) -> list[RequestRecord]:
        """``tenant``'s ``limit`` most recent unexpired records, newest first."""
        oldest = self._clock() - self._settings.ttl_s
        out: list[RequestRecord] = []
        for record in reversed(self._tenants.get(tenant, {}).values()):
            if len(out) >= limit or record.at_s < oldest:
                break
            out.append(record)
        return out

    def _trim(self, tenant: str) -> None:
        mine = self._tenants[tenant]
        while len(mine) > self._settings.max_per_tenant:
            self._remove(tenant, next(iter(mine)))
        oldest = self._clock() - self._settings.ttl_s
        while self._all and self._over(oldest):
            self._remove(*next(iter(self._all)))

    def _over(self, oldest: float) -> bool:
        first = next(iter(self._all.values()))
        over_count = len(self._all) > self._settings.max_requests
        return over_count or self.nbytes > self._settings.max_bytes or first.at_s < oldest

    def _remove(self, tenant: str, request_id: str) -> None:
        record = self._all.pop((tenant, request_id), None)
        if record is None:
            return
        self.nbytes -= record.nbytes
        mine = self._tenants[tenant]
        del mine[request_id]
        if not mine:
            del self._tenants[tenant]
