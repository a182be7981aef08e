"""``--redis-url`` of the commands that use a Redis index, by default ``$KVGATE_REDIS_URL``: a URL
that holds a password belongs in the environment, not on a command line (which every user of the
machine can list)."""

from __future__ import annotations

import argparse
import os

REDIS_URL_ENV = "KVGATE_REDIS_URL"


def add_redis_argument(
    parser: argparse.ArgumentParser, required: bool, help_: str = "the shared prefix index"
) -> None:
    env = os.environ.get(REDIS_URL_ENV) or None
    fallback = "" if required else "; else in-process, embedded"
    parser.add_argument("--redis-url", default=env, required=required and env is None,
                        help=f"{help_} (default: ${REDIS_URL_ENV}{fallback})")  # fmt: skip
