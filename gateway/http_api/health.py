"""The body of ``/health``, as OpenAPI documents it (200 when a worker is routable, else 503)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class HealthBody(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]  # degraded: discovery is stale, workers still served
    workers: int  # routable workers
    index_degraded: bool  # the prefix index is unreachable: routing by load alone
    discovery_stale: bool  # the worker list has not been refreshed for several periods
    refused_workers: int  # records in the index this gateway refuses: unsigned, forged, or misconfigured


HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": HealthBody, "description": "At least one worker is routable"},
    503: {"model": HealthBody, "description": "No worker is routable"},
}
