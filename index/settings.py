"""Settings of the prefix index (both backends)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_PENDING_WAIT_S = 30.0
"""A request expected to wait longer than this keeps its pending entries no longer (the queue may
not last that long): pending entries live at most ``pending_ttl_s`` + this."""


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """Validated on construction, never mutated.

    ``timeout_s`` bounds every backend call (after it, :class:`IndexUnavailableError`);
    ``heartbeat_ttl_s`` is how long a worker stays live after its last heartbeat;
    ``pending_ttl_s`` is how long a routing decision's pending entries outlive the wait its request
    is expected to have before the worker computes them (:meth:`pending_ms`);
    ``key_slack_s`` is how long Redis keys outlive the last expiry they hold (self-healing TTL);
    ``namespace`` prefixes every Redis key, so deployments can share one Redis;
    ``groups``: workers are spread over this many Redis key groups (each one hash slot of a Redis
    Cluster), so a deployment's keys spread over a cluster's shards;
    ``resync_slice``: holdings per Redis call when a snapshot is written (bounds each call's time).
    """

    namespace: str = "kvgate"
    timeout_s: float = 0.025
    heartbeat_ttl_s: float = 10.0
    pending_ttl_s: float = 2.0
    key_slack_s: float = 60.0
    groups: int = 16
    resync_slice: int = 1000

    def __post_init__(self) -> None:
        for name in ("timeout_s", "heartbeat_ttl_s", "pending_ttl_s", "key_slack_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not 1 <= self.groups <= 4096 or self.resync_slice < 1:
            raise ValueError("groups must be in 1..4096 and resync_slice positive")
        if not self.namespace or any(c in self.namespace for c in " {}"):
            raise ValueError("namespace must be non-empty, without spaces or braces")

    def pending_ms(self, wait_s: float = 0.0) -> int:
        """Milliseconds a pending entry lives: ``pending_ttl_s`` after ``wait_s``, the time its
        request is expected to wait before the worker computes its chunks (clamped to 0 ..
        :data:`MAX_PENDING_WAIT_S`; a NaN counts as 0). A prompt queued behind others is still
        going to be computed there: every gateway should follow it until it is stored."""
        wait = min(max(wait_s, 0.0), MAX_PENDING_WAIT_S) if wait_s == wait_s else 0.0
        return round((self.pending_ttl_s + wait) * 1000)
