"""``kvgate keys``: make API keys and the hashed form the gateway's key file stores."""

from __future__ import annotations

import argparse
import sys

from kvgate.gateway.tenancy import Tenant, hash_key, new_key

HELP = "create an API key for a tenant, or hash an existing one (the key file stores only hashes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    new = sub.add_parser("new", help="print a fresh key and the [[tenant]] entry that admits it")
    new.add_argument("--tenant", required=True, help="the tenant's name ([A-Za-z0-9._-], up to 64)")
    hashed = sub.add_parser("hash", help="print the stored form of a key read from stdin (or given)")
    hashed.add_argument("key", nargs="?", help="the key (default: read one line from stdin)")


def run(args: argparse.Namespace) -> int:
    if args.action == "new":
        Tenant(args.tenant)  # ValueError for a bad name, before a key is shown
        key = new_key()
        print(f"key (give it to the tenant; it is not stored anywhere): {key}", file=sys.stderr)
        print(key)
        print(f'# [[tenant]]\n# name = "{args.tenant}"\n# keys = ["{hash_key(key)}"]', file=sys.stderr)
        return 0
    key = args.key if args.key is not None else sys.stdin.readline().strip()
    if not key:
        raise ValueError("no key given")
    print(hash_key(key))
    return 0
