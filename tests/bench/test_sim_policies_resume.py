"""``bench/sim_policies.py --resume``: a grid that stopped takes the cells it finished with the same
code and the same recorded trace from ``NAME.cells.jsonl`` and runs only the others; cells from other
code, from another file under the trace's path, cut-short lines and a fresh run (no ``--resume``)
run everything. Real ``kvgate simulate`` runs on a tiny recorded trace."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from bench.grid_checkpoint import GridCheckpoint, code_identity, row_key, run_identity
from tests.bench.scripts import run_script

TRACE = "\n".join(
    json.dumps({"timestamp": 100 * i, "input_length": 1500, "output_length": 4, "hash_ids": [0, 1, 2 + i]})
    for i in range(6)
)


def _grid(tmp_path: Path, *extra: str, trace_text: str = TRACE) -> tuple[dict, str]:
    """Two cells (seeds 0 and 1) of the tiny trace (``trace_text``) on 2 workers: the grid's JSON
    and stderr."""
    trace = tmp_path / "conv.jsonl"
    trace.write_text(trace_text + "\n")
    args = ["--traces", "mooncake_conversation", "--recorded", f"mooncake_conversation={trace}"]
    args += ["--sizes", "2x1", "--capacities", "100000", "--seeds", "0,1", "--jobs", "1"]
    done = run_script("bench.sim_policies", *args, "--out", str(tmp_path), "--name", "g", *extra)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((tmp_path / "g.json").read_text()), done.stderr


def _identity(trace_text: str = TRACE) -> str | None:
    """The identity a grid of this code on the tiny trace ``trace_text`` keeps its cells under."""
    digest = hashlib.sha256((trace_text + "\n").encode()).hexdigest()
    return run_identity(code_identity(), {"mooncake_conversation": digest})


def _marked(row: dict) -> dict:
    """``row`` with a kvgate hit rate no simulation of the tiny trace gives."""
    marked = copy.deepcopy(row)
    marked["policies"]["kvgate"]["hit_rate"] = 0.123456
    return marked


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> dict:
    grid, _ = _grid(tmp_path_factory.mktemp("first"))
    return grid


def test_a_resumed_grid_runs_only_cells_not_finished_by_the_same_code(tmp_path: Path, first: dict) -> None:
    seed0, seed1 = first["rows"]
    checkpoint = GridCheckpoint(tmp_path / "g.cells.jsonl", _identity())
    checkpoint.add(_marked(seed0))
    grid, stderr = _grid(tmp_path, "--resume")
    assert "1 of 2 cells from" in stderr
    assert "[2/2 cells]" in stderr
    assert grid["rows"][0]["policies"]["kvgate"]["hit_rate"] == 0.123456  # taken, not run again
    assert grid["rows"][1] == seed1  # run: the simulation is deterministic per seed
    assert "--resume" not in grid["command"]
    assert not checkpoint.path.exists()  # every row is in g.json now
    again, stderr = _grid(tmp_path, "--resume")  # a finished grid: every row from g.json
    assert "2 of 2 cells from" in stderr
    assert again["rows"] == grid["rows"]


def test_cells_from_other_code_or_cut_short_and_fresh_runs_are_run_again(tmp_path: Path, first: dict) -> None:
    seed0, _ = first["rows"]
    other = GridCheckpoint(tmp_path / "g.cells.jsonl", "0" * 40)
    other.add(_marked(seed0))
    with other.path.open("a") as out:
        out.write(json.dumps({"code": _identity(), "row": _marked(seed0)})[:-20])  # killed mid-line
    grid, stderr = _grid(tmp_path, "--resume")
    assert "0 of 2 cells from" in stderr
    assert grid["rows"] == first["rows"]
    GridCheckpoint(other.path, _identity()).add(_marked(seed0))
    grid, _ = _grid(tmp_path)  # no --resume: a fresh run
    assert grid["rows"] == first["rows"]


def test_cells_of_another_file_under_the_trace_path_are_run_again(tmp_path: Path, first: dict) -> None:
    seed0, _ = first["rows"]
    longer = TRACE.replace('"output_length": 4', '"output_length": 9')
    GridCheckpoint(tmp_path / "g.cells.jsonl", _identity()).add(_marked(seed0))  # made from TRACE
    grid, stderr = _grid(tmp_path, "--resume", trace_text=longer)
    assert "0 of 2 cells from" in stderr
    assert grid["code"] == _identity(longer) != _identity()
    assert grid["traces"] == {"mooncake_conversation": hashlib.sha256((longer + "\n").encode()).hexdigest()}
    again, stderr = _grid(tmp_path, "--resume")  # the grid's results are of the other file: run again
    assert "0 of 2 cells from" in stderr
    assert again["rows"] == first["rows"]


def test_the_checkpoint_keeps_the_last_row_per_cell_asked_for(tmp_path: Path, first: dict) -> None:
    seed0, seed1 = first["rows"]
    checkpoint = GridCheckpoint(tmp_path / "c.jsonl", "abc")
    for row in (seed0, _marked(seed0), seed1):
        checkpoint.add(row)
    assert checkpoint.finished([row_key(seed0)]) == {row_key(seed0): _marked(seed0)}
    assert GridCheckpoint(checkpoint.path, None).finished([row_key(seed0)]) == {}  # no identity: nothing
    checkpoint.clear()
    assert checkpoint.finished([row_key(seed0), row_key(seed1)]) == {}


def test_code_identity_names_the_commit_and_uncommitted_changes(tmp_path: Path) -> None:
    assert code_identity(tmp_path) is None  # not a git checkout

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True)
        return done.stdout.strip()

    git("init", "-q")
    (tmp_path / "code.py").write_text("A = 1\n")
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "g.json").write_text("{}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    head = git("rev-parse", "HEAD")
    assert code_identity(tmp_path) == head
    (tmp_path / "bench" / "results" / "g.json").write_text('{"rows": []}\n')
    assert code_identity(tmp_path) == head  # results are not code
    (tmp_path / "code.py").write_text("A = 2\n")
    changed = code_identity(tmp_path)
    assert changed is not None
    assert changed.startswith(head + "+")
    (tmp_path / "code.py").write_text("A = 3\n")
    assert code_identity(tmp_path) not in (head, changed)  # other changes, another identity
