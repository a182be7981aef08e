"""Gateway overhead: what kvgate adds per request before the worker starts, and the request rate one
gateway process sustains.

    python bench/gateway.py [--redis-url URL] [--out bench/results] [--iterations 300]

Part 1, per request, for 1k / 8k / 32k-token prompts, with the memory index and with real Redis:
tokenization (reported separately), chunk hashing, and the routing step (index lookup + policy +
pending entry), p50 / p99. Part 2: requests/s through the full HTTP path (FastAPI, tokenization,
routing, gRPC streaming) against scripted workers that answer at once, driven by a separate load
process. Without --redis-url a temporary redis-server is started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.foundation import percentiles, start_redis
from kvgate.clock import SystemClock
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.router import Router
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client
from kvgate.models import default_model_path
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.fingerprint import CacheConfig
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.tokenizer import load_tokenizer

PROMPTS = (1024, 8192, 32768)
WORKERS = 8
CACHE = CacheConfig("HuggingFaceTB/SmolLM2-135M-Instruct")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def text_of(tokenizer, tokens: int) -> str:
    """A prose text that tokenizes to about ``tokens`` tokens."""
    words = [
        "the",
        "gateway",
        "routes",
        "each",
        "request",
        "to",
        "the",
        "worker",
        "that",
        "holds",
        "its",
        "prefix",
        "blocks",
    ]
    text = " ".join(words[i % len(words)] + str(i % 97) for i in range(tokens))
    ids = tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.decode(ids[:tokens])


async def populate(index: PrefixIndex, chains: list[list]) -> None:
    expires = SystemClock().now_ms() + 3_600_000
    for i in range(WORKERS):
        wid = WorkerId(f"worker-{i}")
        info = WorkerInfo(wid, Epoch(1), f"127.0.0.1:{6000 + i}", CACHE.fingerprint(), CACHE.model_id)
        await index.register(info, WorkerLoad(running_seqs=i, gpu_blocks_total=1000, gpu_blocks_free=500))
        held = [h for chain in chains for h in chain[: len(chain) * (i + 1) // WORKERS]]
        events = tuple(KVEvent.stored(h, Tier.GPU, expires) for h in held)
        await index.apply(EventBatch(wid, Epoch(1), SeqNo(1), events))


async def time_async(call, iterations: int) -> dict[str, float]:
    samples = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - start)
    return percentiles(samples)


def time_sync(call, iterations: int) -> dict[str, float]:
    samples = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - start)
    return percentiles(samples)


async def overhead(redis_url: str, iterations: int) -> dict:
    tokenizer = load_tokenizer(default_model_path())
    root = CACHE.root().digest()
    texts = {n: text_of(tokenizer, n) for n in PROMPTS}
    ids = {n: tokenizer.encode(texts[n], add_special_tokens=False) for n in PROMPTS}
    chains = [chunk_hashes(ids[n], root) for n in PROMPTS]
    settings = IndexSettings(namespace=f"kvgate-bench-{uuid.uuid4().hex[:8]}", timeout_s=1.0)
    backends: dict[str, PrefixIndex] = {
        "memory": MemoryPrefixIndex(settings, SystemClock()),
        "redis": RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock()),
    }
    await backends["redis"].start()
    results: dict = {}
    for name, index in backends.items():
        await populate(index, chains)
        workers = await index.workers()
        router = Router(
            index, get_policy("kvgate"), get_policy("least_loaded"), CACHE.chunk_size, 2.0, SystemClock()
        )
        for n in PROMPTS:
            log(f"  overhead: {name}, {n} tokens")
            route = router.route
            hashes = chunk_hashes(ids[n], root)
            row = results.setdefault(f"{n}_tokens", {})
            row["tokenize"] = time_sync(lambda t=texts[n]: tokenizer.encode(t), max(10, iterations // 10))
            row["hash"] = time_sync(lambda i=ids[n]: chunk_hashes(i, root), iterations)
            row[f"route_{name}"] = await time_async(
                lambda h=hashes, k=n, r=route, w=workers: r(h, k, w, request_key=1), iterations
            )
            row[f"hash_and_route_{name}"] = await time_async(
                lambda i=ids[n], k=n, r=route, w=workers: r(chunk_hashes(i, root), k, w, request_key=1),
                iterations,
            )
    await backends["redis"].close()
    return results


def _load(url: str, seconds: float, concurrency: int, queue: multiprocessing.Queue) -> None:
    import httpx

    async def worker(client: httpx.AsyncClient, deadline: float, counts: list[int], errors: dict) -> None:
        body = {"model": "smollm2", "messages": [{"role": "user", "content": "hi there"}], "max_tokens": 2}
        while time.monotonic() < deadline:
            reply = await client.post("/v1/chat/completions", json=body)
            counts[0 if reply.status_code == 200 else 1] += 1
            if reply.status_code != 200:
                errors.setdefault(reply.status_code, reply.text[:300])

    async def main() -> None:
        counts = [0, 0]
        errors: dict[int, str] = {}
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
            deadline = time.monotonic() + seconds
            await asyncio.gather(*(worker(client, deadline, counts, errors) for _ in range(concurrency)))
        queue.put({"ok": counts[0], "errors": counts[1], "seconds": seconds, "error_samples": errors})

    asyncio.run(main())


async def throughput(seconds: float, concurrency: int) -> dict:
    from kvgate.gateway.compose import build_gateway
    from kvgate.gateway.settings import GatewaySettings
    from tests.support.http_server import serve
    from tests.support.scripted_worker import ScriptedWorker

    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index).start() for i in range(2)]
    gateway = build_gateway(GatewaySettings("smollm2", CACHE), index, load_tokenizer(default_model_path()))
    async with serve(gateway.app) as url:
        log(f"  throughput: {concurrency} concurrent clients for {seconds:.0f} s")
        spawn = multiprocessing.get_context("spawn")  # never fork a process that runs gRPC
        queue = spawn.Queue()
        proc = spawn.Process(target=_load, args=(url, seconds, concurrency, queue))
        proc.start()
        result = await asyncio.to_thread(queue.get)
        await asyncio.to_thread(proc.join)
    for worker in workers:
        await worker.stop()
    result["requests_per_s"] = result["ok"] / result["seconds"]
    return result


def markdown(report: dict) -> str:
    lines = [
        "# Gateway overhead benchmark",
        "",
        f"Machine: {report['machine']}",
        "",
        "Per request, p50 / p99 in µs. *route* = index lookup + policy decision + pending entry "
        "(8 live workers holding parts of the prompt); tokenization is reported separately.",
        "",
        "| prompt | tokenize | hash | route, memory | route, Redis | hash+route, memory "
        "| hash+route, Redis |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    keys = (
        "tokenize",
        "hash",
        "route_memory",
        "route_redis",
        "hash_and_route_memory",
        "hash_and_route_redis",
    )
    for prompt, row in report["overhead"].items():
        cells = [f"{row[k]['p50_us']:.0f} / {row[k]['p99_us']:.0f}" for k in keys]
        lines.append(f"| {prompt.replace('_', ' ')} | " + " | ".join(cells) + " |")
    t = report["throughput"]
    lines += [
        "",
        f"Throughput through the HTTP API (chat, 2 output tokens, scripted instant workers, "
        f"load from a separate process): **{t['requests_per_s']:.0f} requests/s** "
        f"({t['ok']} ok, {t['errors']} errors in {t['seconds']:.0f} s, {t['concurrency']} clients).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url")
    parser.add_argument("--out", default="bench/results", type=Path)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    proc, url = (None, args.redis_url) if args.redis_url else start_redis()
    try:
        report = {
            "machine": f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores",
            "overhead": asyncio.run(overhead(url, args.iterations)),
        }
    finally:
        if proc is not None:
            proc.kill()
    report["throughput"] = asyncio.run(throughput(args.seconds, args.concurrency)) | {
        "concurrency": args.concurrency
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gateway.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "gateway.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
