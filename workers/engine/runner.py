"""Executes a scheduled step on the model: the step's block copies between the tiers, then one forward."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.kv import BlockPair, CopyPlan
from kvgate.workers.model import DecoderModel, KVCache, ScheduledSequence, build_step
from kvgate.workers.model.lora import AdapterSet, LoraBatch


class ModelRunner:
    """The model and both KV tiers (``gpu`` on the model's device, ``cpu`` in host memory; block ids of
    a :class:`CopyPlan` index them), and the LoRA adapters sequences may run under. Holds no
    scheduling state."""

    def __init__(
        self,
        model: DecoderModel,
        kernels: AttentionKernels,
        gpu: list[KVCache],
        cpu: list[KVCache],
        block_size: int,
        adapters: AdapterSet | None = None,
    ) -> None:
        self.model, self.kernels = model, kernels
        self.adapters = adapters if adapters is not None else AdapterSet()
        self.gpu, self.cpu = gpu, cpu
        self.block_size = block_size
        self.device = model.embed.weight.device

    def copy(self, plan: CopyPlan) -> None:
        """Runs ``plan``: every offload (GPU -> CPU), then every swap-in (CPU -> GPU), all layers (the
        scales of quantised blocks move with them).

        The order is the plan's contract: an offload reads a GPU block that a swap-in may overwrite,
        and a swap-in may read a CPU block that an offload of the same step fills."""
        if plan.offload:
            self._copy(self.gpu, self.cpu, plan.offload)
        if plan.swap_in:
            self._copy(self.cpu, self.gpu, plan.swap_in)

    def _copy(self, src: list[KVCache], dst: list[KVCache], pairs: tuple[BlockPair, ...]) -> None:
        src_ids = torch.tensor([s for s, _ in pairs], dtype=torch.int64)  # [n]
        dst_ids = torch.tensor([d for _, d in pairs], dtype=torch.int64)  # [n]
        for s, d in zip(src, dst, strict=True):
            self.kernels.copy_blocks(
                s.k, s.v, d.k, d.v, src_ids, dst_ids, src_scales=s.scales, dst_scales=d.scales
            )

    def forward(self, work: Sequence[ScheduledSequence], input_ids: Sequence[int]) -> torch.Tensor:
        """Computes every scheduled token (``input_ids``: each sequence's new tokens, in batch order)
        and writes their K/V to the GPU tier; returns logits ``[B', vocab]``: each sequence's
        ``logit_rows`` rows (its last token's when it ``needs_logits``, every new token's with
        ``all_logits``), in batch order."""
        step = build_step(work, self.block_size, self.device)
        ids = torch.tensor(input_ids, dtype=torch.int64).to(self.device, non_blocking=True)  # [T]
        lora = self._lora(work)
        with torch.inference_mode():
            return self.model(ids, step.positions, step.attn, self.gpu, lora)

    def _lora(self, work: Sequence[ScheduledSequence]) -> LoraBatch | None:
        """Which rows run under which adapter; None when no sequence of the step has one."""
        if not any(w.adapter_id for w in work):
            return None
        spans = [(self.adapters.get(w.adapter_id) if w.adapter_id else None, w.num_new) for w in work]
        return LoraBatch.build(spans, self.device)
