"""Benchmarks name the commit they measured (``bench/machine.py``): ``+dirty`` when the code differs
from it, not when only an earlier run's results in ``bench/results`` do."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.machine import RESULTS, git_commit


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _checkout(root: Path) -> str:
    """A checkout with one code file and one result file committed; its HEAD."""
    _git(root, "init", "-q")
    (root / "policy.py").write_text("WEIGHT = 3\n")
    (root / RESULTS).mkdir(parents=True)
    (root / RESULTS / "grid.json").write_text("{}\n")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one")
    return _git(root, "rev-parse", "HEAD")


def test_a_clean_checkout_is_named_by_its_commit(tmp_path: Path) -> None:
    head = _checkout(tmp_path)
    assert git_commit(root=tmp_path) == head
    assert git_commit(short=True, root=tmp_path) == _git(tmp_path, "rev-parse", "--short", "HEAD")


def test_results_written_by_an_earlier_run_leave_the_commit_clean(tmp_path: Path) -> None:
    head = _checkout(tmp_path)
    (tmp_path / RESULTS / "grid.json").write_text('{"hit_rate": 0.54}\n')
    assert git_commit(root=tmp_path) == head


def test_a_changed_code_file_marks_the_commit_dirty(tmp_path: Path) -> None:
    head = _checkout(tmp_path)
    (tmp_path / RESULTS / "grid.json").write_text('{"hit_rate": 0.54}\n')
    (tmp_path / "policy.py").write_text("WEIGHT = 4\n")
    assert git_commit(root=tmp_path) == head + "+dirty"


def test_outside_a_checkout_the_commit_is_unknown(tmp_path: Path) -> None:
    assert git_commit(root=tmp_path) == "unknown"
