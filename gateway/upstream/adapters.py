"""``AdapterResidency``: which workers hold a LoRA adapter now, as far as this gateway can tell.

A worker's record lists the adapters it held at start and those it loads when a request first names
them. Workers never unload an adapter, so once one of this gateway's requests for a loadable adapter
reached a worker's first token there, that worker (that incarnation) holds it. A worker that would
have to load the adapter starts the request ``load_s`` later: the router counts that in its TTFT
estimate (:meth:`AdapterResidency.startup`), so a holder is preferred unless its queue is longer.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvgate.index.types import WorkerStatus
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo


class AdapterResidency:
    """What this gateway learned from its own requests; bounded by :meth:`retain`. ``load_s``: the
    estimated seconds a worker takes to load an adapter it lists as loadable."""

    def __init__(self, load_s: float = 2.0) -> None:
        self.load_s = load_s
        self._loaded: set[tuple[WorkerId, Epoch, str]] = set()

    def served(self, info: WorkerInfo, adapter_id: str) -> None:
        """``info``'s worker produced a token for a request of ``adapter_id``: it holds it now."""
        if adapter_id and adapter_id in info.loadable_adapters:
            self._loaded.add((info.worker_id, info.epoch, adapter_id))

    def holds(self, info: WorkerInfo, adapter_id: str) -> bool:
        return adapter_id in info.adapters or (info.worker_id, info.epoch, adapter_id) in self._loaded

    def startup(self, workers: Iterable[WorkerStatus], adapter_id: str) -> dict[WorkerId, float]:
        """``load_s`` for each of ``workers`` (all able to serve ``adapter_id``) that does not hold it
        yet; empty without an adapter."""
        if not adapter_id:
            return {}
        return {w.info.worker_id: self.load_s for w in workers if not self.holds(w.info, adapter_id)}

    def retain(self, known: Iterable[WorkerInfo]) -> None:
        """Forgets incarnations no longer known (restarted workers start without loaded adapters)."""
        alive = {(info.worker_id, info.epoch) for info in known}
        self._loaded = {entry for entry in self._loaded if entry[:2] in alive}
