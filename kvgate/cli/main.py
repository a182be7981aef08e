"""``kvgate``: the command line. Each subcommand is one module registered in ``COMMANDS``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kvgate.cli import (
    audit_cmd,
    bench_cmd,
    diagnose_cmd,
    explain_cmd,
    fingerprint_cmd,
    gateway_cmd,
    hash_cmd,
    index_cmd,
    keys_cmd,
    plan_cmd,
    simulate_cmd,
    top_cmd,
    up_cmd,
    version_cmd,
    workers_cmd,
)
from kvgate.cli.help_format import DefaultsHelpFormatter, show_bare_defaults

# name -> module exposing ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``
COMMANDS = {
    "version": version_cmd,
    "fingerprint": fingerprint_cmd,
    "hash": hash_cmd,
    "index": index_cmd,
    "simulate": simulate_cmd,
    "plan": plan_cmd,
    "explain": explain_cmd,
    "diagnose": diagnose_cmd,
    "bench": bench_cmd,
    "top": top_cmd,
    "up": up_cmd,
    "workers": workers_cmd,
    "gateway": gateway_cmd,
    "keys": keys_cmd,
    "audit": audit_cmd,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvgate", description="Prefix-cache routing gateway for LLM serving."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP,
                                    formatter_class=DefaultsHelpFormatter)  # fmt: skip
        module.add_arguments(sub)
        show_bare_defaults(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except ValueError as exc:
        print(f"kvgate {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C (a second one where a server stops gracefully); cleanup has run
        print(f"kvgate {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
