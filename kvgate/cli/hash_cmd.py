"""``kvgate hash``: the chunk hashes of a token-id sequence, for debugging routing by hand."""

from __future__ import annotations

import argparse
import sys

from kvgate.cli.cache_args import add_cache_arguments, cache_config
from kvgate.proto.hashing import chunk_hashes

HELP = "print the chained chunk hashes of token ids read from stdin (whitespace or comma separated)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cache_arguments(parser)
    parser.add_argument("--adapter-id", default="")
    parser.add_argument("--cache-salt", default="")


def run(args: argparse.Namespace) -> int:
    text = sys.stdin.read().replace(",", " ")
    try:
        ids = [int(tok) for tok in text.split()]
    except ValueError as exc:
        raise ValueError(f"token ids must be integers: {exc}") from exc
    config = cache_config(args)
    root = config.root(args.adapter_id, args.cache_salt).digest()
    for i, digest in enumerate(chunk_hashes(ids, root, config.chunk_size)):
        print(f"{i}\t{digest.hex()}")
    return 0
