"""Progress lines for the person at the terminal: stderr, prefixed, flushed at once."""

from __future__ import annotations

import sys


def say(message: str) -> None:
    """Writes ``kvgate: message`` to stderr (stdout stays free for the client instructions)."""
    print(f"kvgate: {message}", file=sys.stderr, flush=True)
