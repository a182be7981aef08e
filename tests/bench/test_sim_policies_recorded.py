"""Recorded traces in ``bench/sim_policies.py``: a fixed file per name (the shared synthetic trace,
the Mooncake conversation trace), found by default beside the shared traces or where ``--recorded
NAME=PATH`` says, with a clear error when it is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.sim_policies import RECORDED, _recorded, _trace


def test_a_recorded_trace_is_read_from_the_given_path_for_every_seed(tmp_path: Path) -> None:
    trace = tmp_path / "conv.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n')
    paths = _recorded([f"mooncake_conversation={trace}"], ["mooncake_conversation"])
    assert paths["mooncake_conversation"] == trace
    assert paths["synthetic"] == RECORDED["synthetic"]
    assert {_trace("mooncake_conversation", seed, tmp_path / "gen", paths) for seed in (0, 1)} == {str(trace)}
    assert not (tmp_path / "gen").exists()  # nothing generated for a recorded trace


def test_a_missing_recorded_trace_is_named_in_the_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent.jsonl"
    with pytest.raises(ValueError, match=r"mooncake_conversation is not at .*absent\.jsonl"):
        _recorded([f"mooncake_conversation={missing}"], ["chat", "mooncake_conversation"])
    # a recorded trace the run does not ask for may be absent
    assert _recorded([f"mooncake_conversation={missing}"], ["chat"])["mooncake_conversation"] == missing


@pytest.mark.parametrize(
    ("options", "traces", "message"),
    [
        ([], ["chat", "nope"], "unknown traces \\['nope'\\]"),
        (["chat=/x.jsonl"], ["chat"], "NAME one of synthetic, mooncake_conversation"),
        (["mooncake_conversation"], ["chat"], "NAME=PATH"),
    ],
)
def test_bad_names_and_options_are_refused(options: list[str], traces: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _recorded(options, traces)


def test_generated_traces_are_still_written_per_seed(tmp_path: Path) -> None:
    assert _trace("chat", 3, tmp_path) == str(tmp_path / "chat_3.jsonl")
    assert (tmp_path / "chat_3.jsonl").stat().st_size > 0
