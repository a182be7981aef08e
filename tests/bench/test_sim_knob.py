"""``bench/sim_knob.py``: each cell runs kvgate's policy as the defaults have it and with the given
settings (real ``kvgate simulate`` subprocesses), a bad setting stops the run with the simulator's
reason, and the summary counts the cells each way is ahead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.sim_knob import _cell, _lines

SESSION = [4000 + 512 * turn for turn in range(6)]  # one conversation's growing prompts


def _trace(tmp_path: Path) -> str:
    """Two conversations over three workers: each turn extends the last (512-token blocks)."""
    lines = []
    for conv in range(2):
        for turn, tokens in enumerate(SESSION):
            blocks = [conv * 100 + b for b in range(-(-tokens // 512))]
            row = {"timestamp": 1000 * turn + conv, "input_length": tokens, "output_length": 4}
            lines.append(json.dumps(row | {"hash_ids": blocks}))
    path = tmp_path / "mini.jsonl"
    path.write_text("\n".join(sorted(lines, key=lambda r: json.loads(r)["timestamp"])) + "\n")
    return str(path)


def test_a_cell_runs_the_defaults_and_the_setting(tmp_path: Path) -> None:
    row = _cell("mini", _trace(tmp_path), (3, 1.0, 100_000, 0), ["compute_weight=0", "session_weight=0"])
    assert set(row) >= {"default", "set"}
    for run in (row["default"], row["set"]):
        assert set(run) == {"hit_rate", "imbalance", "ttft_p50_s", "ttft_p99_s"}
        assert 0 < run["hit_rate"] < 1  # follow-ups reuse their history, first turns reuse nothing


def test_a_bad_setting_names_itself(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="warm_busy must be >= 0"):
        _cell("mini", _trace(tmp_path), (2, 1.0, 100_000, 0), ["warm_busy=-1"])


def test_the_summary_counts_the_cells_each_way_is_ahead() -> None:
    def run(hit: float, p99: float) -> dict[str, float]:
        return {"hit_rate": hit, "imbalance": 1.0, "ttft_p50_s": 0.1, "ttft_p99_s": p99}

    rows = [
        {"trace": "t", "workers": 8, "speed": 1.0, "capacity": 1000, "seed": s, "default": a, "set": b}
        for s, (a, b) in enumerate([(run(0.5, 2.0), run(0.6, 1.0)), (run(0.5, 2.0), run(0.4, 3.0)),
                                    (run(0.5, 2.0), run(0.5, 1.5))])
    ]  # fmt: skip
    text = "\n".join(_lines(rows, ["k=1"]))
    assert "| t | 8 x1 | 1,000 | 0 | 0.5000 -> 0.6000 | 1.000 -> 1.000 | 2.00 -> 1.00 |" in text
    assert "hit_rate: better with the setting in 1 of 3 cells, worse in 1." in text
    assert "ttft_p99_s: better with the setting in 2 of 3 cells, worse in 1." in text
