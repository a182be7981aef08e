"""``--lora ID=PATH[@I,J,...]``: a LoRA adapter (a PEFT folder) and the workers that load it at start.

Without ``@`` every worker loads it; with it, only workers ``worker-I``, ``worker-J``, ... The path is
read by each worker on its own node, so on a multi-node cluster it must exist on every node that runs
one of those workers (a shared filesystem or the same copy everywhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kvgate.proto.workers import check_adapter_id

_PLACED = re.compile(r"(?P<rest>.+)@(?P<workers>\d+(?:,\d+)*)")


@dataclass(frozen=True, slots=True)
class LoraPlacement:
    """One adapter: its id (what clients name, as ``model:id`` or ``id``), its PEFT folder, and the
    worker indices that load it (None: every worker)."""

    adapter_id: str
    path: Path
    workers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        check_adapter_id(self.adapter_id)

    def on(self, worker: int) -> bool:
        return self.workers is None or worker in self.workers


def parse_lora(text: str) -> LoraPlacement:
    """``ID=PATH`` or ``ID=PATH@I,J``; ValueError with the expected form otherwise."""
    adapter_id, sep, rest = text.partition("=")
    if not sep or not adapter_id or not rest:
        raise ValueError(f"--lora takes ID=PATH or ID=PATH@WORKERS (e.g. sql=/lora/sql@0,1), got {text!r}")
    workers = None
    placed = _PLACED.fullmatch(rest)
    if placed is not None:
        rest, workers = placed["rest"], tuple(sorted({int(i) for i in placed["workers"].split(",")}))
    return LoraPlacement(adapter_id, Path(rest).expanduser(), workers)


def adapters_of(
    placements: tuple[LoraPlacement, ...], worker: int, count: int
) -> tuple[tuple[str, Path], ...]:
    """What worker ``worker`` of ``count`` loads: ``(id, folder)`` pairs. ValueError when a placement
    names a worker index the cluster does not have, or two placements share an id."""
    ids = [p.adapter_id for p in placements]
    if len(set(ids)) != len(ids):
        raise ValueError(f"--lora ids must differ, got {', '.join(sorted(ids))}")
    for p in placements:
        beyond = [i for i in p.workers or () if i >= count]
        if beyond:
            raise ValueError(f"--lora {p.adapter_id}: there is no worker {beyond[0]} ({count} workers)")
    return tuple((p.adapter_id, p.path) for p in placements if p.on(worker))
