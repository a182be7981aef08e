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
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.foundation import percentiles, start_redis
from kvgate.common.clock import SystemClock
from kvgate.common.models import default_model_path
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.router import Router
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE, CacheLayout
from kvgate.proto.workers import WorkerInfo, WorkerLoad

PROMPTS = (1024, 8192, 32768)
WORKERS = 8
CACHE = CacheLayout("HuggingFaceTB/SmolLM2-135M-Instruct")


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


async def populate(index: PrefixIndex, chains: list[list], scenario: str) -> None:
    """8 live workers. ``spread``: worker i holds the first (i+1)/8 of every chain (a worst case:
    every worker stays in the walk); ``focused``: workers 0 and 1 hold every chain, as cache-aware
    routing leaves it."""
    expires = SystemClock().now_ms() + 3_600_000
    for i in range(WORKERS):
        wid = WorkerId(f"worker-{i}")
        info = WorkerInfo(wid, Epoch(1), f"127.0.0.1:{6000 + i}", CACHE.fingerprint(), CACHE.model_id)
        await index.register(info, WorkerLoad(running_seqs=i, gpu_blocks_total=1000, gpu_blocks_free=500))
        if scenario == "spread":
            held = [h for chain in chains for h in chain[: len(chain) * (i + 1) // WORKERS]]
        else:
            held = [h for chain in chains for h in chain] if i < 2 else []
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
    chains = [chunk_hashes(ids[n], root, DEFAULT_CHUNK_SIZE) for n in PROMPTS]
    results: dict = {}
    for n in PROMPTS:
        row = results.setdefault(f"{n}_tokens", {})
        row["tokenize"] = time_sync(lambda t=texts[n]: tokenizer.encode(t), max(10, iterations // 10))
        row["hash"] = time_sync(lambda i=ids[n]: chunk_hashes(i, root, DEFAULT_CHUNK_SIZE), iterations)
    for backend in ("memory", "redis"):
        for scenario in ("focused", "spread"):
            index = await make_index(backend, redis_url)
            await populate(index, chains, scenario)
            workers = await index.workers()
            router = Router(
                index, get_policy("kvgate"), get_policy("least_loaded"), CACHE.chunk_size, 2.0, SystemClock()
            )

            async def route_once(
                token_ids: np.ndarray, tokens: int, r: Router = router, w: list = workers
            ) -> None:
                hashes = chunk_hashes(token_ids, root, DEFAULT_CHUNK_SIZE)
                routed = await r.route(hashes, tokens, w, request_key=1)
                r.prefill_done(routed)

            for n in PROMPTS:
                log(f"  overhead: {backend}, {scenario}, {n} tokens")
                results[f"{n}_tokens"][f"hash_route_{backend}_{scenario}"] = await time_async(
                    lambda i=ids[n], k=n, f=route_once: f(i, k), iterations
                )
            await router.drain()
            await index.close()
    return results


async def make_index(backend: str, redis_url: str) -> PrefixIndex:
    settings = IndexSettings(namespace=f"kvgate-bench-{uuid.uuid4().hex[:8]}", timeout_s=1.0)
    if backend == "memory":
        return MemoryPrefixIndex(settings, SystemClock())
    index = RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock())
    await index.start()
    return index


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

    # scripted workers register once and never heartbeat: keep them live for the whole run
    index = MemoryPrefixIndex(IndexSettings(heartbeat_ttl_s=3600), SystemClock())
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
    variants = [(b, sc) for b in ("memory", "redis") for sc in ("focused", "spread")]
    cols = [("tokenize", "tokenize"), ("hash", "hash")]
    cols += [(f"hash_route_{b}_{sc}", f"hash+route, {b}, {sc}") for b, sc in variants]
    lines = [
        "# Gateway overhead benchmark",
        "",
        f"Machine: {report['machine']}; commit {report['commit']}; command `python bench/gateway.py`",
        "",
        "Per request, p50 / p99 in µs. *hash+route* = chunk hashing + index lookup + policy decision "
        "(the pending entry is written off the request path). 8 live workers; *focused*: 2 of them "
        "hold the whole prompt (what cache-aware routing leaves), *spread*: worker i holds the first "
        "(i+1)/8 of it (a worst case for the walk). Tokenization is reported separately.",
        "",
        "| prompt | " + " | ".join(c[1] for c in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for prompt, row in report["overhead"].items():
        cells = [f"{row[k]['p50_us']:.0f} / {row[k]['p99_us']:.0f}" for k, _ in cols]
        lines.append(f"| {prompt.replace('_', ' ')} | " + " | ".join(cells) + " |")
    t = report["throughput"]
    lines += [
        "",
        "Throughput through the HTTP API (chat, 2 output tokens, 2 scripted workers that answer at once, "
        f"load from a separate process): **{t['requests_per_s']:.0f} requests/s** ({t['ok']} ok, "
        f"{t['errors']} errors in {t['seconds']:.0f} s, {t['concurrency']} clients).",
    ]
    return "\n".join(lines) + "\n"


def _commit() -> str:
    """The checkout's commit, with ``+dirty`` when it has uncommitted changes (results name it)."""
    def git(*args: str) -> str:
        root = Path(__file__).resolve().parents[1]
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


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
            "commit": _commit(),
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
