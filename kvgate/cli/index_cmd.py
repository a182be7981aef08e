"""``kvgate index``: what a Redis prefix index currently knows about the workers."""

from __future__ import annotations

import argparse
import asyncio

from kvgate.cli.redis_args import add_redis_argument
from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, IndexUnavailableError, RedisPrefixIndex
from kvgate.index.connect import open_redis
from kvgate.index.redis_url import RedisUrlError

HELP = "list the live workers registered in a Redis prefix index"
URL_HELP = (
    "redis:// or rediss:// (one server, or any node of a Redis Cluster), or redis+sentinel://HOST:PORT/NAME"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_redis_argument(parser, required=True, help_=URL_HELP)
    parser.add_argument("--namespace", default=IndexSettings().namespace)
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for Redis")


async def _list(args: argparse.Namespace) -> int:
    settings = IndexSettings(namespace=args.namespace, timeout_s=args.timeout)
    try:
        client = await open_redis(args.redis_url, timeout_s=args.timeout)
    except (IndexUnavailableError, RedisUrlError) as exc:
        print(f"kvgate index: {exc}")
        return 1
    index = RedisPrefixIndex(client, settings, SystemClock(), url=args.redis_url)
    try:
        statuses = await index.workers()
    except IndexUnavailableError as exc:
        print(f"kvgate index: {exc}")
        return 1
    finally:
        await index.close()
    print(
        f"{'worker':<20}{'epoch':>6}  {'address':<22}{'kv used':>8}{'running':>8}{'waiting tok':>12}  metrics"
    )
    for s in statuses:
        load = s.load
        print(
            f"{s.info.worker_id:<20}{s.info.epoch:>6}  {s.info.address:<22}{load.kv_usage:>8.0%}"
            f"{load.running_seqs:>8}{load.waiting_prefill_tokens:>12}  {s.info.metrics_address or '-'}"
        )
    print(f"{len(statuses)} live worker(s)")
    return 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_list(args))
