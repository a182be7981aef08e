"""The worker's Prometheus exporter: its KV tiers, evictions, copies and queues, read from the
engine's latest :class:`EngineStats` at scrape time (no extra work per step)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kvgate.workers.service.engine_stats import EngineStats
from kvgate.workers.service.transfer_counters import TransferCounters


class WorkerCollector(Collector):
    """Every family carries the ``worker`` label; ``block_bytes`` (bytes of one KV block, all layers)
    turns block counts of offloads and swap-ins into bytes; ``transfers``: the KV moved between workers
    (None: none)."""

    def __init__(
        self,
        worker_id: str,
        stats: Callable[[], EngineStats],
        block_bytes: int,
        transfers: Callable[[], TransferCounters] | None = None,
    ) -> None:
        self._worker = worker_id
        self._stats = stats
        self._block_bytes = block_bytes
        self._transfers = transfers or TransferCounters

    def collect(self) -> Iterator[Metric]:
        s = self._stats()
        yield self._blocks(s)
        yield from self._tokens(s)
        yield from self._cache_traffic(s)
        yield from self._queues(s)
        yield from self._kv_transfers(self._transfers())

    def _family(self, kind: type, name: str, doc: str, labels: tuple[str, ...] = ()) -> Metric:
        return kind(name, doc, labels=("worker", *labels))

    def _blocks(self, s: EngineStats) -> Metric:
        load = s.load
        family = self._family(
            GaugeMetricFamily, "kvgate_worker_blocks", "KV blocks by tier and state.", ("tier", "state")
        )
        rows = [
            ("gpu", "used", load.gpu_blocks_total - load.gpu_blocks_free),
            ("gpu", "free", load.gpu_blocks_free),
            ("gpu", "cached", s.gpu_cached_blocks),
            ("cpu", "used", load.cpu_blocks_total - load.cpu_blocks_free),
            ("cpu", "free", load.cpu_blocks_free),
        ]
        for tier, state, value in rows:
            family.add_metric([self._worker, tier, state], value)
        return family

    def _tokens(self, s: EngineStats) -> Iterator[Metric]:
        c = s.counters
        prompt = self._family(CounterMetricFamily, "kvgate_worker_prompt_tokens", "Prompt tokens admitted.")
        prompt.add_metric([self._worker], c.prompt_tokens)
        cached = self._family(
            CounterMetricFamily,
            "kvgate_worker_cached_tokens",
            "Prompt tokens served from the prefix cache, by tier.",
            ("tier",),
        )
        cached.add_metric([self._worker, "gpu"], c.cached_gpu_tokens)
        cached.add_metric([self._worker, "cpu"], c.cached_cpu_tokens)
        completion = self._family(CounterMetricFamily, "kvgate_worker_completion_tokens", "Tokens generated.")
        completion.add_metric([self._worker], c.completion_tokens)
        finished = self._family(
            CounterMetricFamily, "kvgate_worker_requests_finished", "Finished requests.", ("reason",)
        )
        for reason in ("stop", "length", "abort", "error"):
            finished.add_metric([self._worker, reason], getattr(c, f"finished_{reason}"))
        yield from (prompt, cached, completion, finished)

    def _cache_traffic(self, s: EngineStats) -> Iterator[Metric]:
        kv = s.kv
        evictions = self._family(
            CounterMetricFamily, "kvgate_worker_evictions", "Blocks evicted, by cause.", ("cause",)
        )
        evictions.add_metric([self._worker, "ttl"], kv.evicted_ttl)
        evictions.add_metric([self._worker, "pressure"], kv.evicted_pressure)
        copies = self._family(
            CounterMetricFamily, "kvgate_worker_block_copies", "Blocks copied between tiers.", ("direction",)
        )
        moved = self._family(
            CounterMetricFamily,
            "kvgate_worker_block_copy_bytes",
            "Bytes copied between tiers.",
            ("direction",),
        )
        for direction, blocks in (("offload", kv.offloaded), ("swap_in", kv.swapped_in)):
            copies.add_metric([self._worker, direction], blocks)
            moved.add_metric([self._worker, direction], blocks * self._block_bytes)
        preemptions = self._family(CounterMetricFamily, "kvgate_worker_preemptions", "Sequences preempted.")
        preemptions.add_metric([self._worker], s.counters.preemptions)
        yield from (evictions, copies, moved, preemptions)

    def _kv_transfers(self, t: TransferCounters) -> Iterator[Metric]:
        moved = self._family(
            CounterMetricFamily,
            "kvgate_worker_kv_transfer_blocks",
            "KV blocks imported from / exported to other workers.",
            ("direction",),
        )
        moved.add_metric([self._worker, "import"], t.imported_blocks)
        moved.add_metric([self._worker, "export"], t.exported_blocks)
        tokens = self._family(
            CounterMetricFamily, "kvgate_worker_kv_imported_tokens", "Prompt tokens of imported KV blocks."
        )
        tokens.add_metric([self._worker], t.imported_tokens)
        failures = self._family(
            CounterMetricFamily,
            "kvgate_worker_kv_fetch_failures",
            "KV fetches from other workers that failed (the prompt was computed instead).",
        )
        failures.add_metric([self._worker], t.fetch_failures)
        yield from (moved, tokens, failures)

    def _queues(self, s: EngineStats) -> Iterator[Metric]:
        load = s.load
        for name, doc, value in (
            ("kvgate_worker_running_seqs", "Sequences running.", load.running_seqs),
            ("kvgate_worker_waiting_seqs", "Sequences waiting.", load.waiting_seqs),
            ("kvgate_worker_waiting_prefill_tokens", "Prompt tokens waiting.", load.waiting_prefill_tokens),
        ):
            family = self._family(GaugeMetricFamily, name, doc)
            family.add_metric([self._worker], value)
            yield family


class MetricsEndpoint:
    """``/metrics`` over HTTP in a daemon thread (prometheus_client's server); :meth:`stop` closes it."""

    def __init__(self, collector: Collector) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(collector)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def start(self, host: str, port: int) -> int:
        """Serves on ``host:port`` (0: any free port); returns the bound port."""
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = self._server.server_port
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
