"""The gateway's Prometheus metrics: what routing promised, what the workers delivered, and what the
users waited. One instance per gateway, on a registry of its own (no global default registry)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kvgate.gateway.diagnosis import Cause, Diagnosis
from kvgate.gateway.misprediction import ROUTED_AWAY, misprediction
from kvgate.gateway.routing.types import Routed
from kvgate.gateway.tenant_metrics import ANONYMOUS_LABEL, TenantUsage
from kvgate.gateway.worker_load_metrics import LiveWorkers, WorkerLoadCollector
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE
from kvgate.proto.sampling import Usage

# up to 5 minutes: on CPU a cold prompt of a few thousand tokens takes tens of seconds to prefill, and
# a quantile past the top bucket reads as that bucket's bound
_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
_LOOKUP = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05)
_ITL = (0.001, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28)


class GatewayMetrics:
    """Counters are in tokens where the question is "how much prefill was saved"; label values are
    bounded (worker ids, policy names, route reasons, tiers, misprediction causes, a fixed list of
    error types, the configured ``tenants`` and ``anonymous``: see :mod:`kvgate.gateway.tenant_metrics`).
    ``chunk_size`` and ``block_size`` are the deployment's (``CacheLayout``)."""

    def __init__(
        self,
        model: str,
        policy: str,
        chunk_size: int,
        registry: CollectorRegistry | None = None,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        tenants: Iterable[str] = (),
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.model, self._policy, self._chunk_size, self._block_size = model, policy, chunk_size, block_size
        self._watching = False
        r = self.registry
        self.prompt_tokens = Counter(
            "kvgate_prompt_tokens", "Prompt tokens served, by worker.", ["worker", "policy"], registry=r
        )
        self.cached_tokens = Counter(
            "kvgate_cached_prompt_tokens",
            "Prompt tokens whose KV was reused, by worker and tier (worker's count).",
            ["worker", "policy", "tier"],
            registry=r,
        )
        self.predicted_tokens = Counter(
            "kvgate_predicted_cached_tokens",
            "Cached prompt tokens the router predicted.",
            ["worker"],
            registry=r,
        )
        self.mispredicted = Counter(
            "kvgate_cache_misprediction_tokens",
            "Cached tokens predicted wrongly or given up, by cause (see kvgate.gateway.misprediction).",
            ["cause"],
            registry=r,
        )
        self.cache_miss = Counter(
            "kvgate_cache_miss_tokens",
            "Reusable prompt tokens that were not reused, by diagnosed cause (see docs/CACHING.md).",
            ["cause"],
            registry=r,
        )
        for cause in Cause:
            self.cache_miss.labels(cause.value)
        self.kv_sources = Counter(
            "kvgate_route_kv_sources",
            "Decisions naming a KV source: the chosen worker fetches the prompt's prefix from its holder.",
            ["policy"],
            registry=r,
        )
        self.decisions = Counter(
            "kvgate_route_decisions", "Routing decisions by reason.", ["reason", "policy"], registry=r
        )
        self.lookup_seconds = Histogram(
            "kvgate_index_lookup_seconds", "Prefix index lookup latency.", buckets=_LOOKUP, registry=r
        )
        self.degraded = Gauge("kvgate_index_degraded", "1 while the prefix index is unavailable.", registry=r)
        self.ttft = Histogram(
            "kvgate_time_to_first_token_seconds",
            "Time to first token.",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.itl = Histogram(
            "kvgate_inter_token_latency_seconds",
            "Time between token batches.",
            ["model"],
            buckets=_ITL,
            registry=r,
        )
        self.e2e = Histogram(
            "kvgate_request_duration_seconds",
            "Request latency, end to end.",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.requests = Counter(
            "kvgate_requests", "Finished requests by finish reason.", ["model", "finish_reason"], registry=r
        )
        self.errors = Counter("kvgate_request_errors", "Failed requests by error type.", ["type"], registry=r)
        self.warm_ups = Counter(
            "kvgate_warm_ups",
            "Warm-ups (background prefills of a hot shared opening on one more worker) by outcome: done, "
            "failed, dropped (too many in flight).",
            ["outcome"],
            registry=r,
        )
        self.tenants = TenantUsage(r, tenants)

    def routed(self, routed: Routed) -> None:
        """A decision was made."""
        self.decisions.labels(routed.decision.reason.value, self._policy).inc()
        self.degraded.set(1 if routed.degraded else 0)
        if routed.lookup_s is not None:
            self.lookup_seconds.observe(routed.lookup_s)
        if routed.lookup is not None:
            given_up = (routed.lookup.longest - routed.decision.matched_chunks) * self._chunk_size
            if routed.source is not None:  # the chosen worker fetches those from the source
                given_up = min(given_up, routed.lookup.longest * self._chunk_size - routed.source.tokens)
                self.kv_sources.labels(self._policy).inc()
            if given_up > 0:
                self.mispredicted.labels(ROUTED_AWAY).inc(given_up)

    def finished(
        self, routed: Routed, usage: Usage, finish_reason: str, tenant: str = ANONYMOUS_LABEL
    ) -> None:
        """A request of ``tenant`` (the authenticated one's name) ended normally; ``usage`` is the
        worker's own count."""
        worker = routed.decision.worker_id
        predicted = routed.decision.predicted_cached_tokens
        self.prompt_tokens.labels(worker, self._policy).inc(usage.prompt_tokens)
        self.cached_tokens.labels(worker, self._policy, "gpu").inc(usage.cached_gpu_tokens)
        self.cached_tokens.labels(worker, self._policy, "cpu").inc(usage.cached_cpu_tokens)
        self.predicted_tokens.labels(worker).inc(predicted)
        missed = misprediction(routed, usage, self._chunk_size, self._block_size)
        if missed is not None:
            self.mispredicted.labels(missed[0]).inc(missed[1])
        self.requests.labels(self.model, finish_reason).inc()
        self.tenants.finished(tenant, usage)

    def diagnosed(self, diagnosis: Diagnosis) -> None:
        """A finished request was diagnosed: its missed reusable tokens count under its cause."""
        self.cache_miss.labels(diagnosis.cause.value).inc(diagnosis.missed_tokens)

    def watch_workers(self, live: LiveWorkers) -> None:
        """Also exports the live workers' reported KV tiers and evictions (see
        :mod:`kvgate.gateway.worker_load_metrics`). Idempotent: the first source is kept."""
        if not self._watching:
            self.registry.register(WorkerLoadCollector(live))
            self._watching = True

    def failed(self, error_type: str) -> None:
        self.errors.labels(error_type).inc()

    def warm_up(self, outcome: str) -> None:
        """A warm-up ended (``done``, ``failed``) or was not sent (``dropped``)."""
        self.warm_ups.labels(outcome).inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


class StreamTimer:
    """Times one request's stream: TTFT at the first token batch, then the gaps between batches."""

    def __init__(self, metrics: GatewayMetrics, started: float) -> None:
        self._metrics, self._model = metrics, metrics.model
        self._started = started
        self._last: float | None = None

    def tokens(self, now: float) -> None:
        if self._last is None:
            self._metrics.ttft.labels(self._model).observe(now - self._started)
        else:
            self._metrics.itl.labels(self._model).observe(now - self._last)
        self._last = now

    def done(self, now: float) -> None:
        self._metrics.e2e.labels(self._model).observe(now - self._started)


def bucket_quantile(buckets: dict[float, float], q: float) -> float | None:
    """The upper bound of the histogram bucket holding the q-quantile (``le`` -> cumulative count;
    Prometheus-style, without interpolation); in the ``+Inf`` bucket, the highest finite bound (as
    Prometheus answers; JSON has no infinity). None for an empty histogram."""
    ordered = sorted(buckets.items())
    total = ordered[-1][1] if ordered else 0.0
    if total <= 0:
        return None
    bound = next(le for le, count in ordered if count >= q * total)
    finite = [le for le, _ in ordered if math.isfinite(le)]
    return bound if math.isfinite(bound) else max(finite, default=None)
