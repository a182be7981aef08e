"""``TenantBounded``: values kept per tenant under four bounds, the shape of every per-tenant record
the gateway keeps (diagnosis records, stored responses).

Bounds, all enforced on every :meth:`TenantBounded.put`: a count and a byte total over all tenants
(oldest first out), a count per tenant (that tenant's oldest out), and an age (older than ``ttl_s``
out, and never returned by a lookup). A tenant's values are only reached by a lookup naming that
tenant: another tenant's key is simply not there.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Bounds:
    """At most ``max_items`` values and ``max_bytes`` bytes of them, ``max_per_tenant`` of one
    tenant, none older than ``ttl_s`` seconds."""

    max_items: int
    max_bytes: int
    max_per_tenant: int
    ttl_s: float


@dataclass(frozen=True, slots=True)
class _Kept(Generic[V]):
    value: V
    at_s: float
    nbytes: int


class TenantBounded(Generic[V]):
    """Not thread-safe: one event loop's. ``clock``: monotonic seconds."""

    def __init__(self, bounds: Bounds, clock: Callable[[], float]) -> None:
        self._bounds = bounds
        self._clock = clock
        self._all: OrderedDict[tuple[str, str], _Kept[V]] = OrderedDict()  # oldest first
        self._tenants: dict[str, OrderedDict[str, _Kept[V]]] = {}
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._all)

    def put(self, tenant: str, key: str, value: V, nbytes: int) -> None:
        """Keeps ``value`` (replacing the tenant's value of ``key``), then drops what is over a
        bound. A value bigger than the whole byte cap is not kept."""
        self.remove(tenant, key)
        if nbytes > self._bounds.max_bytes:
            return
        kept = _Kept(value, self._clock(), nbytes)
        self._all[(tenant, key)] = kept
        self._tenants.setdefault(tenant, OrderedDict())[key] = kept
        self.nbytes += nbytes
        self._trim(tenant)

    def get(self, tenant: str, key: str) -> V | None:
        """``tenant``'s value of ``key``; None when it has none (expired, dropped, never kept, or
        another tenant's)."""
        kept = self._tenants.get(tenant, {}).get(key)
        if kept is None or kept.at_s < self._oldest():
            return None
        return kept.value

    def tenants(self) -> tuple[str, ...]:
        """The tenants with a value kept (expired ones included until they are dropped)."""
        return tuple(self._tenants)

    def newest(self, tenant: str) -> Iterator[V]:
        """``tenant``'s unexpired values, newest first."""
        oldest = self._oldest()
        for kept in reversed(self._tenants.get(tenant, {}).values()):
            if kept.at_s < oldest:
                return
            yield kept.value

    def remove(self, tenant: str, key: str) -> bool:
        """Drops ``tenant``'s value of ``key``; whether there was one (expired or not)."""
        kept = self._all.pop((tenant, key), None)
        if kept is None:
            return False
        self.nbytes -= kept.nbytes
        mine = self._tenants[tenant]
        del mine[key]
        if not mine:
            del self._tenants[tenant]
        return True

    def _oldest(self) -> float:
        return self._clock() - self._bounds.ttl_s

    def _trim(self, tenant: str) -> None:
        mine = self._tenants[tenant]
        while len(mine) > self._bounds.max_per_tenant:
            self.remove(tenant, next(iter(mine)))
        oldest = self._oldest()
        while self._all and self._over(oldest):
            self.remove(*next(iter(self._all)))

    def _over(self, oldest: float) -> bool:
        first = next(iter(self._all.values()))
        over_count = len(self._all) > self._bounds.max_items
        return over_count or self.nbytes > self._bounds.max_bytes or first.at_s < oldest
