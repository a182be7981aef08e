"""The one module that converts between kvgate's domain types and their protobuf messages.

Every converted type ``T`` has a pair ``t_to_proto(value) -> message`` and ``t_from_proto(message) -> T``
(enums: ``-> int`` and ``(int) -> Enum``). All functions are pure: they build new objects and mutate
neither argument.

- ``*_from_proto`` raises ValueError, naming the field, for what a domain value cannot be: an enum value
  that is unknown or UNSPECIFIED, a chunk hash that is not 16 bytes, an empty required string (proto3
  cannot mark fields required, so empty means "the sender forgot it"), an event batch with seq 0, and
  anything the domain type's own validation rejects. Semantic relations the domain types leave open
  (e.g. free <= total blocks) are not checked here.
- ``*_to_proto`` raises ValueError for what the wire cannot carry: a PENDING tier, a malformed chunk hash,
  an integer outside its field's range.

Round-trip law, checked by ``tests/proto/test_convert.py``: for every valid domain value ``v``,
``t_from_proto(parse(serialize(t_to_proto(v)))) == v``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import TypeVar

from kvgate.proto import common_pb2
from kvgate.proto.constraint import ConstraintKind, OutputConstraint
from kvgate.proto.events import (
    MAX_ADMISSION_CHUNKS,
    Admission,
    EventBatch,
    EventKind,
    Holding,
    KVEvent,
    Snapshot,
)
from kvgate.proto.ids import CHUNK_HASH_BYTES, ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.sampling import CacheHint, FinishReason, SamplingParams, TokenLogprob, Usage
from kvgate.proto.workers import WorkerInfo, WorkerLoad

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V", bound=Hashable)

_TIER_TO_PROTO: Mapping[Tier, common_pb2.Tier] = {
    Tier.GPU: common_pb2.TIER_GPU,
    Tier.CPU: common_pb2.TIER_CPU,
}
_FINISH_TO_PROTO: Mapping[FinishReason, common_pb2.FinishReason] = {
    FinishReason.STOP: common_pb2.FINISH_REASON_STOP,
    FinishReason.LENGTH: common_pb2.FINISH_REASON_LENGTH,
    FinishReason.ABORT: common_pb2.FINISH_REASON_ABORT,
    FinishReason.ERROR: common_pb2.FINISH_REASON_ERROR,
}
_KIND_TO_PROTO: Mapping[EventKind, common_pb2.EventKind] = {
    EventKind.STORED: common_pb2.EVENT_KIND_STORED,
    EventKind.OFFLOADED: common_pb2.EVENT_KIND_OFFLOADED,
    EventKind.EVICTED: common_pb2.EVENT_KIND_EVICTED,
    EventKind.CLEARED: common_pb2.EVENT_KIND_CLEARED,
}
_CONSTRAINT_TO_PROTO: Mapping[ConstraintKind, common_pb2.ConstraintKind] = {
    ConstraintKind.JSON_SCHEMA: common_pb2.CONSTRAINT_KIND_JSON_SCHEMA,
    ConstraintKind.LARK: common_pb2.CONSTRAINT_KIND_LARK,
}
_TIER_FROM_PROTO = {v: k for k, v in _TIER_TO_PROTO.items()}
_CONSTRAINT_FROM_PROTO = {v: k for k, v in _CONSTRAINT_TO_PROTO.items()}
_FINISH_FROM_PROTO = {v: k for k, v in _FINISH_TO_PROTO.items()}
_KIND_FROM_PROTO = {v: k for k, v in _KIND_TO_PROTO.items()}

# Kinds whose tier carries no meaning: on the wire their tier may be UNSPECIFIED.
_TIERLESS_KINDS = frozenset({EventKind.EVICTED, EventKind.CLEARED})
# Sampling fields that are proto3 `optional`: absent on the wire = the SamplingParams default.
_OPTIONAL_SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "seed", "presence_penalty", "frequency_penalty",
                             "repetition_penalty", "min_p", "logprobs", "prompt_logprobs")  # fmt: skip
# Plain counter records: the proto fields carry the same names as the dataclass fields.
_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))
_LOAD_FIELDS = tuple(f.name for f in dataclasses.fields(WorkerLoad))


# --- enums -------------------------------------------------------------------------------------------


def tier_to_proto(tier: Tier) -> common_pb2.Tier:
    """GPU or CPU as the wire enum; ValueError for PENDING (a gateway-only hint, never sent as a tier)."""
    return _lookup(_TIER_TO_PROTO, tier, "tier")


def tier_from_proto(value: int) -> Tier:
    """The wire tier as :class:`Tier`; ValueError for UNSPECIFIED or an unknown number."""
    return _lookup(_TIER_FROM_PROTO, value, "tier")


def finish_reason_to_proto(reason: FinishReason) -> common_pb2.FinishReason:
    """The wire enum of ``reason``."""
    return _lookup(_FINISH_TO_PROTO, reason, "finish_reason")


def finish_reason_from_proto(value: int) -> FinishReason:
    """The wire finish reason as :class:`FinishReason`; ValueError for UNSPECIFIED or unknown."""
    return _lookup(_FINISH_FROM_PROTO, value, "finish_reason")


# --- events ------------------------------------------------------------------------------------------


def kv_event_to_proto(event: KVEvent) -> common_pb2.KVEvent:
    """One event; the tier and expiry are always written, even where they carry no meaning."""
    return common_pb2.KVEvent(
        kind=_lookup(_KIND_TO_PROTO, event.kind, "event kind"),
        chunk=b"" if event.chunk is None else _chunk(event.chunk, "event chunk"),
        tier=tier_to_proto(event.tier),
        expires_at_ms=event.expires_at_ms,
    )


def kv_event_from_proto(msg: common_pb2.KVEvent) -> KVEvent:
    """One event. An UNSPECIFIED tier is accepted only for EVICTED and CLEARED (it becomes the
    :class:`KVEvent` default); the chunk must be empty for CLEARED and 16 bytes otherwise."""
    kind = _lookup(_KIND_FROM_PROTO, msg.kind, "event kind")
    tier_kwarg: dict[str, Tier] = {}
    if not (kind in _TIERLESS_KINDS and msg.tier == common_pb2.TIER_UNSPECIFIED):
        tier_kwarg["tier"] = tier_from_proto(msg.tier)
    return KVEvent(kind, _event_chunk(kind, msg.chunk), expires_at_ms=msg.expires_at_ms, **tier_kwarg)


def event_batch_to_proto(batch: EventBatch) -> common_pb2.EventBatch:
    """One batch with its events in order."""
    return common_pb2.EventBatch(
        worker_id=batch.worker_id,
        epoch=batch.epoch,
        seq=batch.seq,
        events=[kv_event_to_proto(e) for e in batch.events],
    )


def event_batch_from_proto(msg: common_pb2.EventBatch) -> EventBatch:
    """One batch; ValueError for an empty worker_id or seq 0 (batches count from 1)."""
    if msg.seq == 0:
        raise ValueError("event batch seq must be >= 1 (0 means unset)")
    return EventBatch(
        worker_id=WorkerId(_required(msg.worker_id, "event batch worker_id")),
        epoch=Epoch(msg.epoch),
        seq=SeqNo(msg.seq),
        events=tuple(kv_event_from_proto(e) for e in msg.events),
    )


def admission_to_proto(admission: Admission) -> common_pb2.Admission:
    """A worker's admission hint."""
    return common_pb2.Admission(
        worker_id=admission.worker_id,
        epoch=admission.epoch,
        pending=list(admission.pending),
        load=worker_load_to_proto(admission.load),
    )


