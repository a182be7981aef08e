"""Per-tenant rate limits: two token buckets (requests and tokens per minute), checked together.

A bucket holds up to one minute's allowance and refills continuously. A request is admitted only
when both buckets hold enough; then both are charged. Otherwise nothing is charged and the caller
learns how long until both would hold enough (``Retry-After``). A request larger than a whole
minute's token allowance can never be admitted: that is reported as such, not as a wait.
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

    def admit(self, tenant: Tenant, tokens: int) -> float:
        """0.0 when admitted (both buckets charged), else the seconds to wait before retrying (nothing
        charged). RequestTooLargeError when ``tokens`` exceeds a whole minute's token allowance."""
        now = self._now()
        wanted = self._charges(tenant, tokens, now)
        for bucket, amount in wanted:
            if amount > bucket.capacity:
                raise RequestTooLargeError(
                    f"the request needs {amount:.0f} tokens; tenant {tenant.name!r} may use "
                    f"{bucket.capacity:.0f} per minute"
                )
        wait = max((bucket.wait_for(amount) for bucket, amount in wanted), default=0.0)
        if wait > 0:
            return wait
        for bucket, amount in wanted:
            bucket.level -= amount
        return 0.0

    def wait_s(self, tenant: Tenant) -> float:
        """Seconds until the tenant could send one more request (a request, and at least one token,
        available); 0.0 when it can now. Charges nothing."""
        return max((b.wait_for(1) for b, _ in self._charges(tenant, 1, self._now())), default=0.0)

    def _charges(self, tenant: Tenant, tokens: int, now: float) -> list[tuple[_Bucket, float]]:
        rate = tenant.rate
        limits = (("requests", rate.requests_per_minute, 1), ("tokens", rate.tokens_per_minute, tokens))
        charges = []
        for kind, per_minute, amount in limits:
            if per_minute is None:
                continue
            bucket = self._buckets.get((tenant.name, kind))
            if bucket is None or bucket.capacity != per_minute:
                bucket = self._buckets[(tenant.name, kind)] = _Bucket(per_minute, per_minute, now)
            bucket.refill(now)
            charges.append((bucket, amount))
        return charges
