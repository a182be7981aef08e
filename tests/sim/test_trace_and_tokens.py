"""Reading Mooncake traces, and turning block ids into tokens and real chunk hashes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kvgate.sim.tokens import prompt_tokens
from kvgate.sim.trace import load_trace, parse_request, spread_arrivals
from tests.sim.helpers import BLOCK, req, workload, write_trace


def test_a_trace_loads_sorted_by_arrival_and_limited(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.jsonl", [req(2, [1]), req(1, [2]), req(3, [3])])
    assert [r.hash_ids for r in load_trace(path)] == [(2,), (1,), (3,)]
    assert [r.hash_ids for r in load_trace(path, limit=2)] == [(2,), (1,)]


def test_requests_recorded_at_one_timestamp_spread_evenly_over_the_window_in_file_order() -> None:
    requests = [req(0, [1]), req(0, [2]), req(0, [3]), req(0, [4]), req(3, [5]), req(6, [6]), req(6, [7])]
    spread = spread_arrivals(requests, 3000)
    assert [r.hash_ids[0] for r in spread] == [1, 2, 3, 4, 5, 6, 7]
    assert [r.timestamp_ms for r in spread] == [0, 750, 1500, 2250, 3000, 6000, 7500]
    assert spread_arrivals(requests, 0) == requests


def test_a_window_past_the_next_timestamp_keeps_the_spread_sorted_by_arrival() -> None:
    spread = spread_arrivals([req(0, [1]), req(0, [2]), req(1, [3])], 4000)
    assert [(r.hash_ids[0], r.timestamp_ms) for r in spread] == [(1, 0), (3, 1000), (2, 2000)]


@pytest.mark.parametrize("window", [-1.0, float("nan"), float("inf")])
def test_a_bad_arrival_spread_is_refused(window: float) -> None:
    with pytest.raises(ValueError, match="arrival spread must be a finite number of ms >= 0"):
        spread_arrivals([req(0, [1])], window)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"timestamp": 0, "input_length": 100}', "not a Mooncake trace record"),
        ('{"timestamp": 0, "input_length": 600, "hash_ids": [1]}', "do not cover input_length 600"),
        ('{"timestamp": 0, "input_length": 512, "hash_ids": [1, 2]}', "do not cover"),
        ('{"timestamp": 0, "input_length": 10, "hash_ids": [-1]}', "non-negative"),
        ("not json", "not a Mooncake trace record"),
    ],
)
def test_malformed_records_are_refused_with_their_place(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_request(line, BLOCK, "t.jsonl:7")
    assert "t.jsonl:7" in str(caught.value)


def test_equal_block_ids_give_equal_tokens_and_a_short_last_block_is_a_prefix() -> None:
    full = prompt_tokens(req(0, [7, 8]), BLOCK)
    cut = prompt_tokens(req(0, [7, 8], tokens=BLOCK + 100), BLOCK)
    other = prompt_tokens(req(0, [7, 9]), BLOCK)
    assert full.dtype == np.dtype("<u4")
    assert len(full) == 2 * BLOCK
    assert len(cut) == BLOCK + 100
    assert np.array_equal(cut, full[: BLOCK + 100])
    assert np.array_equal(other[:BLOCK], full[:BLOCK])
    assert not np.array_equal(other[BLOCK:], full[BLOCK:])


def test_requests_sharing_k_blocks_share_exactly_4k_leading_chunk_hashes() -> None:
    wl = workload(req(0, [1, 2, 3, 4]), req(1, [1, 2, 3, 5, 6]))
    first, second = wl.hashes
    assert len(first) == 16
    assert len(second) == 20
    assert first[:12] == second[:12]
    assert first[12] != second[12]
    assert workload(req(0, [1, 2, 3, 4])).hashes[0] == first  # deterministic across builds


def test_only_full_chunks_are_hashed() -> None:
    (chain,) = workload(req(0, [1, 2], tokens=BLOCK + 300)).hashes
    assert len(chain) == (BLOCK + 300) // 128
