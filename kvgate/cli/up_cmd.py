"""``kvgate up``: a Ray cluster (local or joined), worker actors and a gateway, in one command."""

from __future__ import annotations

import argparse

from kvgate.cli import cluster_args
from kvgate.cli.redis_args import add_redis_argument

HELP = "serve a model: Ray, worker actors and the gateway in one command (Ctrl-C stops all)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cluster_args.add_model_arguments(parser)
    cluster_args.add_worker_arguments(parser)
    cluster_args.add_gateway_arguments(parser)
    cluster_args.add_tls_arguments(parser)
    add_redis_argument(parser, required=False)


def run(args: argparse.Namespace) -> int:
    from kvgate.cluster.stack import run_up  # Ray and torch load only when the command runs

    local = args.ray_address is None and args.redis_url is None  # else other processes need the secret
    return run_up(cluster_args.settings_from(args, local=local))
