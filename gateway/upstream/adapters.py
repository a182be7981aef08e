"""``AdapterResidency``: which workers hold a LoRA adapter now, as far as this gateway can tell.

A worker's record lists the adapters it held at start and those it loads when a request first names
them. Workers never unload an adapter, so once one of this gateway's requests for a loadable adapter
reached a worker's first token there, that worker (that incarnation) holds it. Requests for an adapter
go to workers holding it when there are any, and to workers that can load it only when there are none
(or all of those are busy or failing): a load costs far more than a prefill.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvgate.index.types import WorkerStatus
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo


class AdapterResidency:
    """What this gateway learned from its own requests; bounded by :meth:`retain`."""

    def __init__(self) -> None:
        self._loaded: set[tuple[WorkerId, Epoch, str]] = set()

    def served(self, info: WorkerInfo, adapter_id: str) -> None:
        """``info``'s worker produced a token for a request of ``adapter_id``: it holds it now."""
        if adapter_id and adapter_id in info.loadable_adapters:
            self._loaded.add((info.worker_id, info.epoch, adapter_id))

    def holds(self, info: WorkerInfo, adapter_id: str) -> bool:
        return adapter_id in info.adapters or (info.worker_id, info.epoch, adapter_id) in self._loaded

    def prefer(self, workers: list[WorkerStatus], adapter_id: str) -> list[WorkerStatus]:
        """Of ``workers`` (all able to serve ``adapter_id``), those holding it, else all of them."""
        if not adapter_id:
            return workers
        return [w for w in workers if self.holds(w.info, adapter_id)] or workers

    def retain(self, known: Iterable[WorkerInfo]) -> None:
        """Forgets incarnations no longer known (restarted workers start without loaded adapters)."""
        alive = {(info.worker_id, info.epoch) for info in known}
        self._loaded = {entry for entry in self._loaded if entry[:2] in alive}
