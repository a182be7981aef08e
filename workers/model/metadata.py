"""``AttentionMetadata``: how one forward pass's flattened tokens map onto sequences and cache slots.

The model runs a whole step (any mix of sequences) as one flat batch of ``T`` tokens: sequence ``b``
contributes the ``num_new`` tokens it computes this step, which follow its ``num_cached`` tokens whose
K/V are already in the paged cache (a prefix-cache hit, or earlier steps). Two shapes of step:

- **prefill** (some sequence has more than one new token): rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]``
  are sequence ``b``'s; attention goes through ``AttentionKernels.prefill_attention``.
- **decode** (every sequence has exactly one new token): row ``b`` is sequence ``b``;
  ``decode_attention``. ``cu_seqlens_q`` is None.

In both, every layer first writes the new tokens' K/V at ``slot_mapping`` and then attends over
``context_lens[b] = num_cached + num_new`` tokens read through ``block_tables[b]``. Logits are computed
only for the rows in ``logits_indices``: the last new token of each sequence that ``needs_logits``, and
every new token of one with ``all_logits`` (a prompt whose log-probabilities are asked for), so a step
returns ``[len(logits_indices), vocab]``: ``logit_rows`` rows per sequence, in batch order.

Only the logits rows need the last layer's output, so a step that computes more rows than it returns
carries ``output_rows``: those rows and their own attention (each sequence with logits rows attends from
its last ``logit_rows`` positions, in the decode shape when that is one row each). The last layer writes
every token's K/V, as every layer does, and computes attention, projections and feed-forward for those
rows alone: a cold prefill of ``n`` tokens runs its last layer for one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True, slots=True)
class AttentionMetadata:
    """Device tensors of one step (see the module docstring); immutable, built by ``build_step``."""

    slot_mapping: torch.Tensor  # int64 [T]: cache slot of each token's new K/V; -1 = do not store
    block_tables: torch.Tensor  # int32 [B, max_blocks]: padding entries are block 0, never read
    context_lens: torch.Tensor  # int32 [B]: cached + new tokens of each sequence
    cu_seqlens_q: torch.Tensor | None  # int32 [B + 1] in a prefill step; None in a decode step
    logits_indices: torch.Tensor  # int64 [B']: rows of the flat batch whose logits are returned
    output_rows: OutputRows | None = None  # the last layer's rows, when fewer than T (see above)

    def __post_init__(self) -> None:
        if self.output_rows is not None and self.output_rows.indices is not self.logits_indices:
            raise ValueError("output_rows must be built for this logits_indices (its indices are them)")

    @property
    def is_decode(self) -> bool:
        return self.cu_seqlens_q is None


@dataclass(frozen=True, slots=True)
class OutputRows:
    """The rows a step's last layer computes in full: ``indices`` int64 ``[R]``, the flat batch's
    ``logits_indices``; ``attn`` their attention (queries of the sequences that have such rows, over
    the same block tables and context lengths; ``slot_mapping`` the rows' own slots), None when ``R`` is
    0. Immutable."""

    indices: torch.Tensor
    attn: AttentionMetadata | None


@dataclass(frozen=True, slots=True)
class ScheduledSequence:
    """One sequence's part of a step, as the scheduler sees it (host side)."""

    block_table: Sequence[int]  # ids of the blocks holding tokens 0, B, 2B, ... (B = block size)
    num_cached: int  # tokens whose K/V is already in the cache
    num_new: int  # tokens computed this step (>= 1), positions num_cached .. num_cached + num_new - 1
    needs_logits: bool = True  # False for a prompt chunk that is not the prompt's last
    adapter_id: str = ""  # the LoRA adapter its tokens run under ("": the base model)
    all_logits: bool = False  # logits of every new token, not only of the last (prompt log-probabilities)

    @property
    def logit_rows(self) -> int:
        """How many logits rows the step returns for this sequence (its rows come last-token last)."""
        return self.num_new if self.all_logits else int(self.needs_logits)


@dataclass(frozen=True, slots=True)
class StepInputs:
    """What ``forward`` takes besides the token ids and the caches."""

    positions: torch.Tensor  # int64 [T]
    attn: AttentionMetadata


def build_step(seqs: Sequence[ScheduledSequence], block_size: int, device: torch.device | str) -> StepInputs:
    """Positions and attention metadata of one step, built on the host and copied to ``device`` once.
    Raises ``ValueError`` when a sequence computes no token or its block table is too short."""
    if not seqs:
        raise ValueError("a step needs at least one sequence")
    for seq in seqs:
        _check(seq, block_size)
    positions = [np.arange(s.num_cached, s.num_cached + s.num_new) for s in seqs]  # [num_new] each
    tables = [np.asarray(s.block_table, dtype=np.int64) for s in seqs]
    slots = [t[p // block_size] * block_size + p % block_size for t, p in zip(tables, positions, strict=True)]
    num_new = np.array([s.num_new for s in seqs], dtype=np.int64)
    cu = np.concatenate([[0], np.cumsum(num_new)])  # [B + 1]
    decode = bool((num_new == 1).all())
    table, slot = _padded(tables), np.concatenate(slots)
    lens = np.array([s.num_cached + s.num_new for s in seqs])
    logits = _logits_indices(seqs, cu)
    indices = _to(logits, torch.int64, device)
    attn = AttentionMetadata(
        slot_mapping=_to(slot, torch.int64, device),
        block_tables=_to(table, torch.int32, device),
        context_lens=_to(lens, torch.int32, device),
        cu_seqlens_q=None if decode else _to(cu, torch.int32, device),
        logits_indices=indices,
        output_rows=None if len(logits) == cu[-1] else _output_rows(seqs, indices, table, lens, slot[logits]),
    )
    return StepInputs(_to(np.concatenate(positions), torch.int64, device), attn)


def _output_rows(
    seqs: Sequence[ScheduledSequence],
    indices: torch.Tensor,
    table: np.ndarray,
    lens: np.ndarray,
    slots: np.ndarray,
) -> OutputRows:
    """The logits rows ``indices`` (whose cache slots are ``slots``) and their attention: the sequences
    that have such rows, each querying from its last ``logit_rows`` positions (one row each: the decode
    shape)."""
    kept = [b for b, s in enumerate(seqs) if s.logit_rows]
    if not kept:
        return OutputRows(indices, None)
    device = indices.device
    counts = np.array([seqs[b].logit_rows for b in kept], dtype=np.int64)
    cu = np.concatenate([[0], np.cumsum(counts)])
    attn = AttentionMetadata(
        slot_mapping=_to(slots, torch.int64, device),
        block_tables=_to(table[kept], torch.int32, device),
        context_lens=_to(lens[kept], torch.int32, device),
        cu_seqlens_q=None if (counts == 1).all() else _to(cu, torch.int32, device),
        logits_indices=_to(np.arange(cu[-1]), torch.int64, device),
    )
    return OutputRows(indices, attn)


def _logits_indices(seqs: Sequence[ScheduledSequence], cu: np.ndarray) -> np.ndarray:
    """The flat rows whose logits a step returns: each sequence's last ``logit_rows`` new tokens."""
    rows = [np.arange(cu[b + 1] - s.logit_rows, cu[b + 1]) for b, s in enumerate(seqs)]
    return np.concatenate(rows).astype(np.int64)


def _check(seq: ScheduledSequence, block_size: int) -> None:
    if seq.num_new < 1 or seq.num_cached < 0:
        raise ValueError(f"a sequence must compute >= 1 token after >= 0 cached ones, got {seq}")
    needed = -(-(seq.num_cached + seq.num_new) // block_size)
    if len(seq.block_table) < needed:
        raise ValueError(
            f"{seq.num_cached + seq.num_new} tokens need {needed} blocks, the table has "
            f"{len(seq.block_table)}"
        )


def _padded(tables: list[np.ndarray]) -> np.ndarray:
    """Block tables as one ``[B, max_blocks]`` array, short rows padded with block 0."""
    out = np.zeros((len(tables), max(len(t) for t in tables)), dtype=np.int64)
    for row, table in zip(out, tables, strict=True):
        row[: len(table)] = table
    return out


def _to(values: Sequence[int] | np.ndarray, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values), dtype=dtype).to(device, non_blocking=True)
