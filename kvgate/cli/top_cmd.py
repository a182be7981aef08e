"""``kvgate top``: a terminal view of a gateway's hit rates, refreshing in place (like ``top``)."""

from __future__ import annotations

import argparse
import os
import sys
import time

import httpx

from kvgate.cli.top_view import Snapshot, parse, render

HELP = "watch a gateway's token hit rate per worker, route reasons and TTFT in the terminal"
ADMIN_KEY_ENV = "KVGATE_ADMIN_KEY"  # the gateway's admin key, when its /metrics needs one
CLEAR = "\x1b[H\x1b[2J"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gateway's HTTP address")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    parser.add_argument("--once", action="store_true", help="print one screen and exit")
    parser.epilog = f"A gateway with admin keys needs one in ${ADMIN_KEY_ENV}."


def _scrape(url: str) -> Snapshot:
    key = os.environ.get(ADMIN_KEY_ENV, "").strip()
    headers = {"authorization": f"Bearer {key}"} if key else {}
    reply = httpx.get(f"{url.rstrip('/')}/metrics", timeout=5, headers=headers)
    reply.raise_for_status()
    return parse(reply.text)


def run(args: argparse.Namespace) -> int:
    before: Snapshot | None = None
    try:
        while True:
            try:
                now = _scrape(args.url)
            except httpx.HTTPError as exc:
                print(f"kvgate top: cannot read {args.url}/metrics: {exc}", file=sys.stderr)
                return 1
            screen = render(now, before, args.url)
            print(screen if args.once else CLEAR + screen, flush=True)
            if args.once:
                return 0
            before = now
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0
