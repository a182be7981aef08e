"""Gateway overhead: what kvgate adds per request before the worker starts, and the request rate one
gateway process sustains.

    python bench/gateway.py [--redis-url URL] [--out bench/results] [--iterations 300] [--parts ...]

Part 1 (``overhead``), per request, for 1k / 8k / 32k-token prompts, with the memory index and with
real Redis: tokenization (reported separately), chunk hashing, and the routing step (index lookup +
policy + pending entry), p50 / p99. Part 2 (``throughput``): requests/s through the full HTTP path
(FastAPI, tokenization, routing, gRPC streaming) against scripted workers that answer at once, driven
by a separate load process. Part 3 (``chat_tokenize``): a chat's tokenization through the gateway's
prompt encoder, cold (empty cache of prompt pieces) and with its system prompt seen before (a new user
message each time). Part 4 (``shared_prefix``): requests/s as in part 2 on 15k-token chats sharing
their system prompt, with the gateway's cache of prompt pieces and without it. Without --redis-url a
temporary redis-server is started (part 1 only). ``--parts`` runs some parts and keeps the others'
figures from the existing results, each part naming the commit it ran at.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import platform
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.foundation import percentiles, start_redis
from bench.machine import git_commit
from kvgate.common.clock import SystemClock
from kvgate.common.models import default_model_path
from kvgate.common.tokenizer import (
    DEFAULT_CAPACITY_BYTES,
    SegmentCache,
    SegmentedEncoder,
    Tokenizer,
    load_tokenizer,
)
from kvgate.gateway.core.prompts import PromptEncoder
from kvgate.gateway.core.request import ChatInput
from kvgate.gateway.routing import get_policy
from kvgate.gateway.routing.router import Router
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.index import IndexSettings, MemoryPrefixIndex, PrefixIndex, RedisPrefixIndex, redis_client
from kvgate.proto.events import EventBatch, KVEvent
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.ids import Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.layout import DEFAULT_CHUNK_SIZE, CacheLayout
from kvgate.proto.workers import WorkerInfo, WorkerLoad

PROMPTS = (1024, 8192, 32768)
SHARED_PREFIX_TOKENS = 15_000
PARTS = ("overhead", "throughput", "chat_tokenize", "shared_prefix")
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


def _load(
    url: str, seconds: float, concurrency: int, system: str | None, queue: multiprocessing.Queue
) -> None:
    """Closed-loop chat requests for ``seconds``; with ``system``, each chat is that system prompt and
    a user message of its own (so only the system prompt is shared)."""
    import httpx

    numbers = itertools.count()

    def body() -> dict:
        if system is None:
            messages = [{"role": "user", "content": "hi there"}]
        else:
            question = f"Question {next(numbers)}: which worker holds this prefix?"
            messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        return {"model": "smollm2", "messages": messages, "max_tokens": 2}

    async def worker(client: httpx.AsyncClient, deadline: float, counts: list[int], errors: dict) -> None:
        while time.monotonic() < deadline:
            reply = await client.post("/v1/chat/completions", json=body())
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


async def throughput(
    seconds: float, concurrency: int, system: str | None = None, settings: GatewaySettings | None = None
) -> dict:
    from kvgate.gateway.compose import build_gateway
    from tests.support.http_server import serve
    from tests.support.scripted_worker import ScriptedWorker

    # scripted workers register once and never heartbeat: keep them live for the whole run
    index = MemoryPrefixIndex(IndexSettings(heartbeat_ttl_s=3600), SystemClock())
    workers = [await ScriptedWorker(WorkerId(f"w{i}"), CACHE, index).start() for i in range(2)]
    settings = settings or GatewaySettings("smollm2", CACHE)
    gateway = build_gateway(settings, index, load_tokenizer(default_model_path()))
    async with serve(gateway.app) as url:
        log(f"  throughput: {concurrency} concurrent clients for {seconds:.0f} s")
        spawn = multiprocessing.get_context("spawn")  # never fork a process that runs gRPC
        queue = spawn.Queue()
        proc = spawn.Process(target=_load, args=(url, seconds, concurrency, system, queue))
        proc.start()
        result = await asyncio.to_thread(queue.get)
        await asyncio.to_thread(proc.join)
    for worker in workers:
        await worker.stop()
    result["requests_per_s"] = result["ok"] / result["seconds"]
    return result | {"concurrency": concurrency}


def _chat(system: str, number: int) -> ChatInput:
    question = f"Question {number}: which worker holds chunk {number}?"
    return ChatInput([{"role": "system", "content": system}, {"role": "user", "content": question}])


def _prompt_encoder(tokenizer: Tokenizer) -> PromptEncoder:
    """The gateway's prompt encoder with an empty cache of the default size."""
    return PromptEncoder(tokenizer, SegmentedEncoder(tokenizer, SegmentCache()), 64, 1 << 20)


