"""``bench/families.py --smoke``: a decode row per family asked for, each beside ``transformers`` (eager
attention where the family has no SDPA path), with the commit and command in the JSON it writes.
Figures are checked for shape, never for speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.scripts import positive, run_script

pytestmark = pytest.mark.slow  # three small models built, loaded twice each, in a fresh interpreter


def test_one_decode_row_per_family(tmp_path: Path) -> None:
    done = run_script(
        "bench.families", "--smoke", "--variants", "llama-gqa,gemma2,mixtral", "--out", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "families.json").read_text())
    rows = {r["family"]: r for r in result["rows"]}
    assert list(rows) == ["llama-gqa", "gemma2", "mixtral"]
    assert {r["case"] for r in rows.values()} == {"decode_b2_ctx16"}
    assert all(positive(r["engine"]) and positive(r["hf"]) and positive(r["speedup"]) for r in rows.values())
    assert (rows["gemma2"]["hf_attention"], rows["llama-gqa"]["hf_attention"]) == ("eager", "sdpa")
    assert result["machine"]["command"].startswith("python -m bench.families --smoke")
    assert "| mixtral | decode_b2_ctx16 |" in (tmp_path / "families.md").read_text()