def admission_from_proto(msg: common_pb2.Admission) -> Admission:
    """A worker's admission hint; ValueError for an empty worker_id, a chunk that is not 16 bytes, or
    more than ``MAX_ADMISSION_CHUNKS`` chunks."""
    if len(msg.pending) > MAX_ADMISSION_CHUNKS:
        raise ValueError(f"an admission lists at most {MAX_ADMISSION_CHUNKS} chunks, got {len(msg.pending)}")
    return Admission(
        worker_id=WorkerId(_required(msg.worker_id, "admission worker_id")),
        epoch=Epoch(msg.epoch),
        pending=tuple(_chunk(raw, "an admission's chunk") for raw in msg.pending),
        load=worker_load_from_proto(msg.load),
    )


def holding_to_proto(holding: Holding) -> common_pb2.Holding:
    """One snapshot entry; ValueError for a PENDING tier or a malformed chunk."""
    return common_pb2.Holding(
        chunk=_chunk(holding.chunk, "holding chunk"),
        tier=tier_to_proto(holding.tier),
        expires_at_ms=holding.expires_at_ms,
    )


def holding_from_proto(msg: common_pb2.Holding) -> Holding:
    """One snapshot entry; its tier must be GPU or CPU and its chunk 16 bytes."""
    return Holding(_chunk(msg.chunk, "holding chunk"), tier_from_proto(msg.tier), msg.expires_at_ms)


