"""Command-line flags that describe a deployment's cache layout (shared by several commands)."""

from __future__ import annotations

import argparse
import os

from kvgate.proto.kv_dtype import AUTO, KV_DTYPES
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, DEFAULT_CHUNK_SIZE, CacheLayout

SECRET_ENV = "KVGATE_HASH_SECRET"


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-id", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, help="tokens per routed chunk")
    parser.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, help="tokens per KV block")
    parser.add_argument("--kv-dtype", default=AUTO, choices=[AUTO, *KV_DTYPES],
                        help="how workers store K and V (auto: the model's --dtype; int8 / fp8 hold 2x "
                             "the tokens of bf16). Part of the cache layout: give gateways the workers' "
                             "value")  # fmt: skip


def cache_config(args: argparse.Namespace) -> CacheLayout:
    """The deployment's CacheLayout; the secret comes from $KVGATE_HASH_SECRET, never a flag
    (flags show up in process listings)."""
    secret = os.environ.get(SECRET_ENV, "").encode()
    kv_dtype = getattr(args, "kv_dtype", AUTO)
    return CacheLayout(args.model_id, secret, args.chunk_size, args.block_size, kv_dtype=kv_dtype)
