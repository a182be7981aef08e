"""The settings of the per-tenant record of recent requests behind cache-miss diagnosis."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DiagnosisSettings:
    """``enabled`` False: nothing is recorded and every diagnosis is a 404. The record keeps at most
    ``max_requests`` requests and ``max_bytes`` bytes of them (all tenants together; the oldest go
    first), at most ``max_per_tenant`` of one tenant, none older than ``ttl_s``. A new request is
    compared with its tenant's ``compare_recent`` most recent requests (its cost per request)."""

    enabled: bool = True
    max_requests: int = 100_000
    max_bytes: int = 64 * 1024 * 1024
    max_per_tenant: int = 10_000
    ttl_s: float = 3600.0
    compare_recent: int = 64

    def __post_init__(self) -> None:
        for name in ("max_requests", "max_bytes", "max_per_tenant", "ttl_s", "compare_recent"):
            if getattr(self, name) <= 0:
                raise ValueError(f"diagnosis.{name} must be positive")
