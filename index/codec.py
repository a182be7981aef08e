"""How the Redis index encodes records and events as strings."""

from __future__ import annotations

import json
from dataclasses import asdict

from kvgate.proto.events import EventKind, Holding, KVEvent
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo, WorkerLoad

_MAX_MS = 10**13 - 1  # 2286-11-20: the last instant with 13 digits


def ms13(unix_ms: int) -> str:
    """A time as the scripts store it: 13 zero-padded digits, so string order is time order.
    Times past 2286 are clamped (they mean "never" here); negative ones mean "long expired"."""
    return f"{min(max(unix_ms, 0), _MAX_MS):013d}"


_OPS = {EventKind.STORED: "S", EventKind.OFFLOADED: "S", EventKind.EVICTED: "E", EventKind.CLEARED: "X"}


def event_args(event: KVEvent) -> tuple[str, str, str, str]:
    """The (op, hex, tier, expires_ms) quadruple apply.lua reads for one event."""
    chunk = event.chunk.hex() if event.chunk is not None else ""
    return _OPS[event.kind], chunk, event.tier.value, ms13(event.expires_at_ms)


def holding_args(holding: Holding) -> tuple[str, str, str]:
    """The (hex, tier, expires_ms) triple resync.lua reads for one holding."""
    return holding.chunk.hex(), holding.tier.value, ms13(holding.expires_at_ms)


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
