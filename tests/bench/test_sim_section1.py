"""``bench/sim_section1.sh`` runs exactly the grids that docs/BENCHMARKS.md's targets command reads
(in its own order: the 8-worker grids first), and refuses options it does not know."""

from __future__ import annotations

import re
import subprocess

from tests.bench.scripts import ROOT

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
