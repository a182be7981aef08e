"""The finished cells of a simulation grid, kept as they finish so that a run that stops (killed,
out of time, a machine restarted) can be resumed without running them again.

One JSON line per cell in ``NAME.cells.jsonl`` beside the grid's results: ``{"code": IDENTITY,
"row": ROW}``. A resumed run takes only the rows written by the same code: the identity is the
checkout's commit plus a digest of its uncommitted changes outside ``bench/results``
(:func:`code_identity`), so a cell computed by other code is run again, never mixed in. A line cut
short by a kill is skipped. The identity also names the recorded trace files the grid reads, by
their sha256 (:func:`run_identity`), so a trace replaced under the same path makes its cells run
again. The grid's results file names the identity that wrote it (``"code"``), so a resumed run of a
grid that finished takes every row from there. Cells are told apart by trace name, cluster size,
capacity and seed; an untracked file is not noticed (rerun without ``--resume`` after changing one).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

from bench.machine import RESULTS, ROOT

CellKey = tuple[str, int, float, int, int]
"""(trace, workers, speed, GPU tokens per worker, seed)."""


def code_identity(root: Path = ROOT) -> str | None:
    """The commit checked out at ``root`` and a digest of its uncommitted changes to tracked files
    outside :data:`.machine.RESULTS` (``COMMIT`` alone when there are none); None outside a git
    checkout, where no cell can be told to come from the same code."""

    def git(*args: str) -> bytes:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, check=False)
        return done.stdout if done.returncode == 0 else b""

    head = git("rev-parse", "HEAD").strip().decode()
    if not head:
        return None
    diff = git("diff", "HEAD", "--binary", "--", ".", f":(exclude){RESULTS}")
    return head + (f"+{hashlib.sha256(diff).hexdigest()[:16]}" if diff else "")


def run_identity(code: str | None, inputs: dict[str, str]) -> str | None:
    """``code`` (:func:`code_identity`) joined with a digest of ``inputs`` (name -> sha256 of each
    recorded trace a grid reads; ``code`` alone when there are none); None when ``code`` is."""
    if code is None or not inputs:
        return code
    digest = hashlib.sha256(json.dumps(sorted(inputs.items())).encode()).hexdigest()[:16]
    return f"{code}@{digest}"


def file_sha256(path: Path) -> str:
    """The sha256 of the file at ``path``, hex."""
    with path.open("rb") as data:
        return hashlib.file_digest(data, "sha256").hexdigest()


def row_key(row: dict) -> CellKey:
    """The cell a grid row belongs to."""
    return (row["trace"], int(row["workers"]), float(row["speed"]), int(row["capacity"]), int(row["seed"]))


class GridCheckpoint:
    """The cells of one grid finished so far by code ``identity`` (:func:`code_identity`), at
    ``path``. :meth:`add` may be called from several threads."""

    def __init__(self, path: Path, identity: str | None) -> None:
        self.path = path
        self.identity = identity
        self._lock = threading.Lock()

    def finished(self, wanted: Iterable[CellKey]) -> dict[CellKey, dict]:
        """The rows already at :attr:`path` for cells in ``wanted``, written by this code (later
        lines win); none without an identity. Lines from other code and lines cut short are
        skipped."""
        wanted = set(wanted)
        if self.identity is None or not self.path.is_file():
            return {}
        rows: dict[CellKey, dict] = {}
        for line in self.path.read_text().splitlines():
            try:
                entry = json.loads(line)
                key = row_key(entry["row"])
            except (ValueError, KeyError, TypeError):
                continue  # cut short by a kill, or not a cell
            if entry.get("code") == self.identity and key in wanted:
                rows[key] = entry["row"]
        return rows

    def add(self, row: dict) -> None:
        """Keep ``row``, a finished cell: one line, appended and the file closed before returning."""
        line = json.dumps({"code": self.identity, "row": row}) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write(line)

    def adopt(self, results: Path) -> int:
        """Keep the rows of the grid's results file ``results`` when this code wrote it (its
        ``"code"``), so that resuming a grid that finished runs nothing again; how many rows."""
        if self.identity is None or not results.is_file():
            return 0
        report = json.loads(results.read_text())
        if report.get("code") != self.identity:
            return 0
        for row in report["rows"]:
            self.add(row)
        return len(report["rows"])

    def clear(self) -> None:
        """Forget every cell (a fresh run, or the grid's results are written)."""
        self.path.unlink(missing_ok=True)
