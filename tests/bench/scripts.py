"""Running a benchmark script the way a user does (``python -m bench.NAME ...`` from the repository's
root, in a fresh interpreter) and reading what it printed."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_script(module: str, *args: str, timeout_s: float = 240.0) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` in the repository's root with this checkout first on the path; the
    finished process (stdout and stderr captured as text). Never raises for a non-zero exit."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def positive(value: Any) -> bool:
    """A finite number above 0 (what every timing and rate of a benchmark must be)."""
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def reused_tokens(records: list[dict[str, Any]], block_tokens: int = 512) -> list[int]:
    """Per Mooncake trace record, the prompt tokens an unlimited cache reuses: its leading blocks
    that earlier records already held (capped at its length)."""
    seen: set[int] = set()
    reused = []
    for r in records:
        held = next((i for i, h in enumerate(r["hash_ids"]) if h not in seen), len(r["hash_ids"]))
        reused.append(min(held * block_tokens, r["input_length"]))
        seen.update(r["hash_ids"])
    return reused
