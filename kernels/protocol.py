"""The interface every attention-kernel backend implements (see ``geometry`` for the cache layout).

Shared contract of all four operations:

- Inputs are never mutated, except the destination caches of ``write_kv`` and ``copy_blocks``.
- Attention accumulates in fp32 whatever the input dtype (fp32, fp16, bf16) and returns q's dtype.
- q and the caches share dtype and device; ``cu_seqlens_q``, ``context_lens`` and block tables are int32
  on that device, ``slot_mapping`` is int64.
- No operation validates tensor *values* (block ids in range, lengths consistent): that would make the
  host wait for the device. Out-of-range values are undefined behaviour.
- Quantised pools (int8 / fp8, see ``quant``): every operation takes the float32 scales
  ``[num_blocks, kv_heads]`` of K and V (keyword-only ``k_scale`` / ``v_scale``; ``src_scales`` /
  ``dst_scales`` for copies). ``write_kv`` quantises (growing and requantising a block's scale as
  ``quant`` describes), attention dequantises what it reads, copies move the scales with the blocks.
  Float pools take no scales. A backend that cannot handle quantised pools raises ``ValueError``.
- Score options of both attentions (keyword-only, None = off): ``softcap`` ``c`` turns every score
  ``s = q.k * scale`` into ``c * tanh(s / c)`` before masking (Gemma 2); ``window`` ``W`` is a sliding
  window: the query at position ``i`` sees positions ``max(0, i - W + 1) .. i`` only (``W`` tokens,
  itself included). A backend that does not implement an option raises ``ValueError`` when asked for it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class AttentionKernels(Protocol):
    """Paged attention, KV-cache write and block copy on one backend."""

    name: str

    def write_kv(
        self,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
        *,
        k_scale: torch.Tensor | None = None,
        v_scale: torch.Tensor | None = None,
    ) -> None:
        """Store token ``t`` of k, v ``[tokens, kv_heads, head_dim]`` at slot ``slot_mapping[t]``.

        Mutates the caches in place; a slot of -1 skips that token. Slots other than -1 must be distinct
        (two writes to one slot leave either value). Idempotent.
        """
        ...

    def prefill_attention(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        context_lens: torch.Tensor,
        scale: float,
        *,
        window: int | None = None,
        softcap: float | None = None,
        k_scale: torch.Tensor | None = None,
        v_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Causal attention of a varlen batch whose context may start with a cached prefix.

        q ``[total_q, heads, head_dim]``; sequence ``b`` owns rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]``
        (``Q_b`` tokens, possibly 0). ``context_lens[b]`` counts the cached prefix *and* the new tokens, so
        the queries sit at absolute positions ``context_lens[b] - Q_b .. context_lens[b] - 1`` and the one
        at position ``i`` attends to positions ``0..i``. The KV of every context token is already in the
        cache. Returns ``[total_q, heads, head_dim]`` in q's dtype.
        """
        ...

    def decode_attention(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        context_lens: torch.Tensor,
        scale: float,
        *,
        window: int | None = None,
        softcap: float | None = None,
        k_scale: torch.Tensor | None = None,
        v_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One new token per sequence: q ``[batch, heads, head_dim]`` attends to all ``context_lens[b]``
        (>= 1) tokens of its sequence (the last ``window`` of them with a window), its own KV included.
        Returns ``[batch, heads, head_dim]``."""
        ...

    def copy_blocks(
        self,
        src_k: torch.Tensor,
        src_v: torch.Tensor,
        dst_k: torch.Tensor,
        dst_v: torch.Tensor,
        src_ids: torch.Tensor,
        dst_ids: torch.Tensor,
        *,
        src_scales: tuple[torch.Tensor, torch.Tensor] | None = None,
        dst_scales: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        """Copy whole blocks ``src[src_ids[i]] -> dst[dst_ids[i]]`` for K and V; mutates dst only.

        The pools may live on different devices (GPU <-> CPU tier offload and swap-in). ``dst_ids`` must be
        distinct, and when src and dst are the same pool no block may be both a source and a destination.
        When it returns, the copy is ordered before later work on dst's device (the host may read a CPU
        dst at once).
        """
        ...
