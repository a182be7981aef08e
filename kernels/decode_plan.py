"""``DecodePlan``: what a decode step's attention reads, worked out once per step instead of per layer.

Every layer of a step attends through the same block tables and lengths; only the pools differ. The
plan holds the rows to gather (head-major, see :func:`head_major_rows`), the padded rows to zero and the
mask of the positions each query sees. ``PlanMemo`` keeps the plans of the current step (see
``step_memo``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvgate.kernels.step_memo import StepMemo


@dataclass(frozen=True, slots=True)
class DecodePlan:
    """``rows``: int64 ``[B * kv_heads * span]``; ``padded_rows``: the rows to zero (None: none);
    ``mask``: bool ``[B, 1, 1, span]`` of the visible positions (None: all are)."""

    rows: torch.Tensor
    span: int
    padded_rows: torch.Tensor | None
    mask: torch.Tensor | None


def head_major_rows(block_tables: torch.Tensor, block_size: int, kv_heads: int) -> torch.Tensor:
    """The rows (of ``head_dim`` values) of a ``[num_blocks * block_size * kv_heads, head_dim]`` view of
    the pool that hold ``[B, kv_heads, T, head_dim]`` in order: token ``t`` of sequence ``b``, kv head
    ``h`` is row ``(table[b, t // bs] * bs + t % bs) * kv_heads + h``. One gather by these rows reads each
    row once and writes the heads apart, so attention reads dense memory."""
    device = block_tables.device
    offsets = torch.arange(block_size, device=device)[None, :] * kv_heads  # [1, bs]
    within = offsets + torch.arange(kv_heads, device=device)[:, None]  # [kvH, bs]
    base = block_tables.long() * (block_size * kv_heads)  # [B, blocks]
    return (base[:, None, :, None] + within[None, :, None, :]).reshape(-1)  # [B, kvH, blocks, bs]


def build_plan(
    block_tables: torch.Tensor, context_lens: torch.Tensor, window: int | None, block_size: int, kv_heads: int
) -> DecodePlan:
    """The plan of one decode call: the tokens each sequence's query sees (its last ``window`` with a
    window, else all), padded to the longest run (``span`` tokens). Runs of one length (a single
    sequence, a batch that started together, contexts all past the window) need no padding and no
    mask; tokens before every sequence's window are never read."""
    batch = block_tables.shape[0]
    lens = context_lens.tolist()  # one read of B lengths decides which masks the step needs
    starts = [0 if window is None else max(0, n - window) for n in lens]
    spans = [n - s for n, s in zip(lens, starts, strict=True)]
    span, first = max(spans), min(starts) // block_size
    blocks = -(-max(lens) // block_size) - first
    rows = head_major_rows(block_tables[:, first : first + blocks], block_size, kv_heads)
    rows = rows.view(batch, kv_heads, blocks * block_size)  # whole blocks, from block ``first`` on
    offsets = [s - first * block_size for s in starts]
    if len(set(offsets)) == 1 and min(spans) == span:
        return DecodePlan(rows[:, :, offsets[0] : offsets[0] + span].reshape(-1), span, None, None)
    device = block_tables.device
    j = torch.arange(span, device=device)
    at = (torch.tensor(offsets, device=device)[:, None] + j).clamp_(max=blocks * block_size - 1)  # [B, T]
    rows = rows.gather(2, at[:, None, :].expand(batch, kv_heads, span)).reshape(-1)
    if min(spans) == span:
        return DecodePlan(rows, span, None, None)
    padding = j[None, :] >= torch.tensor(spans, device=device)[:, None]  # [B, T]
    # stale (even NaN) values in padded rows would survive a mask: 0 * NaN is NaN, so they are zeroed
    padded_rows = padding[:, None, :].expand(batch, kv_heads, span).reshape(-1).nonzero().squeeze(1)
    return DecodePlan(rows, span, padded_rows, (~padding)[:, None, None, :])


class PlanMemo:
    """The plans of the step in progress (one per distinct window), see :class:`StepMemo`."""

    def __init__(self) -> None:
        self._memo: StepMemo[DecodePlan] = StepMemo()

    def plan(
        self, block_tables: torch.Tensor, context_lens: torch.Tensor, window: int | None, block_size: int,
        kv_heads: int,
    ) -> DecodePlan:  # fmt: skip
        return self._memo.get(
            (block_tables, context_lens),
            (window, block_size, kv_heads),
            lambda: build_plan(block_tables, context_lens, window, block_size, kv_heads),
        )


class StoredSlots:
    """Whether a step's slot mapping stores every token (no slot -1), checked once per step (see
    :class:`StepMemo`) for all its layers."""

    def __init__(self) -> None:
        self._memo: StepMemo[bool] = StepMemo()

    def all_stored(self, slot_mapping: torch.Tensor) -> bool:
        """Whether every entry of ``slot_mapping`` is a slot (>= 0)."""
        return self._memo.get((slot_mapping,), "stored", lambda: bool((slot_mapping >= 0).all()))
