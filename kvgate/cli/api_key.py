"""The API key of the client commands (``explain``, ``bench``): from ``$KVGATE_API_KEY`` or a file,
never from the command line (where other users and shell histories see it)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

API_KEY_ENV = "KVGATE_API_KEY"


def add_api_key_argument(parser: argparse.ArgumentParser) -> None:
    text = f"a file holding the gateway API key (default: ${API_KEY_ENV}, if set)"
    parser.add_argument("--api-key-file", type=Path, help=text)


def api_key(args: argparse.Namespace) -> str | None:
    """The key of ``--api-key-file`` or ``$KVGATE_API_KEY``; None when neither is given (a gateway
    without keys). ValueError for an empty key file."""
    path: Path | None = getattr(args, "api_key_file", None)
    key = path.read_text().strip() if path is not None else os.environ.get(API_KEY_ENV, "").strip()
    if path is not None and not key:
        raise ValueError(f"the API key file {path} is empty")
    return key or None


def auth_headers(args: argparse.Namespace) -> dict[str, str]:
    """``Authorization: Bearer`` with :func:`api_key`; no header without one."""
    key = api_key(args)
    return {"authorization": f"Bearer {key}"} if key else {}
