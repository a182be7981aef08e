"""The gateway's settings: one frozen object per process, validated at start."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvgate.common.grpc_tls import TlsFiles
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.tenancy import KeyRing
from kvgate.index.settings import IndexSettings
from kvgate.proto.layout import TTL_CLASSES, CacheLayout


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one request may ask for; beyond them, a 400 with the limit named."""

    context_window: int = 8192  # prompt + completion tokens
    max_output_tokens: int = 4096
    max_body_bytes: int = 8 * 1024 * 1024
    max_messages: int = 2048
    max_stop_strings: int = 8
    max_stop_chars: int = 256
    request_timeout_s: float = 600.0
    max_cache_ttl_s: int = TTL_CLASSES["1h"]  # the longest a request may pin a prefix for

    def __post_init__(self) -> None:
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise ValueError(f"limits.{name} must be positive")


_POSITIVE = ("context_window", "max_output_tokens", "max_body_bytes", "max_messages", "max_cache_ttl_s")


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """``model_name`` is the name clients use (``/v1/models``); ``cache`` must equal the workers'
    (its fingerprint is checked against each worker's). ``keys``: the API keys and their tenants (None:
    no authentication, one anonymous tenant). ``max_concurrent_requests``: generations in flight at
    once on this gateway; beyond it, a fast 503 with Retry-After. ``worker_tls``: TLS to the workers
    (None: plaintext)."""

    model_name: str
    cache: CacheLayout
    policy: str = "kvgate"
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    index: IndexSettings = field(default_factory=IndexSettings)
    limits: Limits = field(default_factory=Limits)
    max_attempts: int = 3
    keys: KeyRing | None = None
    max_concurrent_requests: int = 1024
    worker_tls: TlsFiles | None = None

    def __post_init__(self) -> None:
        if not self.model_name:
            raise ValueError("model_name must not be empty")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.max_concurrent_requests < 1:
            raise ValueError("max_concurrent_requests must be >= 1")
