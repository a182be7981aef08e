"""Trace record formats: Mooncake's (ms, 512-token blocks) and Qwen-Bailian's (s, 16-token blocks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvgate.cli.main import main
from kvgate.sim.trace import parse_request, read_trace
from kvgate.sim.trace_format import BAILIAN, MOONCAKE, resolve
from tests.sim.helpers import BLOCK, req, write_bailian_trace, write_trace

REQUESTS = [req(i * 0.5, [1, 2, 10 + i % 3, 20 + i], tokens=4 * BLOCK - 37 * (i % 2)) for i in range(24)]
"""Every prompt two shared blocks, one of three, one of its own (every other one cut short)."""


def test_a_bailian_trace_is_read_in_seconds_with_16_token_blocks(tmp_path: Path) -> None:
    path = write_bailian_trace(tmp_path / "b.jsonl", [req(2.5, [1, 2], tokens=BLOCK + 100), req(0.75, [1])])
    trace = read_trace(path)
    assert (trace.trace_format, trace.block_tokens) == (BAILIAN, 16)
    assert [r.timestamp_ms for r in trace.requests] == [750.0, 2500.0]  # sorted by arrival
    assert [len(r.hash_ids) for r in trace.requests] == [32, 39]  # ceil(612 / 16) = 39
    assert trace.describe() == "2 requests over 1.8 s, bailian (timestamps in s, 16 tokens per hash id)"


def test_a_mooncake_trace_keeps_its_milliseconds_and_512_token_blocks(tmp_path: Path) -> None:
    trace = read_trace(write_trace(tmp_path / "m.jsonl", [req(2.5, [1, 2])]))
    assert (trace.trace_format, trace.block_tokens) == (MOONCAKE, 512)
    assert trace.requests[0].timestamp_ms == 2500.0


def test_the_same_trace_in_either_format_replays_to_the_same_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    reports = []
    for path in (
        write_trace(tmp_path / "m.jsonl", REQUESTS),
        write_bailian_trace(tmp_path / "b.jsonl", REQUESTS),
    ):
        assert main(["simulate", str(path), "--workers", "3", "--capacity-tokens", "4096", "--json"]) == 0
        out, err = capsys.readouterr()
        report = json.loads(out)
        for policy in report["policies"].values():
            del policy["wall_s"]  # the machine's time, not the simulation's
        reports.append(report)
        assert err.startswith(f"{path}: 24 requests over 11.5 s, ")
    mooncake, bailian = reports
    assert bailian == mooncake
    assert mooncake["policies"]["kvgate"]["hit_rate"] > 0.4  # the shared blocks were found: not vacuous


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            "mooncake",
            "32 hash ids do not cover input_length 512 in blocks of 512 tokens (blocks of 16 tokens "
            "would fit; is it a Mooncake",
        ),
        (
            "bailian",
            "1 hash ids do not cover input_length 512 in blocks of 16 tokens (blocks of 512 or 1024 or "
            "2048 tokens would fit; is it a Qwen-Bailian",
        ),
    ],
)
def test_a_format_forced_on_the_other_kind_of_file_is_a_clear_error(
    tmp_path: Path, option: str, message: str, capsys: pytest.CaptureFixture
) -> None:
    other = write_bailian_trace if option == "mooncake" else write_trace
    path = other(tmp_path / "t.jsonl", [req(0, [1]), req(1, [1, 2])])
    assert main(["simulate", str(path), "--trace-format", option, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"t.jsonl:1: {message}" in err
    assert "see --trace-format and --trace-block-tokens" in err


def test_auto_takes_mooncake_for_a_record_without_conversation_fields_or_a_line_that_is_not_json() -> None:
    assert resolve("auto", '{"chat_id": 1, "parent_chat_id": -1}') is BAILIAN
    assert resolve("auto", '{"chat_id": 1, "timestamp": 0}') is MOONCAKE
    assert resolve("auto", "not json") is MOONCAKE
    assert resolve("auto", None) is MOONCAKE
    with pytest.raises(ValueError, match="unknown trace format 'csv': choose from auto, mooncake, bailian"):
        resolve("csv", None)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"timestamp": NaN, "input_length": 16, "hash_ids": [1]}', "timestamp must be non-negative"),
        ('{"timestamp": 0, "input_length": 16, "hash_ids": [18446744073709551616]}', "under 2\\*\\*64"),
        ('{"timestamp": 0, "input_length": 16}', "not a Qwen-Bailian trace record"),
    ],
)
def test_bailian_records_out_of_range_are_refused_with_their_place(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        parse_request(line, 16, "b.jsonl:3", BAILIAN)
    assert "b.jsonl:3" in str(caught.value)
