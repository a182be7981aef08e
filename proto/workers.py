"""What a worker advertises about itself: identity (registration) and load (heartbeats)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.units import BlockCount, TokenCount


def check_worker_id(worker_id: str) -> None:
    """ValueError unless ``worker_id`` is 1-128 printable non-space characters, not starting with
    ``~`` (the index keeps gateways' pending hints under ``~<worker>``)."""
    if not 0 < len(worker_id) <= 128 or not worker_id.isprintable() or " " in worker_id:
        raise ValueError(f"worker id must be 1-128 printable characters without spaces: {worker_id!r}")
    if worker_id.startswith("~"):
        raise ValueError(f"worker id must not start with '~': {worker_id!r}")


MAX_ADAPTERS = 256  # LoRA adapters one worker record may list
_ADAPTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")


def check_adapter_id(adapter_id: str) -> None:
    """ValueError unless ``adapter_id`` is 1-128 letters, digits, ``.``, ``_``, ``/`` or ``-``, starting
    with a letter or digit (no ``:``: clients name an adapter as ``model:adapter``)."""
    if not isinstance(adapter_id, str) or not _ADAPTER_ID.fullmatch(adapter_id):
        raise ValueError(
            f"a LoRA adapter id is 1-128 letters, digits, '.', '_', '/' or '-', starting with a letter or"
            f" digit: {adapter_id!r}"
        )


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """Registration record. ``address`` is the worker's gRPC ``host:port``; ``fingerprint`` is its
    :meth:`CacheLayout.fingerprint`, which a gateway must match before routing to it; ``signature``
    proves the record was written by a holder of the deployment secret (:mod:`kvgate.proto.trust`;
    empty in a deployment without one). ``adapters``: the LoRA adapter ids it holds, sorted, each
    once (see :func:`check_adapter_id`); ``loadable_adapters``: those it loads when a request first
    names them (sorted, each once, none of them held at start)."""

    worker_id: WorkerId
    epoch: Epoch
    address: str
    fingerprint: str
    model_id: str
    metrics_address: str = ""
    node_id: str = ""
    signature: str = ""
    adapters: tuple[str, ...] = ()
    loadable_adapters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_worker_id(self.worker_id)
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")
        for name in ("adapters", "loadable_adapters"):
            object.__setattr__(self, name, _adapter_list(name, getattr(self, name)))
        if set(self.adapters) & set(self.loadable_adapters):
            raise ValueError("an adapter is either held or loadable, not both")

    @property
    def all_adapters(self) -> frozenset[str]:
        """The adapters requests to this worker may name: held or loadable."""
        return frozenset(self.adapters) | frozenset(self.loadable_adapters)


def _adapter_list(name: str, ids: tuple[str, ...]) -> tuple[str, ...]:
    ids = tuple(ids)
    if len(ids) > MAX_ADAPTERS:
        raise ValueError(f"{name}: a worker lists at most {MAX_ADAPTERS} adapters, got {len(ids)}")
    for adapter in ids:
        check_adapter_id(adapter)
    if list(ids) != sorted(set(ids)):
        raise ValueError(f"{name} must be sorted, each adapter once")
    return ids


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """Load figures a worker sends with every heartbeat. All counts are >= 0; zero totals mean
    "tier absent" (e.g. no CPU tier).

    GPU blocks are in use (``total - free``), cached but unused (``gpu_blocks_cached``: reusable
    until evicted) or empty (the rest of ``free``); CPU blocks hold a chunk (``total - free``) or are
    empty. The last three are monitoring counters of the worker's epoch (0 again at each new epoch;
    routing ignores them): blocks dropped at TTL expiry, unexpired blocks dropped to make room, and GPU
    blocks offloaded to the CPU tier to make room.
    """

    waiting_prefill_tokens: TokenCount = 0
    running_seqs: int = 0
    waiting_seqs: int = 0
    gpu_blocks_total: BlockCount = 0
    gpu_blocks_free: BlockCount = 0
    cpu_blocks_total: BlockCount = 0
    cpu_blocks_free: BlockCount = 0
    gpu_blocks_cached: BlockCount = 0
    evicted_ttl_blocks: BlockCount = 0
    evicted_pressure_blocks: BlockCount = 0
    offloaded_blocks: BlockCount = 0

    @property
    def kv_usage(self) -> float:
        """Fraction of GPU-tier blocks in use, in [0, 1]; 0 when the total is unknown."""
        if self.gpu_blocks_total <= 0:
            return 0.0
        return 1.0 - self.gpu_blocks_free / self.gpu_blocks_total
