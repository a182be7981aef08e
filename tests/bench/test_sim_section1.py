"""``bench/sim_section1.sh`` runs exactly the grids that docs/BENCHMARKS.md's targets command reads
(in its own order: the 8-worker grids first), checks every grid's traces first (``bench/sim_policies.py
--check``), and refuses options it does not know."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.bench.scripts import ROOT, run_script

SCRIPT = ROOT / "bench" / "sim_section1.sh"


def test_the_script_runs_the_grids_the_targets_table_reads() -> None:
    grids = re.findall(r"^grid (\S+) ", SCRIPT.read_text(), flags=re.MULTILINE)
    docs = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    command = re.search(r"python bench/sim_targets\.py (sim_policies_8w [^`]*?)\n```", docs, flags=re.DOTALL)
    assert command is not None
    assert sorted(grids) == sorted(command.group(1).replace("\\", " ").split())
    assert len(set(grids)) == len(grids)


def test_an_unknown_option_is_refused_with_the_usage() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--nope"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "usage: bash bench/sim_section1.sh" in done.stderr


def test_check_runs_no_cell_and_refuses_a_missing_trace(tmp_path: Path) -> None:
    trace = tmp_path / "conv.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n')
    grid = ["--traces", "mooncake_conversation", "--sizes", "2x1", "--capacities", "1000", "--seeds", "0,1"]
    grid += ["--out", str(tmp_path / "out"), "--name", "g", "--check"]
    done = run_script("bench.sim_policies", *grid, "--recorded", f"mooncake_conversation={trace}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "g: 2 cells, every trace ready" in done.stderr
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written
    absent = tmp_path / "absent.jsonl"
    done = run_script("bench.sim_policies", *grid, "--recorded", f"mooncake_conversation={absent}")
    assert done.returncode == 2
    assert f"mooncake_conversation is not at {absent}" in done.stderr
