"""Index at cluster scale: routing decision cost from 8 to 1,024 workers, event apply rate, bytes per
chunk-holder and the longest Redis command of a resync.

    python bench/index_scale.py [--workers 8,64,256,1024] [--out bench/results]

Every worker holds a shared 15k-token prefix plus private suffixes; a request is the shared prefix,
one worker's suffix and a new tail. A *decision* is hash + lookup + score (``Router.preview``, the
default policy); tokenization is excluded. Backends: the in-process index (what each gateway
routes on), one Redis and a 3-master Redis Cluster (both started here on loopback ports). Writes
``index_scale.json`` and ``index_scale.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import sys
import time
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gateway import _commit
from kvgate.common.clock import SystemClock
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.router import Router
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex
from kvgate.index.redis_index import redis_client
from kvgate.proto.events import EventBatch, Holding, KVEvent, Snapshot
from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.ids import Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE as CHUNK
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from tests.support.redis_server import RedisServer

ROOT = HashRoot(b"bench", "HuggingFaceTB/SmolLM2-135M-Instruct").digest()
SHARED_TOKENS, PRIVATE_CHUNKS, TAIL_TOKENS = 15_000, 8, 1_000
FAR = 3_600_000


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tokens_of(worker: int) -> np.ndarray:
    """The shared prefix then ``worker``'s private suffix (token ids)."""
    shared = np.arange(SHARED_TOKENS, dtype=np.uint32) % 49_000
    private = (np.arange(PRIVATE_CHUNKS * CHUNK, dtype=np.uint32) + 7_919 * (worker + 1)) % 49_000
    return np.concatenate([shared, private])


def request_tokens(worker: int, salt: int) -> np.ndarray:
    tail = (np.arange(TAIL_TOKENS, dtype=np.uint32) * 31 + salt) % 49_000
    return np.concatenate([tokens_of(worker), tail])


def worker_info(i: int) -> WorkerInfo:
    address = f"10.0.{i // 250}.{i % 250}:50051"
    return WorkerInfo(WorkerId(f"worker-{i:04d}"), Epoch(1), address, "f" * 32, "m")


async def populate(index: PrefixIndex, workers: int) -> None:
    expires = SystemClock().now_ms() + FAR
    for i in range(workers):
        info = worker_info(i)
        await index.register(info, WorkerLoad(waiting_prefill_tokens=(i * 37) % 900, running_seqs=i % 5))
        hashes = chunk_hashes(tokens_of(i), ROOT, CHUNK)
        tiers = [Tier.GPU if j % 9 else Tier.CPU for j in range(len(hashes))]  # some chunks offloaded
        events = tuple(KVEvent.stored(h, t, expires) for h, t in zip(hashes, tiers, strict=True))
        await index.apply(EventBatch(info.worker_id, Epoch(1), SeqNo(1), events))


async def decisions(index: PrefixIndex, workers: int, iterations: int) -> tuple[float, float]:
    """p50 / p99 ms of hash + lookup + score."""
    router = Router(index, get_policy("kvgate", RoutingConfig()), get_policy("least_loaded", RoutingConfig()),
                    CHUNK, 2.0, SystemClock())  # fmt: skip
    statuses = await index.workers()
    assert len(statuses) == workers, (len(statuses), workers)
    prompts = [request_tokens(i % workers, i) for i in range(32)]
    samples = []
    for n in range(iterations + 20):
        tokens = prompts[n % len(prompts)]
        start = time.perf_counter()
        hashes = chunk_hashes(tokens, ROOT, CHUNK)
        routed = await router.preview(hashes, len(tokens), statuses, n)
        elapsed = (time.perf_counter() - start) * 1000
        assert routed.lookup is not None  # a routing decision, not the load-only fallback
        assert routed.decision.predicted_cached_tokens >= SHARED_TOKENS // CHUNK * CHUNK
        if n >= 20:
            samples.append(elapsed)
    return pct(samples, 0.5), pct(samples, 0.99)


async def apply_rate(index: PrefixIndex, writers: int = 8, batches: int = 40, per_batch: int = 512) -> float:
    """Chunk events per second applied by ``writers`` workers publishing concurrently."""
    expires = SystemClock().now_ms() + FAR

    async def writer(w: int) -> None:
        info = WorkerInfo(WorkerId(f"writer-{w}"), Epoch(1), f"10.9.0.{w}:1", "f" * 32, "m")
        await index.register(info, WorkerLoad())
        rng = np.random.default_rng(w)
        for seq in range(1, batches + 1):
            ids = rng.integers(0, 2**62, size=per_batch)
            events = tuple(KVEvent.stored(int(x).to_bytes(16, "little"), Tier.GPU, expires) for x in ids)
            await index.apply(EventBatch(info.worker_id, Epoch(1), SeqNo(seq), events))

    start = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    return writers * batches * per_batch / (time.perf_counter() - start)


