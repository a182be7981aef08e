"""``kvgate fingerprint``: the config fingerprint gateways and workers must share."""

from __future__ import annotations

import argparse

from kvgate.cli.cache_args import SECRET_ENV, add_cache_arguments, cache_config

HELP = f"print the cache-config fingerprint (secret from ${SECRET_ENV})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cache_arguments(parser)


def run(args: argparse.Namespace) -> int:
    print(cache_config(args).fingerprint())
    return 0
