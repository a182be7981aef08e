"""Builders for kernel tests and benchmarks: random paged batches with scattered block tables, and dense
(unpaged) attention to check against.

Every cache slot that no sequence owns, including the tail of each sequence's last block and the block
used to pad block tables, holds NaN: a kernel that reads past a context leaks NaN into its output instead
of passing by luck. Building is vectorised, so benchmark-sized pools (GBs) are made on the device quickly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvgate.proto.layout import DEFAULT_BLOCK_SIZE


@dataclass(frozen=True, slots=True)
class PagedBatch:
    """One varlen batch over a paged KV pool (sequence ``b`` has ``query_lens[b]`` new tokens at the end
    of ``context_lens[b]``)."""

    q: torch.Tensor  # [total_q, heads, head_dim]
    k_cache: torch.Tensor  # [num_blocks, block_size, kv_heads, head_dim]
    v_cache: torch.Tensor  # [num_blocks, block_size, kv_heads, head_dim]
    block_tables: torch.Tensor  # int32 [batch, max_blocks]
    cu_seqlens_q: torch.Tensor  # int32 [batch + 1]
    context_lens: torch.Tensor  # int32 [batch]

    def dense_kv(self, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequence ``b``'s context as unpaged k, v ``[context_len, kv_heads, head_dim]``."""
        one = slice(b, b + 1)
        slots = context_slots(self.block_tables[one], self.context_lens[one], self.k_cache.shape[1])
        return self.k_cache.flatten(0, 1)[slots], self.v_cache.flatten(0, 1)[slots]

    def queries(self, b: int) -> torch.Tensor:
        """Sequence ``b``'s rows of q ``[query_len, heads, head_dim]``."""
        return self.q[int(self.cu_seqlens_q[b]) : int(self.cu_seqlens_q[b + 1])]


def random_paged_batch(
    context_lens: Sequence[int],
    query_lens: Sequence[int],
    *,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    seed: int = 0,
    spare_blocks: int = 3,
) -> PagedBatch:
    """Random q and KV for ``len(context_lens)`` sequences whose blocks are scattered through the pool in
    random order; block tables are padded with a NaN-filled block. Deterministic in ``seed``."""
    if any(q > c for q, c in zip(query_lens, context_lens, strict=True)):
        raise ValueError("a sequence cannot have more query tokens than context tokens")
    gen = torch.Generator(device=device).manual_seed(seed)
    lens = torch.tensor(list(context_lens), dtype=torch.int32, device=device)
    needed = (lens + block_size - 1) // block_size
    num_blocks = int(needed.sum()) + spare_blocks + 1
    tables = _scattered_tables(needed, num_blocks, gen)
    pool_shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache, v_cache = (_poisoned_pool(pool_shape, tables, lens, dtype, gen) for _ in "kv")
    cu = torch.zeros(len(query_lens) + 1, dtype=torch.int32, device=device)
    cu[1:] = torch.tensor(list(query_lens), dtype=torch.int32, device=device).cumsum(0)
    q = torch.randn(sum(query_lens), num_heads, head_dim, generator=gen, device=device).to(dtype)
    return PagedBatch(q, k_cache, v_cache, tables, cu, lens)


def context_slots(block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int) -> torch.Tensor:
    """Slots of every context token, sequence after sequence, in position order: int64 ``[sum(lens)]``."""
    width = block_tables.shape[1] * block_size
    pos = torch.arange(width, device=block_tables.device)  # [width]
    slots = block_tables.long()[:, pos // block_size] * block_size + pos % block_size  # [batch, width]
    return slots[pos[None, :] < context_lens[:, None].long()]


def _scattered_tables(needed: torch.Tensor, num_blocks: int, gen: torch.Generator) -> torch.Tensor:
    """int32 [batch, max(needed)]: sequence b owns ``needed[b]`` distinct random blocks; the rest of its row
    (padding) and no sequence's entry is block ``order[0]``."""
    order = torch.randperm(num_blocks, generator=gen, device=needed.device)
    width = max(1, int(needed.max())) if needed.numel() else 1
    starts = 1 + needed.cumsum(0) - needed  # first owned index into order, per sequence
    col = torch.arange(width, device=needed.device)
    index = (starts[:, None] + col[None, :]).clamp(max=num_blocks - 1)
    tables = torch.where(col[None, :] < needed[:, None], order[index], order[0])
    return tables.to(torch.int32)


def _poisoned_pool(
    shape: tuple[int, int, int, int],
    tables: torch.Tensor,
    lens: torch.Tensor,
    dtype: torch.dtype,
    gen: torch.Generator,
) -> torch.Tensor:
    """Random values in the slots the sequences own, NaN everywhere else."""
    pool = torch.randn(shape, generator=gen, device=tables.device).to(dtype)
    owned = torch.zeros(shape[0] * shape[1], dtype=torch.bool, device=tables.device)
    owned[context_slots(tables, lens, shape[1])] = True
    pool.flatten(0, 1)[~owned] = float("nan")
    return pool


def dense_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    *,
    window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Textbook causal attention in fp32 for one sequence: q ``[Q, heads, D]`` are the last Q positions of
    k, v ``[L, kv_heads, D]``; GQA by ``repeat_interleave``; with a sliding ``window`` a query sees its last
    ``window`` positions only, ``softcap`` caps the scores (see the protocol). Returns ``[Q, heads, D]``."""
    num_q, num_heads, _ = q.shape
    context_len, num_kv_heads, _ = k.shape
    k = k.float().repeat_interleave(num_heads // num_kv_heads, dim=1)  # [L, heads, D]
    v = v.float().repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * scale  # [heads, Q, L]
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    q_pos = torch.arange(context_len - num_q, context_len, device=q.device)[:, None]
    k_pos = torch.arange(context_len, device=q.device)[None, :]
    visible = (k_pos <= q_pos) & (k_pos > q_pos - (window or context_len))  # [Q, L]
    scores = scores.masked_fill(~visible, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
