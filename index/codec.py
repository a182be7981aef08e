"""How the Redis index encodes records and events as strings, and decodes records back.

Records read from Redis are untrusted input: a newer kvgate may have written fields this one does not
know (a rolling upgrade: they are ignored), and anyone who can write to Redis can write anything
(a record that does not decode into valid values raises :class:`RecordError`, so the reader can skip
it instead of failing)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, fields
from typing import Any

from kvgate.proto.events import EventKind, Holding, KVEvent
from kvgate.proto.workers import WorkerInfo, WorkerLoad

_MAX_TTL_MS = 10**13  # about 317 years: "never", as far as the index is concerned

_OPS = {EventKind.STORED: "S", EventKind.OFFLOADED: "S", EventKind.EVICTED: "E", EventKind.CLEARED: "X"}


def ttl_ms(expires_at_ms: int, now_ms: int) -> str:
    """How long from ``now_ms`` a holding lasts, as the scripts read it: the writer's clock only
    measures a duration; Redis adds it to its own time. Negative: already expired."""
    return str(min(expires_at_ms - now_ms, _MAX_TTL_MS))


def event_args(event: KVEvent, now_ms: int) -> tuple[str, bytes, str, str]:
    """The (op, chunk, tier, ttl_ms) quadruple apply.lua reads for one event."""
    chunk = event.chunk if event.chunk is not None else b""
    return _OPS[event.kind], chunk, event.tier.value, ttl_ms(event.expires_at_ms, now_ms)


def holding_args(holding: Holding, now_ms: int) -> tuple[bytes, str, str]:
    """The (chunk, tier, ttl_ms) triple stage.lua reads for one holding."""
    return holding.chunk, holding.tier.value, ttl_ms(holding.expires_at_ms, now_ms)


def encode_info(info: WorkerInfo) -> str:
    return json.dumps(asdict(info), sort_keys=True)


class RecordError(ValueError):
    """A record in the index that does not decode into valid values."""


class BadRecords:
    """Warns once per bad record (a worker id and the record's exact contents), however often it is
    read; remembers at most ``limit`` of them (then starts over), so a flood of junk costs bounded
    memory and, at worst, a repeated warning."""

    def __init__(self, log: logging.Logger, limit: int = 1024) -> None:
        self._log = log
        self._limit = limit
        self._seen: set[tuple[str, int]] = set()

    def warn(self, worker_id: str, record: object, error: Exception) -> None:
        key = (worker_id, hash(repr(record)))
        if key in self._seen:
            return
        if len(self._seen) >= self._limit:
            self._seen.clear()
        self._seen.add(key)
        self._log.warning("skipping worker %r: its record in the index does not decode (%s)",
                          worker_id, error)  # fmt: skip


def decode_info(raw: str) -> WorkerInfo:
    """The registration record of ``raw``; fields it does not know are ignored. RecordError when it
    is not a JSON object of the right types and values."""
    found = _known(raw, WorkerInfo)
    epoch = found.get("epoch")
    if isinstance(epoch, str) and epoch.isdigit():  # as older writers may store it
        found["epoch"] = int(epoch)
    _check_types(found, _INFO_TYPES)
    for name in ("adapters", "loadable_adapters"):
        if name in found:
            if any(not isinstance(a, str) for a in found[name]):
                raise RecordError(f"{name} must be a list of strings")
            found[name] = tuple(found[name])
    return _build(WorkerInfo, found)


def encode_load(load: WorkerLoad) -> str:
    return json.dumps(asdict(load), sort_keys=True)


def decode_load(raw: str | None) -> WorkerLoad:
    """The load figures of ``raw`` (none yet: all zero); fields it does not know are ignored.
    RecordError when it is not a JSON object of non-negative integers."""
    if not raw:
        return WorkerLoad()
    found = _known(raw, WorkerLoad)
    _check_types(found, dict.fromkeys(found, int))
    negative = sorted(k for k, v in found.items() if v < 0)
    if negative:
        raise RecordError(f"load figures must be >= 0: {', '.join(negative)}")
    return _build(WorkerLoad, found)


_INFO_TYPES: dict[str, type] = {
    "worker_id": str, "epoch": int, "address": str, "fingerprint": str, "model_id": str,
    "metrics_address": str, "node_id": str, "signature": str, "adapters": list,
    "loadable_adapters": list,
}  # fmt: skip


def _known(raw: str, record: type) -> dict[str, Any]:
    """The fields of JSON object ``raw`` that ``record`` (a dataclass) has."""
    try:
        value = json.loads(raw)
    except (ValueError, TypeError, RecursionError) as exc:
        raise RecordError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RecordError(f"not a JSON object but {type(value).__name__}")
    names = {f.name for f in fields(record)}
    return {k: v for k, v in value.items() if k in names}


def _check_types(found: dict[str, Any], types: dict[str, type]) -> None:
    for name, kind in types.items():
        value = found.get(name)
        if name in found and (not isinstance(value, kind) or isinstance(value, bool)):
            raise RecordError(f"{name} must be {kind.__name__}, got {type(value).__name__}")


def _build(record: type, found: dict[str, Any]) -> Any:
    try:
        return record(**found)
    except (TypeError, ValueError) as exc:  # a missing field, or a value the record refuses
        raise RecordError(str(exc)) from None
