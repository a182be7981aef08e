"""``build_step``: a step's sequences become positions, cache slots, block tables and logits rows."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from kvgate.workers.model import ScheduledSequence, build_step


def test_a_prefill_step_with_a_cached_prefix_and_a_fresh_prompt() -> None:
    # block size 4. Sequence 0 reuses blocks 7, 2 (8 cached tokens) and computes 3 more into block 5;
    # sequence 1 is a fresh 2-token prompt in block 9.
    step = build_step([ScheduledSequence([7, 2, 5], 8, 3), ScheduledSequence([9], 0, 2)], 4, "cpu")
    assert step.positions.tolist() == [8, 9, 10, 0, 1]
    attn = step.attn
    assert attn.slot_mapping.tolist() == [20, 21, 22, 36, 37]  # block 5 * 4 + 0..2, block 9 * 4 + 0..1
    assert attn.block_tables.tolist() == [[7, 2, 5], [9, 0, 0]]  # short rows padded with block 0
    assert attn.context_lens.tolist() == [11, 2]
    assert attn.cu_seqlens_q.tolist() == [0, 3, 5]
    assert attn.logits_indices.tolist() == [2, 4]  # the last new token of each sequence
    assert not attn.is_decode
    dtypes = (
        attn.slot_mapping.dtype,
        attn.block_tables.dtype,
        attn.context_lens.dtype,
        attn.cu_seqlens_q.dtype,
    )
    assert dtypes == (torch.int64, torch.int32, torch.int32, torch.int32)


def test_one_new_token_per_sequence_is_a_decode_step() -> None:
    step = build_step([ScheduledSequence([3, 4], 5, 1), ScheduledSequence([8], 3, 1)], 4, "cpu")
    assert step.attn.is_decode
    assert step.attn.cu_seqlens_q is None
    assert step.positions.tolist() == [5, 3]
    assert step.attn.slot_mapping.tolist() == [
        17,
        35,
    ]  # position 5 -> block 4 offset 1; 3 -> block 8 offset 3
    assert step.attn.logits_indices.tolist() == [0, 1]


def test_a_prompt_chunk_asks_for_no_logits() -> None:
    seqs = [ScheduledSequence([0, 1], 0, 6, needs_logits=False), ScheduledSequence([2], 2, 1)]
    assert build_step(seqs, 4, "cpu").attn.logits_indices.tolist() == [6]


@pytest.mark.parametrize(
    ("seqs", "message"),
    [
        ([], "at least one sequence"),
        ([ScheduledSequence([0], 2, 0)], ">= 1 token"),
        ([ScheduledSequence([0], 3, 2)], "need 2 blocks"),
    ],
)
def test_invalid_steps_are_rejected(seqs: list[ScheduledSequence], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_step(seqs, 4, "cpu")


def test_the_last_layer_computes_the_logits_rows_alone() -> None:
    # block size 4. A prompt chunk without logits (6 new), a prompt whose every row has logits (3 new
    # after 4 cached) and a decoding sequence (1 new after 5 cached).
    seqs = [
        ScheduledSequence([0, 1], 0, 6, needs_logits=False),
        ScheduledSequence([2, 3], 4, 3, all_logits=True),
        ScheduledSequence([4, 5], 5, 1),
    ]
    attn = build_step(seqs, 4, "cpu").attn
    rows = attn.output_rows
    assert rows is not None
    assert rows.attn is not None
    assert rows.indices is attn.logits_indices
    assert rows.indices.tolist() == [6, 7, 8, 9]
    assert rows.attn.slot_mapping.tolist() == [12, 13, 14, 21]  # the rows' own slots
    assert rows.attn.block_tables.tolist() == [[2, 3], [4, 5]]  # the sequences with logits rows
    assert rows.attn.context_lens.tolist() == [7, 6]
    assert rows.attn.cu_seqlens_q.tolist() == [0, 3, 4]
    one_each = build_step([seqs[0], ScheduledSequence([2, 3], 4, 3)], 4, "cpu").attn.output_rows
    assert one_each is not None
    assert one_each.attn is not None
    assert one_each.attn.is_decode  # one row per sequence: the decode shape
    assert one_each.indices.tolist() == [8]
    assert one_each.attn.context_lens.tolist() == [7]
    none_wanted = build_step([seqs[0]], 4, "cpu").attn.output_rows
    assert none_wanted is not None
    assert none_wanted.attn is None
    assert none_wanted.indices.numel() == 0
    assert build_step([seqs[2]], 4, "cpu").attn.output_rows is None  # every row has logits


def test_output_rows_must_be_the_logits_rows() -> None:
    attn = build_step([ScheduledSequence([0, 1], 0, 6)], 4, "cpu").attn
    with pytest.raises(ValueError, match="output_rows must be built for this logits_indices"):
        replace(attn, logits_indices=torch.arange(6))
    assert replace(attn, logits_indices=torch.arange(6), output_rows=None).output_rows is None
