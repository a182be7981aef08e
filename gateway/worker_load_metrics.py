"""The workers' KV tiers and evictions as the gateway sees them: the load figures of each live worker's
last heartbeat, exported on the gateway's own ``/metrics`` (so the dashboard and ``kvgate top`` need no
access to the workers' exporters). Read at scrape time; nothing is stored here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kvgate.index.types import WorkerStatus
from kvgate.proto.workers import WorkerLoad

LiveWorkers = Callable[[], Iterable[WorkerStatus]]
"""The live workers now (e.g. ``WorkerDirectory.live``); must not block."""


def tier_blocks(load: WorkerLoad) -> list[tuple[str, str, int]]:
    """(tier, state, blocks): disjoint states that add up to each tier's total. GPU blocks are ``used``
    by running sequences, ``cached`` (unused, reusable until evicted) or ``free`` (empty); CPU blocks
    hold a chunk (``cached``) or are ``free``. A tier of 0 blocks (absent) has no rows."""
    rows: list[tuple[str, str, int]] = []
    if load.gpu_blocks_total:
        rows += [
            ("gpu", "used", load.gpu_blocks_total - load.gpu_blocks_free),
            ("gpu", "cached", load.gpu_blocks_cached),
            ("gpu", "free", load.gpu_blocks_free - load.gpu_blocks_cached),
        ]
    if load.cpu_blocks_total:
        rows += [
            ("cpu", "cached", load.cpu_blocks_total - load.cpu_blocks_free),
            ("cpu", "free", load.cpu_blocks_free),
        ]
    return rows


class WorkerLoadCollector(Collector):
    """Labels are ``worker`` (the live workers: bounded by the deployment), ``tier`` x ``state`` (five
    pairs) and ``cause`` (two). Counters restart at 0 with a worker's new epoch, as Prometheus expects of
    a restarted process."""

    def __init__(self, live: LiveWorkers) -> None:
        self._live = live

    def collect(self) -> Iterator[Metric]:
        blocks = GaugeMetricFamily(
            "kvgate_upstream_blocks",
            "KV blocks per worker, tier and state (used / cached / free), as of its last heartbeat.",
            labels=("worker", "tier", "state"),
        )
        evicted = CounterMetricFamily(
            "kvgate_upstream_evicted_blocks",
            "KV blocks a worker dropped, by cause (ttl, pressure), as of its last heartbeat.",
            labels=("worker", "cause"),
        )
        offloaded = CounterMetricFamily(
            "kvgate_upstream_offloaded_blocks",
            "KV blocks a worker moved from its GPU to its CPU tier, as of its last heartbeat.",
            labels=("worker",),
        )
        seqs = GaugeMetricFamily(
            "kvgate_upstream_seqs", "Sequences per worker, running or waiting.", labels=("worker", "state")
        )
        for status in self._live():
            worker, load = status.info.worker_id, status.load
            for tier, state, value in tier_blocks(load):
                blocks.add_metric([worker, tier, state], value)
            evicted.add_metric([worker, "ttl"], load.evicted_ttl_blocks)
            evicted.add_metric([worker, "pressure"], load.evicted_pressure_blocks)
            offloaded.add_metric([worker], load.offloaded_blocks)
            seqs.add_metric([worker, "running"], load.running_seqs)
            seqs.add_metric([worker, "waiting"], load.waiting_seqs)
        yield from (blocks, evicted, offloaded, seqs)
