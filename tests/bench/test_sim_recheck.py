"""``bench/sim_recheck.py``: stored grid cells run again with the current code read as stored, a stored
figure the code does not give is named with both values, and a trace that is not the grid's is
refused. Real ``kvgate simulate`` runs on a tiny recorded trace."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bench.sim_recheck import differences
from tests.bench.scripts import run_script

TRACE = "\n".join(
    json.dumps({"timestamp": 150 * i, "input_length": 1300, "output_length": 3, "hash_ids": [0, 1, 5 + i]})
    for i in range(8)
)
ROW = {
    "trace": "chat", "workers": 8, "speed": 1.0, "capacity": 1000, "seed": 0, "pooled": 0.5,
    "policies": {
        "kvgate": {"hit_rate": 0.5, "imbalance": 1.0, "ttft_p50_s": 0.1, "ttft_p99_s": 0.2,
                   "reasons": {"cache_hit": 3, "new_prefix": 1}},
        "least_loaded": {"hit_rate": 0.1, "imbalance": 1.0, "ttft_p50_s": 0.3, "ttft_p99_s": 0.4,
                         "reasons": {"load_balanced": 4}},
    },
}  # fmt: skip


def test_differences_name_each_field_that_moved_with_both_values() -> None:
    assert differences(ROW, copy.deepcopy(ROW)) == []
    now = copy.deepcopy(ROW)
    now["pooled"] = 0.51
    now["policies"]["kvgate"]["ttft_p99_s"] = 0.25
    now["policies"]["kvgate"]["reasons"]["cache_hit"] = 2
    del now["policies"]["least_loaded"]
    now["policies"]["random"] = ROW["policies"]["least_loaded"]
    assert differences(ROW, now) == [
        "pooled: 0.5 -> 0.51",
        "kvgate.ttft_p99_s: 0.2 -> 0.25",
        "kvgate.reasons: {'cache_hit': 3, 'new_prefix': 1} -> {'cache_hit': 2, 'new_prefix': 1}",
        "least_loaded: not run now",
        "random: not stored",
    ]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stored one-cell grid ``g`` (2 workers, seed 1) of the tiny trace, in its own folder."""
    folder = tmp_path_factory.mktemp("grid")
    trace = folder / "conv.jsonl"
    trace.write_text(TRACE + "\n")
    args = ["--traces", "mooncake_conversation", "--recorded", f"mooncake_conversation={trace}"]
    args += ["--sizes", "2x1", "--capacities", "100000", "--seeds", "1", "--jobs", "1"]
    done = run_script("bench.sim_policies", *args, "--out", str(folder), "--name", "g")
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


def _recheck(folder: Path, trace: Path, *extra: str):
    return run_script("bench.sim_recheck", "g", "--results", str(folder), "--jobs", "1",
                      "--recorded", f"mooncake_conversation={trace}", *extra)  # fmt: skip


def test_a_stored_cell_run_again_reads_as_stored(grid: Path, tmp_path: Path) -> None:
    out = tmp_path / "recheck.json"
    done = _recheck(grid, grid / "conv.jsonl", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "g mooncake_conversation 2 1.0 100000 1: same" in done.stdout
    assert "1 of 1 cells read as stored, 0 differ" in done.stdout
    report = json.loads(out.read_text())
    assert report["differ"] == 0
    assert report["outcomes"] == [{"grid": "g", "cell": ["mooncake_conversation", 2, 1.0, 100000, 1],
                                   "differences": []}]  # fmt: skip


def test_a_stored_figure_the_code_does_not_give_is_named(grid: Path, tmp_path: Path) -> None:
    stored = json.loads((grid / "g.json").read_text())
    hit = stored["rows"][0]["policies"]["kvgate"]["hit_rate"]
    stored["rows"][0]["policies"]["kvgate"]["hit_rate"] = 0.123456
    (tmp_path / "g.json").write_text(json.dumps(stored))
    done = _recheck(tmp_path, grid / "conv.jsonl")
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"kvgate.hit_rate: 0.123456 -> {hit}" in done.stdout
    assert "0 of 1 cells read as stored, 1 differ" in done.stdout


def test_a_trace_that_is_not_the_grids_or_no_cell_kept_is_refused(grid: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(TRACE.replace('"output_length": 3', '"output_length": 4') + "\n")
    done = _recheck(grid, other)
    assert done.returncode == 2
    assert "is not the mooncake_conversation trace the grid read" in done.stderr
    done = _recheck(grid, grid / "conv.jsonl", "--seeds", "0")
    assert done.returncode == 2
    assert "the filters keep no stored cell" in done.stderr
    done = run_script("bench.sim_recheck", "nothing", "--results", str(tmp_path))
    assert done.returncode == 2
    assert "no results" in done.stderr
    done = _recheck(grid, grid / "conv.jsonl", "--recorded", f"conversation={other}")
    assert done.returncode == 2
    assert "--recorded takes NAME=PATH with NAME one of" in done.stderr
