"""Foundation benchmark: chunk hashing and prefix-index lookup latency, side by side.

    python bench/foundation.py [--redis-url URL] [--out bench/results]

Without --redis-url a temporary redis-server is started on a free loopback port. Writes
``foundation.json`` and ``foundation.md`` to --out and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import command_line, git_commit
from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.hashing import HashRoot, chunk_hashes
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE
from kvgate.proto.workers import WorkerInfo, WorkerLoad

PROMPTS = (1024, 8192, 32768)
WORKERS = 8
ROOT = HashRoot(b"bench", "HuggingFaceTB/SmolLM2-135M-Instruct").digest()


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    """p50 / p99 / mean in microseconds."""
    ordered = sorted(samples_ns)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000  # noqa: E731
    return {"p50_us": pick(0.50), "p99_us": pick(0.99), "mean_us": statistics.fmean(ordered) / 1000}


def bench_hashing(iterations: int) -> dict[str, dict[str, float]]:
    ids = np.random.default_rng(0).integers(0, 49152, size=32768).astype(np.uint32)
    as_list = ids.tolist()
    out = {}
    for name, data in (("numpy_uint32", ids), ("python_list", as_list)):
        samples = []
        for _ in range(iterations):
            start = time.perf_counter_ns()
            chunk_hashes(data, ROOT, DEFAULT_CHUNK_SIZE)
            samples.append(time.perf_counter_ns() - start)
        out[name] = percentiles(samples)
    return out


async def populate(index: PrefixIndex, chains: dict[int, list[ChunkHash]]) -> None:
    """8 live workers; worker i holds the first (i+1)/8 of every chain (GPU, last half CPU)."""
    expires = SystemClock().now_ms() + 3_600_000
    for i in range(WORKERS):
        wid = WorkerId(f"worker-{i}")
        await index.register(WorkerInfo(wid, Epoch(1), f"127.0.0.1:{6000 + i}", "f" * 32, "m"), WorkerLoad())
        events = []
        for hashes in chains.values():
            held = hashes[: len(hashes) * (i + 1) // WORKERS]
            half = len(held) // 2
            tiers = [Tier.GPU if j < half else Tier.CPU for j in range(len(held))]
            events += [KVEvent.stored(h, t, expires) for h, t in zip(held, tiers, strict=True)]
        await index.apply(EventBatch(wid, Epoch(1), SeqNo(1), tuple(events)))


async def time_calls(call: Callable[[], Awaitable[object]], iterations: int) -> dict[str, float]:
    for _ in range(min(50, iterations)):
        await call()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - start)
    return percentiles(samples)


async def bench_index(redis_url: str, iterations: int) -> dict[str, dict[str, dict[str, float]]]:
    chains = {n: chunk_hashes(np.arange(n, dtype=np.uint32) + n, ROOT, DEFAULT_CHUNK_SIZE) for n in PROMPTS}
    namespace = f"kvgate-bench-{uuid.uuid4().hex[:8]}"
    settings = IndexSettings(namespace=namespace, timeout_s=5.0)
    memory = MemoryPrefixIndex(settings, SystemClock())
    redis_index = RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock())
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    await redis_index.start()
    await populate(memory, chains)
    await populate(redis_index, chains)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for tokens, hashes in chains.items():
        print(f"  index lookups, {tokens} tokens ({len(hashes)} chunks)...", file=sys.stderr, flush=True)
        results[f"{tokens}_tokens"] = {
            "memory": await time_calls(lambda h=hashes: memory.lookup(h), iterations),
            "redis_one_round_trip": await time_calls(lambda h=hashes: redis_index.lookup(h), iterations),
        }
    await cleanup(raw, namespace)
    await redis_index.close()
    return results


async def cleanup(client: aioredis.Redis, namespace: str) -> None:
    keys = [k async for k in client.scan_iter(match=f"{{{namespace}:*", count=1000)]
    for i in range(0, len(keys), 1000):
        await client.delete(*keys[i : i + 1000])
    await client.aclose()


def start_redis() -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found: install it or pass --redis-url")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tempfile.mkdtemp()],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.3)
    return proc, f"redis://127.0.0.1:{port}/0"


def markdown(report: dict) -> str:
    lines = [
        "# Foundation benchmark",
        "",
        f"Commit {report['commit']}; command `{report['command']}`. Machine: {report['machine']}",
        "",
        "## Chunk hashing, 32,768-token prompt (256 chunks)",
        "",
        "| input | p50 µs | p99 µs |",
        "|---|---:|---:|",
    ]
    for name, p in report["hashing_32k"].items():
        lines.append(f"| {name} | {p['p50_us']:.0f} | {p['p99_us']:.0f} |")
    lines += [
        "",
        f"## Index lookup, {WORKERS} live workers (p50 / p99 µs)",
        "",
        "| prompt | memory | Redis (one pipelined round trip) |",
        "|---|---:|---:|",
    ]
    for prompt, r in report["index_lookup"].items():
        cells = [f"{r[k]['p50_us']:.0f} / {r[k]['p99_us']:.0f}" for k in ("memory", "redis_one_round_trip")]
        lines.append(f"| {prompt.replace('_', ' ')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", help="an existing Redis; default: start a temporary one")
    parser.add_argument("--out", default="bench/results", type=Path)
    parser.add_argument("--iterations", type=int, default=1000)
    args = parser.parse_args()
    proc, url = (None, args.redis_url) if args.redis_url else start_redis()
    try:
        print("hashing...", file=sys.stderr, flush=True)
        hashing = bench_hashing(args.iterations)
        index = asyncio.run(bench_index(url, args.iterations))
    finally:
        if proc is not None:
            proc.kill()
    report = {
        "commit": git_commit(short=True),
        "command": command_line(),
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}, "
        f"{__import__('os').cpu_count()} cores",
        "hashing_32k": hashing,
        "index_lookup": index,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "foundation.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "foundation.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
