"""The body of ``/health``, as OpenAPI documents it (200 when a worker is routable, else 503)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class HealthBody(BaseModel):
    # degraded: discovery is stale or Redis unreachable; the workers are still served
    status: Literal["ok", "degraded", "unavailable"]
    workers: int  # routable workers
    index_degraded: bool  # the prefix index is unreachable: routing by load alone
    discovery_stale: bool  # the worker list has not been refreshed for several periods
    refused_workers: int  # records in the index this gateway refuses: unsigned, forged, or misconfigured
    unfollowed_workers: int  # routable; their holdings are learned, no event stream reports them
    shared_index_reachable: bool | None  # Redis answered the last membership read (None: no Redis)


HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": HealthBody, "description": "At least one worker is routable"},
    503: {"model": HealthBody, "description": "No worker is routable"},
}
