"""Recorded traces in ``bench/sim_policies.py``: a fixed file per name (the shared synthetic trace,
Mooncake's conversation trace and the excerpt of its report's trace), found by default beside the
shared traces or where ``--recorded NAME=PATH`` says, with a clear error when it is not there or,
read from its default place, is not the file the stored results were made from."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bench.grid_checkpoint import file_sha256, run_identity
from bench.sim_policies import RECORDED, RECORDED_SHA256, _recorded, _trace


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


def test_a_default_trace_must_be_the_file_the_results_were_made_from(tmp_path: Path) -> None:
    trace = tmp_path / "conv.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n')
    defaults = {"mooncake_conversation": trace}
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    assert _recorded([], ["mooncake_conversation"], defaults, {"mooncake_conversation": digest}) == defaults
    refused = rf"sha256 {digest}, expected 0{{64}}.*--recorded mooncake_conversation="
    with pytest.raises(ValueError, match=refused):
        _recorded([], ["mooncake_conversation"], defaults, {"mooncake_conversation": "0" * 64})
    # named by an option, the same file is taken as it is
    paths = _recorded([f"mooncake_conversation={trace}"], ["mooncake_conversation"], defaults, {})
    assert paths == defaults


def test_the_expected_digests_are_the_shared_files_where_they_are() -> None:
    for name, path in RECORDED.items():
        if path.is_file():  # the shared traces this machine has
            assert file_sha256(path) == RECORDED_SHA256[name], name


def test_the_run_identity_follows_the_code_and_each_trace_file() -> None:
    assert run_identity("c0de", {}) == "c0de"
    assert run_identity(None, {"synthetic": "ab"}) is None
    one = run_identity("c0de", {"synthetic": "ab", "mooncake_conversation": "cd"})
    assert one == run_identity("c0de", {"mooncake_conversation": "cd", "synthetic": "ab"})
    assert one is not None
    assert one.startswith("c0de@")
    assert one != run_identity("c0de", {"synthetic": "ab", "mooncake_conversation": "ce"})
    assert one != run_identity("c0df", {"synthetic": "ab", "mooncake_conversation": "cd"})
