"""The in-memory response store: one gateway's stored responses, bounded (see
:class:`~kvgate.gateway.conversations.store.ResponseStoreSettings`). Every bound is enforced on each
:meth:`MemoryResponseStore.put`; an expired response is also refused on lookup. A continuation must
reach the gateway that stored its previous response (a Redis-backed store would share them)."""

from __future__ import annotations

from collections.abc import Callable

from kvgate.gateway.conversations.store import ResponseStoreSettings, StoredResponse
from kvgate.gateway.tenancy.bounded import Bounds, TenantBounded


class MemoryResponseStore:
    """Owned by the composition root; the event loop's only (not thread-safe, never blocks)."""

    def __init__(self, settings: ResponseStoreSettings, clock: Callable[[], float]) -> None:
        bounds = Bounds(settings.max_responses, settings.max_bytes, settings.max_per_tenant, settings.ttl_s)
        self._kept: TenantBounded[StoredResponse] = TenantBounded(bounds, clock)

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def nbytes(self) -> int:
        return self._kept.nbytes

    async def put(self, tenant: str, stored: StoredResponse) -> None:
        self._kept.put(tenant, stored.response_id, stored, stored.nbytes)

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None:
        return self._kept.get(tenant, response_id)

    async def delete(self, tenant: str, response_id: str) -> bool:
        found = self._kept.get(tenant, response_id) is not None
        self._kept.remove(tenant, response_id)
        return found