def snapshot_to_proto(snapshot: Snapshot) -> common_pb2.Snapshot:
    """A worker's full state."""
    return common_pb2.Snapshot(
        worker_id=snapshot.worker_id,
        epoch=snapshot.epoch,
        seq=snapshot.seq,
        holdings=[holding_to_proto(h) for h in snapshot.holdings],
    )


def snapshot_from_proto(msg: common_pb2.Snapshot) -> Snapshot:
    """A worker's full state; ValueError for an empty worker_id (seq 0 is valid: before any batch)."""
    return Snapshot(
        worker_id=WorkerId(_required(msg.worker_id, "snapshot worker_id")),
        epoch=Epoch(msg.epoch),
        seq=SeqNo(msg.seq),
        holdings=tuple(holding_from_proto(h) for h in msg.holdings),
    )


# --- workers -----------------------------------------------------------------------------------------


def worker_info_to_proto(info: WorkerInfo) -> common_pb2.WorkerInfo:
    """A registration record."""
    return common_pb2.WorkerInfo(
        worker_id=info.worker_id,
        epoch=info.epoch,
        address=info.address,
        fingerprint=info.fingerprint,
        model_id=info.model_id,
        metrics_address=info.metrics_address,
        node_id=info.node_id,
        signature=info.signature,
        adapters=info.adapters,
        loadable_adapters=info.loadable_adapters,
    )


def worker_info_from_proto(msg: common_pb2.WorkerInfo) -> WorkerInfo:
    """A registration record; ValueError when worker_id, address, fingerprint or model_id is empty, or
    an adapter id is malformed."""
    return WorkerInfo(
        worker_id=WorkerId(_required(msg.worker_id, "worker_id")),
        epoch=Epoch(msg.epoch),
        address=_required(msg.address, "worker address"),
        fingerprint=_required(msg.fingerprint, "worker fingerprint"),
        model_id=_required(msg.model_id, "worker model_id"),
        metrics_address=msg.metrics_address,
        node_id=msg.node_id,
        signature=msg.signature,
        adapters=tuple(msg.adapters),
        loadable_adapters=tuple(msg.loadable_adapters),
    )


def worker_load_to_proto(load: WorkerLoad) -> common_pb2.WorkerLoad:
    """Load figures; ValueError for a negative count."""
    return common_pb2.WorkerLoad(**{name: getattr(load, name) for name in _LOAD_FIELDS})


def worker_load_from_proto(msg: common_pb2.WorkerLoad) -> WorkerLoad:
    """Load figures (all fields are unsigned on the wire, so always >= 0)."""
    return WorkerLoad(**{name: getattr(msg, name) for name in _LOAD_FIELDS})


# --- requests and results ----------------------------------------------------------------------------


def sampling_params_to_proto(params: SamplingParams) -> common_pb2.SamplingParams:
    """Sampling parameters; every optional field is written explicitly except absent ones (seed,
    logprobs)."""
    msg = common_pb2.SamplingParams(
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        max_tokens=params.max_tokens,
        stop=params.stop,
        stop_token_ids=params.stop_token_ids,
        ignore_eos=params.ignore_eos,
        presence_penalty=params.presence_penalty,
        frequency_penalty=params.frequency_penalty,
        repetition_penalty=params.repetition_penalty,
        logit_bias=dict(params.logit_bias),
        min_tokens=params.min_tokens,
        min_p=params.min_p,
        n=params.n,
    )
    for name in ("seed", "logprobs", "prompt_logprobs"):
        if getattr(params, name) is not None:
            setattr(msg, name, getattr(params, name))
    if params.constraint is not None:
        msg.constraint.CopyFrom(output_constraint_to_proto(params.constraint))
    return msg


def sampling_params_from_proto(msg: common_pb2.SamplingParams) -> SamplingParams:
    """Sampling parameters. Absent optional fields and ``max_tokens == 0`` take the SamplingParams
    defaults (so an unset submessage means all defaults); out-of-range values raise ValueError."""
    present: dict[str, float | int] = {
        name: getattr(msg, name) for name in _OPTIONAL_SAMPLING_FIELDS if msg.HasField(name)
    }
    if msg.max_tokens:
        present["max_tokens"] = msg.max_tokens
    if msg.n:
        present["n"] = msg.n
    return SamplingParams(
        stop=tuple(msg.stop),
        stop_token_ids=tuple(msg.stop_token_ids),
        ignore_eos=msg.ignore_eos,
        logit_bias=tuple(msg.logit_bias.items()),
        min_tokens=msg.min_tokens,
        constraint=output_constraint_from_proto(msg.constraint) if msg.HasField("constraint") else None,
        **present,  # type: ignore[arg-type]  # keys are SamplingParams fields, values their types
    )


