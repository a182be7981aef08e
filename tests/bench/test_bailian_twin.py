"""``bench/bailian_twin.py``: a Mooncake trace rewritten as its Qwen-Bailian twin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.bailian_twin import main
from kvgate.sim.trace import read_trace
from tests.sim.helpers import req, write_trace


def test_the_twin_has_the_same_requests_in_seconds_and_16_token_ids(tmp_path: Path) -> None:
    source = write_trace(tmp_path / "m.jsonl", [req(1.5, [7, 8], tokens=600), req(0.25, [7])])
    assert main([str(source), str(tmp_path / "b.jsonl")]) == 0
    first, second = map(json.loads, (tmp_path / "b.jsonl").read_text().splitlines())  # by arrival
    assert (first["timestamp"], first["hash_ids"][0], len(first["hash_ids"])) == (0.25, 7 * 32, 32)
    ids = second["hash_ids"]
    assert (ids[31:33], ids[-1], len(ids)) == ([255, 256], 261, 38)  # 7 -> 224..255, 8 -> 256..261
    twin = read_trace(tmp_path / "b.jsonl")
    assert [(r.timestamp_ms, r.input_length) for r in twin.requests] == [(250.0, 512), (1500.0, 600)]


def test_blocks_that_do_not_split_into_16_tokens_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    source = write_trace(tmp_path / "m.jsonl", [req(0, [1], tokens=500)])
    with pytest.raises(SystemExit):
        main([str(source), str(tmp_path / "b.jsonl"), "--trace-block-tokens", "500"])
    assert "500-token blocks do not split into 16-token blocks" in capsys.readouterr().err
