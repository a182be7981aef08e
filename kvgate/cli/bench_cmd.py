"""``kvgate bench``: the live benchmark against a running gateway."""

from __future__ import annotations

import argparse
import asyncio
import json

from kvgate.cli.api_key import add_api_key_argument, api_key, auth_headers
from kvgate.loadgen.report import summarize, table
from kvgate.loadgen.runner import run as run_workload
from kvgate.loadgen.runner import run_grpc
from kvgate.loadgen.workload import multi_turn, shared_prefix

HELP = "drive a running gateway with a prefix-sharing workload; report TTFT, tokens/s, cached fraction"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--grpc", metavar="HOST:PORT", help="drive the gateway's gRPC front instead of HTTP")
    parser.add_argument("--model", required=True)
    parser.add_argument("--workload", choices=("shared-prefix", "multi-turn"), default="shared-prefix")
    parser.add_argument("--groups", type=int, default=4, help="shared-prefix: distinct system prompts")
    parser.add_argument("--per-group", type=int, default=8, help="shared-prefix: requests per system prompt")
    parser.add_argument("--system-tokens", type=int, default=1024)
    parser.add_argument("--question-tokens", type=int, default=64)
    parser.add_argument("--chats", type=int, default=4, help="multi-turn: conversations")
    parser.add_argument("--turns", type=int, default=4, help="multi-turn: user turns per conversation")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=600.0, help="stop sending after this many seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    add_api_key_argument(parser)


def run(args: argparse.Namespace) -> int:
    if args.workload == "shared-prefix":
        requests = shared_prefix(
            args.groups, args.per_group, args.system_tokens, args.question_tokens, args.max_tokens, args.seed
        )
    else:
        requests = multi_turn(args.chats, args.turns, args.question_tokens, args.max_tokens, args.seed)
    if args.grpc:
        workload = run_grpc(args.grpc, args.model, requests, args.concurrency, args.timeout, not args.json,
                            api_key(args))  # fmt: skip
    else:
        workload = run_workload(args.url, args.model, requests, args.concurrency, args.timeout,
                                not args.json, auth_headers(args))  # fmt: skip
    outcomes, wall = asyncio.run(workload)
    summary = summarize(outcomes, wall)
    print(json.dumps(summary) if args.json else table(summary))
    return 0 if summary["ok"] else 1