async def fill_million_token_workers(index: PrefixIndex, workers: int, chunks: int) -> None:
    """``workers`` workers of ``chunks`` chunks each (1M tokens), half of them shared by all (a shared
    prefix), half private, each written as one snapshot."""
    expires = SystemClock().now_ms() + FAR
    for w in range(workers):
        info = WorkerInfo(WorkerId(f"mem-{w:03d}"), Epoch(1), f"10.8.0.{w}:1", "f" * 32, "m")
        await index.register(info, WorkerLoad())
        held = [int(x).to_bytes(16, "little") for x in range(chunks // 2)]
        held += [int(x).to_bytes(16, "big") for x in range(w * chunks, w * chunks + chunks - chunks // 2)]
        holdings = tuple(Holding(h, Tier.GPU, expires) for h in held)
        await index.resync(Snapshot(info.worker_id, Epoch(1), SeqNo(0), holdings))


async def redis_bytes_per_holder(url: str, namespace: str, workers: int = 32, chunks: int = 7_813) -> float:
    """Redis memory growth per chunk-holder: ``workers`` workers of 1M tokens each, half of the
    chunks shared by all (a shared prefix), half private."""
    settings = IndexSettings(namespace=namespace, timeout_s=10.0)
    index = RedisPrefixIndex(redis_client(url, settings), settings, SystemClock())
    raw = aioredis.Redis.from_url(url)
    before = (await raw.info("memory"))["used_memory"]
    await fill_million_token_workers(index, workers, chunks)
    after = (await raw.info("memory"))["used_memory"]
    await raw.aclose()
    await index.close()
    return (after - before) / (workers * chunks)


def memory_bytes_per_holder(workers: int = 32, chunks: int = 7_813) -> float:
    """The same load in the in-process index (Python heap growth, tracemalloc)."""

    async def fill() -> MemoryPrefixIndex:
        index = MemoryPrefixIndex(IndexSettings(), SystemClock())
        await fill_million_token_workers(index, workers, chunks)
        return index

    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    index = asyncio.run(fill())
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del index
    # the chunk ids themselves are shared with the caller's snapshots: counted, as a gateway holds them too
    return used / (workers * chunks)


async def resync_longest_command_ms(url: str, namespace: str, chunks: int = 7_813) -> float:
    """The longest Redis command (SLOWLOG, µs resolution) while a 1M-token worker resyncs twice."""
    settings = IndexSettings(namespace=namespace, timeout_s=10.0)
    index = RedisPrefixIndex(redis_client(url, settings), settings, SystemClock())
    raw = aioredis.Redis.from_url(url)
    old = await raw.config_get("slowlog-log-slower-than")
    await raw.config_set("slowlog-log-slower-than", 0)
    await raw.config_set("slowlog-max-len", 100_000)
    await raw.slowlog_reset()
    expires = SystemClock().now_ms() + FAR
    info = WorkerInfo(WorkerId("resync-1m"), Epoch(1), "10.7.0.1:1", "f" * 32, "m")
    await index.register(info, WorkerLoad())
    for seq in (0, 1):  # the second replaces a full first one (the old holdings are freed too)
        held = tuple(Holding(int(x + seq).to_bytes(16, "little"), Tier.GPU, expires) for x in range(chunks))
        await index.resync(Snapshot(info.worker_id, Epoch(1), SeqNo(seq), held))
    entries = await raw.slowlog_get(100_000)
    await raw.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
    await raw.aclose()
    await index.close()
    return max(e["duration"] for e in entries) / 1000


@contextlib.contextmanager
def standalone() -> Iterator[str]:
    server = RedisServer()
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def cluster() -> Iterator[str | None]:
    from tests.support.redis_cluster import LocalRedisCluster

    with LocalRedisCluster() as procs:
        yield procs.url


@contextlib.asynccontextmanager
async def redis_backend(url: str, *, cluster_mode: bool) -> AsyncIterator[RedisPrefixIndex]:
    settings = IndexSettings(namespace=f"bench-{uuid.uuid4().hex[:8]}", timeout_s=30.0, heartbeat_ttl_s=3600)
    if cluster_mode:
        from kvgate.index.connect import open_redis

        client = await open_redis(url, timeout_s=30.0)
    else:
        client = redis_client(url, settings)
    index = RedisPrefixIndex(client, settings, SystemClock())
    await index.start()
    try:
        yield index
    finally:
        await index.close()
        flush = aioredis.Redis.from_url(url) if not cluster_mode else None
        if flush is not None:
            await flush.flushall()
            await flush.aclose()


async def scale_rows(name: str, url: str | None, sizes: list[int], iterations: int) -> list[dict]:
    rows = []
    for workers in sizes:
        print(f"  {name}: {workers} workers...", file=sys.stderr, flush=True)
        if url is None:
            index: PrefixIndex = MemoryPrefixIndex(IndexSettings(heartbeat_ttl_s=3600), SystemClock())
            await populate(index, workers)
            p50, p99 = await decisions(index, workers, iterations)
        else:
            async with redis_backend(url, cluster_mode=name == "redis_cluster") as index:
                await populate(index, workers)
                p50, p99 = await decisions(index, workers, max(20, iterations // (1 + workers // 64)))
        p50, p99 = round(p50, 3), round(p99, 3)
        rows.append({"backend": name, "workers": workers, "decision_p50_ms": p50, "decision_p99_ms": p99})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="8,64,256,1024")
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--out", default="bench/results", type=Path)
    args = parser.parse_args()
    sizes = [int(x) for x in args.workers.split(",")]
    report: dict = {
        "commit": _commit(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "command": "python bench/index_scale.py " + " ".join(sys.argv[1:]),
        "rows": [],
    }
    report["rows"] += asyncio.run(scale_rows("memory", None, sizes, args.iterations))
    with standalone() as url:
        report["rows"] += asyncio.run(scale_rows("redis", url, sizes, args.iterations))
        per_holder = asyncio.run(redis_bytes_per_holder(url, "bench-mem"))
        report["bytes_per_chunk_holder"] = round(per_holder, 1)
        longest = asyncio.run(resync_longest_command_ms(url, "bench-resync"))
        report["resync_max_command_ms"] = round(longest, 3)
    with standalone() as url:  # a Redis of its own: no dataset of the rows above being freed under it
        runs = [asyncio.run(_apply(url, IndexSettings(namespace=f"bench-apply-{i}", timeout_s=30.0)))
                for i in range(3)]  # fmt: skip
    report["event_apply_runs_per_s"] = [round(r) for r in runs]
    report["event_apply_per_s"] = round(sorted(runs)[1])  # the median of three
    report["memory_backend_bytes_per_chunk_holder"] = round(memory_bytes_per_holder(), 1)
    with cluster() as url:
        if url is not None:
            report["rows"] += asyncio.run(scale_rows("redis_cluster", url, sizes, args.iterations))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "index_scale.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "index_scale.md").write_text(markdown(report))
    print(markdown(report))


async def _apply(url: str, settings: IndexSettings) -> float:
    index = RedisPrefixIndex(redis_client(url, settings), settings, SystemClock())
    await index.start()
    try:
        return await apply_rate(index)
    finally:
        await index.close()


def markdown(report: dict) -> str:
    sizes = sorted({r["workers"] for r in report["rows"]})
    lines = [
        "# Index at cluster scale",
        "",
        f"Machine: {report['machine']}, 2 cores; commit {report['commit']}; command `{report['command']}`",
        "",
        "Routing decision = chunk hashing + index lookup + the default policy's scoring (tokenization "
        f"excluded); every worker holds a shared {SHARED_TOKENS:,}-token prefix plus "
        f"{PRIVATE_CHUNKS} private chunks; each request adds a {TAIL_TOKENS:,}-token tail. p50 / p99 in ms.",
        "",
        "| backend | " + " | ".join(f"{w} workers" for w in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    for backend in dict.fromkeys(r["backend"] for r in report["rows"]):
        rows = [r for r in report["rows"] if r["backend"] == backend]
        cells = [f"{r['decision_p50_ms']} / {r['decision_p99_ms']}" for r in rows]
        lines.append(f"| {backend} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "- Event apply into one Redis (8 workers publishing batches of 512 concurrently; median of "
        f"{report['event_apply_runs_per_s']} on a fresh server): "
        f"**{report['event_apply_per_s']:,} chunk events/s**",
        "- Redis memory per chunk-holder (32 workers x 1M tokens, half shared): "
        f"**{report['bytes_per_chunk_holder']} B**; the in-process index: "
        f"{report['memory_backend_bytes_per_chunk_holder']} B",
        "- Longest Redis command while a 1M-token worker resyncs (SLOWLOG): "
        f"**{report['resync_max_command_ms']} ms**",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