async def chat_tokenize(iterations: int) -> dict:
    """Per chat (a system prompt of about n tokens and a short user message, rendered by the chat
    template and encoded by the gateway's prompt encoder in a worker thread), p50 / p99: ``cold``, an
    empty cache; ``warm``, the system prompt seen before, a new user message each time; ``one_call``,
    the rendered text in one ``tokenizers`` call (the gateway's path before the cache)."""
    tokenizer = load_tokenizer(default_model_path())
    results: dict = {}
    for n in sorted((*PROMPTS, SHARED_PREFIX_TOKENS)):
        log(f"  chat tokenization: {n} tokens")
        system = text_of(tokenizer, n)
        cold = []
        for i in range(max(10, iterations // 10)):
            encoder = _prompt_encoder(tokenizer)
            start = time.perf_counter_ns()
            await encoder.encode(_chat(system, i))
            cold.append(time.perf_counter_ns() - start)
        warm = await _seen_system_prompt(tokenizer, system, iterations)
        text = tokenizer.apply_chat_template(_chat(system, 0).messages)
        one_call = time_sync(lambda t=text: tokenizer.backend.encode(t, add_special_tokens=False), len(cold))
        results[f"{n}_tokens"] = {"cold": percentiles(cold), "warm": warm, "one_call": one_call}
    return results


async def _seen_system_prompt(tokenizer: Tokenizer, system: str, iterations: int) -> dict[str, float]:
    """Chats with ``system`` after one was encoded, each with a new user message."""
    encoder, numbers = _prompt_encoder(tokenizer), itertools.count(1)
    await encoder.encode(_chat(system, 0))
    return await time_async(lambda: encoder.encode(_chat(system, next(numbers))), iterations)


async def shared_prefix(seconds: float, concurrency: int) -> dict:
    """Requests/s on chats of a ~15k-token system prompt shared by all and a user message of their own,
    with the gateway's cache of prompt pieces (default size) and without it."""
    system = text_of(load_tokenizer(default_model_path()), SHARED_PREFIX_TOKENS)
    limits = Limits(context_window=32768)
    results = {}
    for label, cache_bytes in (("cached", DEFAULT_CAPACITY_BYTES), ("uncached", 0)):
        log(f"  shared prefix, {label}")
        settings = GatewaySettings("smollm2", CACHE, limits=limits, tokenizer_cache_bytes=cache_bytes)
        results[label] = await throughput(seconds, concurrency, system, settings)
    return results


def _cell(row: dict) -> str:
    return f"{row['p50_us']:.0f} / {row['p99_us']:.0f}"


def _run_line(run: dict) -> str:
    commit = run["commit"].replace("+dirty", " with uncommitted changes in the working tree")
    return f"Machine: {run['machine']}; commit {commit}; command `{run['command']}`"


def markdown(report: dict) -> str:
    lines = [
        "# Gateway overhead benchmark",
        "",
        "Each section names the machine, commit and command it was measured with.",
    ]
    for part in PARTS:
        if part in report:
            lines += ["", _run_line(report["runs"][part]), "", *_SECTIONS[part](report[part])]
    return "\n".join(lines) + "\n"


def _overhead_md(overhead: dict) -> list[str]:
    variants = [(b, sc) for b in ("memory", "redis") for sc in ("focused", "spread")]
    cols = [("tokenize", "tokenize"), ("hash", "hash")]
    cols += [(f"hash_route_{b}_{sc}", f"hash+route, {b}, {sc}") for b, sc in variants]
    lines = [
        "Per request, p50 / p99 in µs. *hash+route* = chunk hashing + index lookup + policy decision "
        "(the pending entry is written off the request path). 8 live workers; *focused*: 2 of them "
        "hold the whole prompt (what cache-aware routing leaves), *spread*: worker i holds the first "
        "(i+1)/8 of it (a worst case for the walk). Tokenization is reported separately.",
        "",
        "| prompt | " + " | ".join(c[1] for c in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for prompt, row in overhead.items():
        lines.append(f"| {prompt.replace('_', ' ')} | " + " | ".join(_cell(row[k]) for k, _ in cols) + " |")
    return lines


def _throughput_md(t: dict) -> list[str]:
    return [
        "Throughput through the HTTP API (chat, 2 output tokens, 2 scripted workers that answer at once, "
        f"load from a separate process): **{t['requests_per_s']:.0f} requests/s** ({t['ok']} ok, "
        f"{t['errors']} errors in {t['seconds']:.0f} s, {t['concurrency']} clients)."
    ]


def _chat_tokenize_md(rows: dict) -> list[str]:
    lines = [
        "Chat tokenization, p50 / p99 in µs: a system prompt of n tokens and a short user message, "
        "rendered by the chat template and encoded by the gateway's prompt encoder in a worker thread. "
        "*cold*: an empty cache of prompt pieces; *system prompt seen*: the same system prompt encoded "
        "before, a new user message each time; *one call*: the rendered text in one `tokenizers` call "
        "(the gateway's path before the cache, offsets computed; no thread hop). Same token ids in "
        "every column (tests/common/tokenizer/test_segmented_encoder.py).",
        "",
        "| prompt | cold | system prompt seen | seen / cold (p50) | one call |",
        "|---|---:|---:|---:|---:|",
    ]
    for prompt, row in rows.items():
        ratio = row["warm"]["p50_us"] / row["cold"]["p50_us"]
        cells = [_cell(row["cold"]), _cell(row["warm"]), f"{ratio:.1%}", _cell(row["one_call"])]
        lines.append(f"| {prompt.replace('_', ' ')} | " + " | ".join(cells) + " |")
    return lines


def _shared_prefix_md(runs: dict) -> list[str]:
    cached, uncached = runs["cached"], runs["uncached"]
    return [
        f"Throughput on {SHARED_PREFIX_TOKENS:,}-token chats sharing their system prompt (each with a user "
        "message of its own; otherwise as above): "
        f"**{cached['requests_per_s']:.0f} requests/s** with the cache of prompt pieces "
        f"({cached['ok']} ok, {cached['errors']} errors in {cached['seconds']:.0f} s, "
        f"{cached['concurrency']} clients), **{uncached['requests_per_s']:.0f} requests/s** without it "
        f"(`tokenizer_cache_bytes=0`; {uncached['ok']} ok, {uncached['errors']} errors).",
    ]


_SECTIONS = {
    "overhead": _overhead_md,
    "throughput": _throughput_md,
    "chat_tokenize": _chat_tokenize_md,
    "shared_prefix": _shared_prefix_md,
}


def _commit() -> str:
    """The checkout's short commit, ``+dirty`` when its code has uncommitted changes (results name it)."""
    return git_commit(short=True)


def _previous(path: Path) -> dict:
    """The results already at ``path`` (their parts are kept unless run again), each part with the run
    it came from; results written before parts had runs of their own share their one run."""
    if not path.is_file():
        return {"runs": {}}
    report = json.loads(path.read_text())
    if "runs" not in report:
        run = {
            "machine": report.pop("machine"),
            "commit": report.pop("commit"),
            "command": "python bench/gateway.py",
        }
        report["runs"] = {part: run for part in PARTS if part in report}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url")
    parser.add_argument("--out", default="bench/results", type=Path)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}: choose among {', '.join(PARTS)}")
    report = _previous(args.out / "gateway.json")
    run = {
        "machine": f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores",
        "commit": _commit(),
        "command": " ".join(["python bench/gateway.py", *sys.argv[1:]]),
    }
    if "overhead" in parts:
        proc, url = (None, args.redis_url) if args.redis_url else start_redis()
        try:
            report["overhead"] = asyncio.run(overhead(url, args.iterations))
        finally:
            if proc is not None:
                proc.kill()
    if "throughput" in parts:
        report["throughput"] = asyncio.run(throughput(args.seconds, args.concurrency))
    if "chat_tokenize" in parts:
        report["chat_tokenize"] = asyncio.run(chat_tokenize(args.iterations))
    if "shared_prefix" in parts:
        report["shared_prefix"] = asyncio.run(shared_prefix(args.seconds, args.concurrency))
    report["runs"] |= {part: run for part in parts}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gateway.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "gateway.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
