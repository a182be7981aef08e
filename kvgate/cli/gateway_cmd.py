"""``kvgate gateway``: a gateway replica that finds the workers through the Redis index."""

from __future__ import annotations

import argparse

from kvgate.cli import cluster_args
from kvgate.cli.redis_args import add_redis_argument

HELP = "serve a gateway replica over a Redis prefix index (HTTP and gRPC)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cluster_args.add_model_arguments(parser)
    cluster_args.add_gateway_arguments(parser)
    cluster_args.add_tls_arguments(parser)
    add_redis_argument(parser, required=True)


def run(args: argparse.Namespace) -> int:
    from kvgate.cluster.stack import run_gateway

    return run_gateway(cluster_args.settings_from(args))
