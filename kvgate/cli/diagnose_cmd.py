"""``kvgate diagnose REQUEST_ID``: why one of your requests missed the cache, from a running gateway's
``GET /v1/cache/diagnose/{request_id}`` (the request's ``x-request-id``; see ``docs/CACHING.md``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

import httpx

from kvgate.cli.api_key import add_api_key_argument, auth_headers

HELP = "tell why a request (by its x-request-id) reused the cached tokens it did, and how to reuse more"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("request_id", metavar="REQUEST_ID", help="the x-request-id of the request's response")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gateway's HTTP address")
    parser.add_argument("--json", action="store_true", help="print the raw answer")
    add_api_key_argument(parser)


def render(answer: dict[str, Any]) -> str:
    """A human-readable view of a diagnosis."""
    first = answer["first_divergent_token"]
    where = "" if first is None else f", first token not reused: {first}"
    return "\n".join([
        f"request {answer['request_id']}: {answer['cached_tokens']} of {answer['prompt_tokens']} prompt "
        f"tokens cached{where}",
        f"cause: {answer['cause']}",
        answer["detail"],
    ])  # fmt: skip


def run(args: argparse.Namespace) -> int:
    url = f"{args.url.rstrip('/')}/v1/cache/diagnose/{quote(args.request_id, safe='')}"
    try:
        reply = httpx.get(url, headers=auth_headers(args), timeout=30)
    except httpx.HTTPError as exc:
        print(f"kvgate diagnose: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    if reply.status_code != 200:
        print(f"kvgate diagnose: {reply.status_code}: {_error_message(reply)}", file=sys.stderr)
        return 1
    try:
        answer = reply.json()
        print(json.dumps(answer, indent=2) if args.json else render(answer))
    except (ValueError, KeyError, TypeError):
        print(f"kvgate diagnose: no diagnosis in the answer: {reply.text[:200]!r}", file=sys.stderr)
        return 1
    return 0


def _error_message(reply: httpx.Response) -> str:
    """The OpenAI-style error's message, or the start of whatever else came back (a proxy's page)."""
    try:
        return str(reply.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return reply.text[:200]
