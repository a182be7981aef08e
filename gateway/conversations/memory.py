"""The in-memory response store: one gateway's stored responses, bounded (see
:class:`~kvgate.gateway.conversations.store.ResponseStoreSettings`). Every bound is enforced on each
:meth:`MemoryResponseStore.put`; an expired response is also refused on lookup. A continuation must
reach the gateway that stored its previous response (a Redis-backed store would share them)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kvgate.gateway.conversations.store import ResponseStoreSettings, StoredResponse


@dataclass(frozen=True, slots=True)
class _Kept:
    stored: StoredResponse
    at_s: float
    nbytes: int


class MemoryResponseStore:
    """Owned by the composition root; the event loop's only (not thread-safe, never blocks)."""

    def __init__(self, settings: ResponseStoreSettings, clock: Callable[[], float]) -> None:
        self._settings = settings
        self._clock = clock
        self._all: OrderedDict[tuple[str, str], _Kept] = OrderedDict()  # oldest first
        self._tenants: dict[str, OrderedDict[str, _Kept]] = {}
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._all)

    async def put(self, tenant: str, stored: StoredResponse) -> None:
        self._remove(tenant, stored.response_id)
        kept = _Kept(stored, self._clock(), stored.nbytes)
        if kept.nbytes > self._settings.max_bytes:
            return
        self._all[(tenant, stored.response_id)] = kept
        self._tenants.setdefault(tenant, OrderedDict())[stored.response_id] = kept
        self.nbytes += kept.nbytes
        self._trim(tenant)

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None:
        kept = self._tenants.get(tenant, {}).get(response_id)
        if kept is None or kept.at_s < self._clock() - self._settings.ttl_s:
            return None
        return kept.stored

    async def delete(self, tenant: str, response_id: str) -> bool:
        found = await self.get(tenant, response_id) is not None
        self._remove(tenant, response_id)
        return found

    def _trim(self, tenant: str) -> None:
        mine = self._tenants[tenant]
        while len(mine) > self._settings.max_per_tenant:
            self._remove(tenant, next(iter(mine)))
        oldest = self._clock() - self._settings.ttl_s
        while self._all and self._over(oldest):
            self._remove(*next(iter(self._all)))

    def _over(self, oldest: float) -> bool:
        first = next(iter(self._all.values()))
        over_count = len(self._all) > self._settings.max_responses
        return over_count or self.nbytes > self._settings.max_bytes or first.at_s < oldest

    def _remove(self, tenant: str, response_id: str) -> None:
        kept = self._all.pop((tenant, response_id), None)
        if kept is None:
            return
        self.nbytes -= kept.nbytes
        mine = self._tenants[tenant]
        del mine[response_id]
        if not mine:
            del self._tenants[tenant]