def output_constraint_to_proto(constraint: OutputConstraint) -> common_pb2.OutputConstraint:
    """A constraint: its kind and spec."""
    kind = _lookup(_CONSTRAINT_TO_PROTO, constraint.kind, "constraint kind")
    return common_pb2.OutputConstraint(kind=kind, spec=constraint.spec)


def output_constraint_from_proto(msg: common_pb2.OutputConstraint) -> OutputConstraint:
    """A constraint; ValueError for an UNSPECIFIED or unknown kind and for a spec
    :class:`OutputConstraint` rejects (empty, not JSON, too long)."""
    return OutputConstraint(_lookup(_CONSTRAINT_FROM_PROTO, msg.kind, "constraint kind"), msg.spec)


def token_logprob_to_proto(logprob: TokenLogprob) -> common_pb2.TokenLogprobs:
    ids = [t for t, _ in logprob.top]
    return common_pb2.TokenLogprobs(
        logprob=logprob.logprob, top_token_ids=ids, top_logprobs=[v for _, v in logprob.top]
    )


def token_logprob_from_proto(msg: common_pb2.TokenLogprobs) -> TokenLogprob:
    """ValueError when the top ids and values differ in number."""
    if len(msg.top_token_ids) != len(msg.top_logprobs):
        raise ValueError("TokenLogprobs: top_token_ids and top_logprobs differ in length")
    return TokenLogprob(msg.logprob, tuple(zip(msg.top_token_ids, msg.top_logprobs, strict=True)))


def usage_to_proto(usage: Usage) -> common_pb2.Usage:
    """Token counts."""
    return common_pb2.Usage(**{name: getattr(usage, name) for name in _USAGE_FIELDS})


def usage_from_proto(msg: common_pb2.Usage) -> Usage:
    """Token counts; ValueError when the cached counts do not add up (see :class:`Usage`)."""
    return Usage(**{name: getattr(msg, name) for name in _USAGE_FIELDS})


def cache_hint_to_proto(hint: CacheHint) -> common_pb2.CacheHint:
    """A cache breakpoint; ``ttl_s`` None is written as an absent field."""
    msg = common_pb2.CacheHint(pinned_prefix_tokens=hint.pinned_prefix_tokens)
    if hint.ttl_s is not None:
        msg.ttl_s = hint.ttl_s
    return msg


def cache_hint_from_proto(msg: common_pb2.CacheHint) -> CacheHint:
    """A cache breakpoint; an unset submessage means no breakpoint; ValueError for a present ttl_s of 0."""
    return CacheHint(msg.pinned_prefix_tokens, msg.ttl_s if msg.HasField("ttl_s") else None)


# --- helpers -----------------------------------------------------------------------------------------


def _lookup(table: Mapping[_K, _V], key: _K, what: str) -> _V:
    """``table[key]``, or ValueError naming ``what`` and the value that has no counterpart."""
    try:
        return table[key]
    except KeyError:
        raise ValueError(f"invalid {what}: {key!r} has no counterpart on the other side") from None


def _chunk(raw: bytes, what: str) -> ChunkHash:
    """``raw`` as a chunk hash; ValueError unless it is exactly 16 bytes."""
    if len(raw) != CHUNK_HASH_BYTES:
        raise ValueError(f"{what} must be {CHUNK_HASH_BYTES} bytes, got {len(raw)}")
    return ChunkHash(bytes(raw))


def _event_chunk(kind: EventKind, raw: bytes) -> ChunkHash | None:
    """The chunk of an event of ``kind``: None for CLEARED (which must carry none), else 16 bytes."""
    if kind is not EventKind.CLEARED:
        return _chunk(raw, f"{kind.value} event chunk")
    if raw:
        raise ValueError("a cleared event carries no chunk")
    return None


def _required(value: str, what: str) -> str:
    """``value``, or ValueError when it is empty (proto3's "unset")."""
    if not value:
        raise ValueError(f"{what} must not be empty")
    return value
