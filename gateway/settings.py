"""The gateway's settings: one frozen object per process, validated at start."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvgate.common.grpc_tls import TlsFiles
from kvgate.common.tokenizer import DEFAULT_CAPACITY_BYTES
from kvgate.gateway.conversations import ResponseStoreSettings
from kvgate.gateway.diagnosis import DiagnosisSettings
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
class HttpTimeouts:
    """How long the HTTP front waits on a client before it closes the connection.

    - ``header_s``: from a request's first byte (or the connection's opening) to its last header.
    - ``body_s`` and ``min_body_rate``: a body must be complete within ``body_s`` seconds plus one
      second per ``min_body_rate`` bytes received (a slow but steady upload continues; a trickle is cut
      off with a 408).
    - ``keep_alive_s``: how long an idle connection is kept between requests.
    """

    header_s: float = 10.0
    body_s: float = 20.0
    min_body_rate: int = 64 * 1024
    keep_alive_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("header_s", "body_s", "min_body_rate", "keep_alive_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"http timeouts: {name} must be positive")


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """``model_name`` is the name clients use (``/v1/models``); ``cache`` must equal the workers'
    (its fingerprint is checked against each worker's). ``keys``: the API keys and their tenants (None:
    no authentication, one anonymous tenant). ``max_concurrent_requests``: generations in flight at
    once on this gateway; beyond it, a fast 503 with Retry-After. ``worker_tls``: TLS to the workers
    (None: plaintext). ``http_timeouts``: how long the HTTP front waits on slow clients.
    ``admin_keys``: the keys of the operators' endpoints (``/metrics``, ``/dashboard``, ``/docs``;
    None: open). ``shutdown_grace_s``: at shutdown, how long requests in flight (HTTP and gRPC
    streams) may take to finish before they are cut. ``tokenizer_cache_bytes``: the memory this
    process may keep token ids of prompt pieces in (system prompts, earlier turns), least recently
    used evicted first; 0 disables it (default 64 MiB). ``diagnosis``: the record of recent requests
    behind ``/v1/cache/diagnose`` (bounds, TTL; it can be switched off). ``responses``: the bounds of
    the Responses API's stored responses (``previous_response_id``)."""

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
    http_timeouts: HttpTimeouts = field(default_factory=HttpTimeouts)
    admin_keys: KeyRing | None = None
    shutdown_grace_s: float = 30.0
    tokenizer_cache_bytes: int = DEFAULT_CAPACITY_BYTES
    diagnosis: DiagnosisSettings = field(default_factory=DiagnosisSettings)
    responses: ResponseStoreSettings = field(default_factory=ResponseStoreSettings)

    def __post_init__(self) -> None:
        if not self.model_name:
            raise ValueError("model_name must not be empty")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.max_concurrent_requests < 1:
            raise ValueError("max_concurrent_requests must be >= 1")
        if self.shutdown_grace_s < 0:
            raise ValueError("shutdown_grace_s must be >= 0")
        if self.tokenizer_cache_bytes < 0:
            raise ValueError("tokenizer_cache_bytes must be >= 0")
