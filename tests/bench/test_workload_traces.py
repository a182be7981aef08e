"""The trace generators a user runs (``bench/workload_traces.py``): well-formed Mooncake JSONL, a
shape's reuse where the shape says it is, the same file for the same seed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.bench.scripts import reused_tokens, run_script

SMALL = {  # a few sessions of each shape: seconds to write
    "chat": ("--conversations", "40"),
    "agents": ("--sessions", "20"),
    "documents": ("--sessions", "40"),
    "pastes": ("--conversations", "200"),
}


def _trace(tmp_path: Path, shape: str, seed: int, tag: str = "") -> list[dict]:
    out = tmp_path / f"{shape}_{seed}{tag}.jsonl"
    done = run_script("bench.workload_traces", str(out), "--shape", shape, "--seed", str(seed), *SMALL[shape])
    assert done.returncode == 0, done.stderr
    assert f"{shape}, " in done.stdout
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("shape", sorted(SMALL))
def test_each_shape_writes_a_replayable_trace(tmp_path: Path, shape: str) -> None:
    records = _trace(tmp_path, shape, 0)
    assert records == _trace(tmp_path, shape, 0, "again")  # a seed fixes the file
    assert records != _trace(tmp_path, shape, 1)
    times = [r["timestamp"] for r in records]
    assert times == sorted(times)
    for r in records:
        assert len(r["hash_ids"]) == math.ceil(r["input_length"] / 512)
        assert r["output_length"] > 0


def test_pastes_reuse_little_beyond_a_conversation_s_own_turns(tmp_path: Path) -> None:
    """Most pasted text is seen once: an unlimited cache reuses under half the prompt tokens (a
    trace of short pastes reuses more: its system prompts are most of each prompt), and what it
    reuses is mostly a conversation's earlier turns (a follow-up starts with its whole first
    prompt)."""
    records = _trace(tmp_path, "pastes", 0)
    reused = reused_tokens(records)
    assert 0.3 < sum(reused) / sum(r["input_length"] for r in records) < 0.5
    follow_ups = sum(u >= 0.8 * r["input_length"] for u, r in zip(reused, records, strict=True))
    assert follow_ups > len(records) / 4


def test_impossible_pastes_parameters_are_refused_clearly(tmp_path: Path) -> None:
    out = tmp_path / "bad.jsonl"
    done = run_script("bench.workload_traces", str(out), "--shape", "pastes", "--turns", "0.5")
    assert done.returncode == 2
    assert "--turns must be at least 1" in done.stderr
    assert not out.exists()
