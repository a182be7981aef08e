"""``kvgate workers``: place worker actors on an existing Ray cluster; they publish to Redis."""

from __future__ import annotations

import argparse

from kvgate.cli import cluster_args
from kvgate.cli.redis_args import add_redis_argument

HELP = "place worker actors across a Ray cluster (publishing to Redis) and keep them up until Ctrl-C"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cluster_args.add_model_arguments(parser)
    cluster_args.add_worker_arguments(parser, fixed_ports=True)
    cluster_args.add_tls_arguments(parser)
    add_redis_argument(parser, required=True)


def run(args: argparse.Namespace) -> int:
    from kvgate.cluster.stack import run_workers  # Ray and torch load only when the command runs

    return run_workers(cluster_args.settings_from(args))
