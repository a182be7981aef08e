"""Settings of the prefix index (both backends)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """Validated on construction, never mutated.

    ``timeout_s`` bounds every backend call (after it, :class:`IndexUnavailableError`);
    ``heartbeat_ttl_s`` is how long a worker stays live after its last heartbeat;
    ``pending_ttl_s`` is how long a gateway's own routing decision is remembered;
    ``key_slack_s`` is how long Redis keys outlive the last expiry they hold (self-healing TTL);
    ``namespace`` prefixes every Redis key, so deployments can share one Redis.
    """

    namespace: str = "kvgate"
    timeout_s: float = 0.025
    heartbeat_ttl_s: float = 10.0
    pending_ttl_s: float = 2.0
    key_slack_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("timeout_s", "heartbeat_ttl_s", "pending_ttl_s", "key_slack_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not self.namespace or any(c in self.namespace for c in " {}"):
            raise ValueError("namespace must be non-empty, without spaces or braces")
