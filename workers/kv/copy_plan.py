"""Block copies between the tiers, planned by the manager and executed by the engine once per step."""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.workers.kv.types import BlockId, BlockPair


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """The block copies of one engine step; ids index each tier's KV pool.

    The engine runs them with ``kernels.copy_blocks`` **before the step's forward**, and ``offload``
    **before** ``swap_in``: an offload reads a GPU block that a swap-in or the forward may overwrite in
    the same step, and a swap-in may read a CPU block that this step's offload fills. Within each list
    destinations are distinct and no block is both a source and a destination.
    """

    offload: tuple[BlockPair, ...] = ()  # (GPU src, CPU dst)
    swap_in: tuple[BlockPair, ...] = ()  # (CPU src, GPU dst)

    @property
    def empty(self) -> bool:
        return not self.offload and not self.swap_in


class CopyPlanBuilder:
    """Collects one step's copies; :meth:`build` hands them over and starts the next step's plan."""

    def __init__(self) -> None:
        self._offload: dict[BlockId, BlockId] = {}  # CPU dst -> GPU src
        self._swap_in: list[BlockPair] = []

    def offload(self, gpu_src: BlockId, cpu_dst: BlockId) -> None:
        self._offload[cpu_dst] = gpu_src

    def swap_in(self, cpu_src: BlockId, gpu_dst: BlockId) -> None:
        self._swap_in.append((cpu_src, gpu_dst))

    def cancel_offload_to(self, cpu_dst: BlockId) -> None:
        """Forgets the planned offload into ``cpu_dst``, whose copy was dropped again before the step
        ran (the copy would be wasted); a no-op when none is planned."""
        self._offload.pop(cpu_dst, None)

    def build(self) -> CopyPlan:
        """The plan so far; the builder is empty afterwards."""
        plan = CopyPlan(tuple((src, dst) for dst, src in self._offload.items()), tuple(self._swap_in))
        self._offload, self._swap_in = {}, []
        return plan
