"""``kvgate explain``: where a running gateway would route a request, and why (its HTTP /v1/route, or
with ``--grpc`` its gRPC ``Route`` through :mod:`kvgate.client`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from kvgate.cli.api_key import add_api_key_argument, api_key, auth_headers

HELP = "show the routing decision a gateway would make for a prompt or chat (dry run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gateway's HTTP address")
    parser.add_argument("--grpc", metavar="HOST:PORT", help="ask the gateway's gRPC front instead of HTTP")
    parser.add_argument("--model", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="a completion prompt ('-' reads stdin)")
    source.add_argument("--messages", type=Path, help="a JSON file with an OpenAI messages list")
    parser.add_argument("--prompt-cache-key")
    parser.add_argument("--json", action="store_true", help="print the raw answer")
    add_api_key_argument(parser)


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"model": args.model}
    if args.messages is not None:
        body["messages"] = json.loads(args.messages.read_text())
    else:
        body["prompt"] = sys.stdin.read() if args.prompt == "-" else args.prompt
    if args.prompt_cache_key:
        body["prompt_cache_key"] = args.prompt_cache_key
    return body


CHAT_HINT = (
    "hint: a chat is cached as its chat template renders it, not as its text; to explain a chat "
    "request, pass its messages with --messages FILE (a JSON list) instead of --prompt"
)


def render(answer: dict[str, Any], *, prompt: bool = False) -> str:
    """A human-readable view of a /v1/route answer. ``prompt``: the request was a ``--prompt``, so a
    prompt that no worker holds any chunk of gets :data:`CHAT_HINT`."""
    degraded = " (index degraded: load-based fallback)" if answer.get("index_degraded") else ""
    lines = [
        f"prompt: {answer['prompt_tokens']} tokens, {answer['full_chunks']} full chunks of "
        f"{answer['chunk_size']}{degraded}",
        f"chosen: {answer['chosen_worker']}  reason: {answer['reason']}  "
        f"predicted cached tokens: {answer['predicted_cached_tokens']}",
        f"{'worker':<24}{'matched':>8}{'gpu':>6}{'cpu':>6}{'pending':>9}",
    ]
    for m in answer["matches"]:
        lines.append(
            f"{m['worker']:<24}{m['matched_chunks']:>8}{m['gpu_chunks']:>6}{m['cpu_chunks']:>6}"
            f"{m['pending_chunks']:>9}"
        )
    if not answer["matches"]:
        lines.append("(no worker holds any chunk of this prompt)")
        if prompt:
            lines.append(CHAT_HINT)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.grpc:
        return _run_grpc(args)
    try:
        url, headers = f"{args.url.rstrip('/')}/v1/route", auth_headers(args)
        reply = httpx.post(url, json=_body(args), headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        print(f"kvgate explain: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    if reply.status_code != 200:
        print(
            f"kvgate explain: {reply.status_code}: {reply.json().get('error', {}).get('message')}",
            file=sys.stderr,
        )
        return 1
    print(
        json.dumps(reply.json(), indent=2)
        if args.json
        else render(reply.json(), prompt=args.prompt is not None)
    )
    return 0


def _run_grpc(args: argparse.Namespace) -> int:
    """The same answer from the gRPC front's ``Route``."""
    from kvgate.client import KVGateClient, KVGateError  # grpc loads only for this path

    body = _body(args)
    request = {"model": body["model"], "prompt_cache_key": body.get("prompt_cache_key", "")}
    request |= {"messages": body["messages"]} if "messages" in body else {"prompt": body["prompt"]}
    try:
        with KVGateClient(args.grpc, api_key=api_key(args), timeout_s=30, retries=0) as client:
            route = client.route(**request)
    except KVGateError as exc:
        print(f"kvgate explain: {exc}", file=sys.stderr)
        return 1
    answer = dataclasses.asdict(route)
    answer["matches"] = [
        {"worker": m.worker, "matched_chunks": m.matched, "gpu_chunks": m.gpu, "cpu_chunks": m.cpu,
         "pending_chunks": m.pending} for m in route.matches
    ]  # fmt: skip
    print(json.dumps(answer, indent=2) if args.json else render(answer, prompt=args.prompt is not None))
    return 0
