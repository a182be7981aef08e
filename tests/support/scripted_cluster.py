"""Scripted workers as a process of their own, registered in a real Redis index and heartbeating:
the stand-in for a GPU cluster when the gateway itself is measured (overload, timing audits).

    python -m tests.support.scripted_cluster --redis-url URL --workers 2 --max-in-flight 4 \\
        --token-delay 0.02 [--prefill-delay-per-token 0.0005]

Prints ``ready`` once every worker is registered; runs until SIGINT / SIGTERM. The cache layout is
the deployment's (``--model-id``, ``$KVGATE_HASH_SECRET``), as ``kvgate gateway`` computes it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from kvgate.cli.cache_args import add_cache_arguments, cache_config
from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, IndexUnavailableError, RedisPrefixIndex
from kvgate.index.open_shared import open_shared_index
from kvgate.proto.ids import WorkerId
from tests.support.scripted_worker import ScriptedWorker


async def main(args: argparse.Namespace) -> None:
    settings = IndexSettings(timeout_s=1.0)
    index = await open_shared_index(args.redis_url, settings, SystemClock())
    config = cache_config(args)
    workers = []
    for i in range(args.workers):
        worker = ScriptedWorker(WorkerId(f"scripted-{i}"), config, index, token_delay_s=args.token_delay,
                                max_in_flight=args.max_in_flight,
                                prefill_delay_per_token_s=args.prefill_delay_per_token)  # fmt: skip
        workers.append(await worker.start())
    print("ready", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    while not stop.is_set():
        for worker in workers:
            with contextlib.suppress(IndexUnavailableError):  # Redis down: retry at the next beat
                await _heartbeat(index, worker)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
    for worker in workers:
        await index.deregister(worker.worker_id, worker.epoch)
        await worker.stop()
    await index.close()


async def _heartbeat(index: RedisPrefixIndex, worker: ScriptedWorker) -> None:
    """Heartbeats; when the index forgot the worker (Redis restarted empty) or missed a batch,
    registers again and republishes everything it holds, as a real worker's publisher does."""
    if await index.heartbeat(worker.worker_id, worker.epoch, worker.load()) and not worker.needs_resync:
        return
    await index.register(worker.info, worker.load())
    worker.needs_resync = not (await index.resync(worker.snapshot())).ok


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-in-flight", type=int, default=4)
    parser.add_argument("--token-delay", type=float, default=0.02)
    parser.add_argument("--prefill-delay-per-token", type=float, default=0.0)
    add_cache_arguments(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
