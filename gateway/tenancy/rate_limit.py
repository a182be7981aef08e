"""Per-tenant rate limits: two token buckets (requests and tokens per minute).

A bucket holds up to one minute's allowance and refills continuously. Every request is counted as it
arrives (:meth:`RateLimiter.count_request`), whatever becomes of it: one refused as invalid costs its
sender as much as one served, so refusals cannot be repeated for free. Its tokens are charged once it
is known how many it asks for (:meth:`RateLimiter.admit`). When a bucket does not hold enough, nothing
is charged and the caller learns how long until it would (``Retry-After``). A request larger than a
whole minute's token allowance can never be admitted: that is reported as such, not as a wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from kvgate.gateway.tenancy.tenant import Tenant


class RequestTooLargeError(Exception):
    """The request alone needs more tokens than the tenant's whole per-minute allowance."""


@dataclass(slots=True)
class _Bucket:
    capacity: float
    level: float
    updated_s: float

    def refill(self, now_s: float) -> None:
        self.level = min(self.capacity, self.level + (now_s - self.updated_s) * self.capacity / 60.0)
        self.updated_s = now_s

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (0 when it is)."""
        return max(0.0, (amount - self.level) * 60.0 / self.capacity)


class RateLimiter:
    """Owned by the gateway's composition root; event-loop only (no locking). Memory: two buckets per
    tenant with limits, bounded by the configured tenants."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._now = monotonic
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def count_request(self, tenant: Tenant) -> float:
        """0.0 when the tenant may send one more request (it is counted), else the seconds to wait
        (nothing counted). A request also needs at least one token left."""
        wait = self.wait_s(tenant)
        requests = self._bucket(tenant, "requests")
        if wait == 0 and requests is not None:
            requests.level -= 1
        return wait

    def admit(self, tenant: Tenant, tokens: int) -> float:
        """0.0 when ``tokens`` are admitted (charged), else the seconds to wait before retrying (nothing
        charged). RequestTooLargeError when ``tokens`` exceeds a whole minute's token allowance. The
        request itself is counted by :meth:`count_request`."""
        bucket = self._bucket(tenant, "tokens")
        if bucket is None:
            return 0.0
        if tokens > bucket.capacity:
            raise RequestTooLargeError(
                f"the request needs {tokens} tokens; tenant {tenant.name!r} may use "
                f"{bucket.capacity:.0f} per minute"
            )
        wait = bucket.wait_for(tokens)
        if wait == 0:
            bucket.level -= tokens
        return wait

    def wait_s(self, tenant: Tenant) -> float:
        """Seconds until the tenant could send one more request (a request, and at least one token,
        available); 0.0 when it can now. Charges nothing."""
        buckets = (self._bucket(tenant, kind) for kind in ("requests", "tokens"))
        return max((b.wait_for(1) for b in buckets if b is not None), default=0.0)

    def _bucket(self, tenant: Tenant, kind: str) -> _Bucket | None:
        """The tenant's bucket of ``kind``, refilled to now; None when that kind is not limited."""
        per_minute = tenant.rate.requests_per_minute if kind == "requests" else tenant.rate.tokens_per_minute
        if per_minute is None:
            return None
        now = self._now()
        bucket = self._buckets.get((tenant.name, kind))
        if bucket is None or bucket.capacity != per_minute:
            bucket = self._buckets[(tenant.name, kind)] = _Bucket(per_minute, per_minute, now)
        bucket.refill(now)
        return bucket
