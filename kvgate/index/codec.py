"""How the Redis index encodes records and events as strings."""

from __future__ import annotations

import json
from dataclasses import asdict

from kvgate.proto.events import EventKind, Holding, KVEvent
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad

_OPS = {EventKind.STORED: "S", EventKind.OFFLOADED: "S", EventKind.EVICTED: "E", EventKind.CLEARED: "X"}


def event_args(event: KVEvent) -> tuple[str, str, str, str]:
    """The (op, hex, tier, expires_ms) quadruple apply.lua reads for one event."""
    chunk = event.chunk.hex() if event.chunk is not None else ""
    return _OPS[event.kind], chunk, event.tier.value, str(event.expires_at_ms)


def holding_args(holding: Holding) -> tuple[str, str, str]:
    """The (hex, tier, expires_ms) triple resync.lua reads for one holding."""
    return holding.chunk.hex(), holding.tier.value, str(holding.expires_at_ms)


def encode_info(info: WorkerInfo) -> str:
    return json.dumps(asdict(info), sort_keys=True)


def decode_info(raw: str) -> WorkerInfo:
    fields = json.loads(raw)
    fields["worker_id"] = WorkerId(fields["worker_id"])
    fields["epoch"] = Epoch(int(fields["epoch"]))
    return WorkerInfo(**fields)


def encode_load(load: WorkerLoad) -> str:
    return json.dumps(asdict(load), sort_keys=True)


def decode_load(raw: str | None) -> WorkerLoad:
    return WorkerLoad(**json.loads(raw)) if raw else WorkerLoad()
