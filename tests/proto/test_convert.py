"""Proto <-> domain conversion (kvgate.proto.convert), valid values: every one survives domain ->
proto -> bytes -> proto -> domain unchanged, and absent fields mean what the .proto says.
Malformed wire input is covered by test_convert_rejects.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st

from kvgate.proto import common_pb2, convert
from kvgate.proto.constraint import ConstraintKind, OutputConstraint
from kvgate.proto.events import Admission, EventBatch, EventKind, Holding, KVEvent, Snapshot
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.sampling import DEFAULT_MAX_TOKENS, CacheHint, FinishReason, SamplingParams, Usage
from kvgate.proto.workers import WorkerInfo, WorkerLoad

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1

u32 = st.integers(0, U32_MAX)
u64 = st.integers(0, U64_MAX)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(min_size=1, max_size=24)
worker_ids = st.from_regex(r"[A-Za-z0-9_.:/-][A-Za-z0-9_.:/~-]{0,23}", fullmatch=True)
chunks = st.binary(min_size=16, max_size=16).map(ChunkHash)
held_tiers = st.sampled_from([Tier.GPU, Tier.CPU])

kv_events = st.one_of(
    st.builds(KVEvent.stored, chunks, held_tiers, i64),
    st.builds(KVEvent.offloaded, chunks, i64),
    st.builds(KVEvent, st.just(EventKind.EVICTED), chunks, held_tiers, i64),
    st.builds(KVEvent, st.just(EventKind.CLEARED), st.none(), held_tiers, i64),
)
event_batches = st.builds(
    EventBatch,
    worker_ids.map(WorkerId),
    u64.map(Epoch),
    st.integers(1, U64_MAX).map(SeqNo),
    st.lists(kv_events, max_size=6).map(tuple),
)
holdings = st.builds(Holding, chunks, held_tiers, i64)
snapshots = st.builds(
    Snapshot,
    worker_ids.map(WorkerId),
    u64.map(Epoch),
    u64.map(SeqNo),
    st.lists(holdings, max_size=6).map(tuple),
)
admissions = st.builds(
    Admission, worker_ids.map(WorkerId), u64.map(Epoch), st.lists(chunks, max_size=8).map(tuple),
    st.deferred(lambda: worker_loads),
)  # fmt: skip
worker_infos = st.builds(
    WorkerInfo,
    worker_id=worker_ids.map(WorkerId),
    epoch=u64.map(Epoch),
    address=names,
    fingerprint=names,
    model_id=names,
    metrics_address=st.text(max_size=24),
    node_id=st.text(max_size=24),
    adapters=st.sets(st.from_regex(r"a[a-z0-9._/-]{0,10}", fullmatch=True), max_size=3).map(sorted),
    loadable_adapters=st.sets(st.from_regex(r"b[a-z0-9._/-]{0,10}", fullmatch=True), max_size=3).map(sorted),
)
worker_loads = st.builds(
    WorkerLoad,
    waiting_prefill_tokens=u64,
    running_seqs=u32,
    waiting_seqs=u32,
    gpu_blocks_total=u64,
    gpu_blocks_free=u64,
    cpu_blocks_total=u64,
    cpu_blocks_free=u64,
    gpu_blocks_cached=u64,
    evicted_ttl_blocks=u64,
    evicted_pressure_blocks=u64,
    offloaded_blocks=u64,
)
sampling_params = st.builds(
    SamplingParams,
    temperature=st.floats(0, 1e6, allow_nan=False),
    top_p=st.floats(0, 1, exclude_min=True),
    top_k=u32,
    seed=st.none() | i64,
    max_tokens=st.integers(1, U32_MAX),
    stop=st.lists(st.text(min_size=1, max_size=8), max_size=4).map(tuple),
    stop_token_ids=st.lists(u32, max_size=4).map(tuple),
    ignore_eos=st.booleans(),
    constraint=st.none()
    | st.builds(
        OutputConstraint.json_schema,
        st.dictionaries(st.text(max_size=8), st.text(max_size=8) | st.integers(), max_size=3),
    )
    | st.builds(OutputConstraint, st.just(ConstraintKind.LARK), st.text(min_size=1, max_size=20)),
)
cache_hints = st.builds(CacheHint, u32, st.none() | st.integers(1, U32_MAX))


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    """Usage values obeying gpu + cpu == cached and cached + evicted <= prompt."""
    prompt = draw(u32)
    cached = draw(st.integers(0, prompt))
    gpu = draw(st.integers(0, cached))
    evicted = draw(st.integers(0, prompt - cached))
    return Usage(prompt, draw(u32), cached, gpu, cached - gpu, evicted)


def _over_the_wire(msg: Message) -> Message:
    """What the receiver sees: the message serialized and parsed back."""
    return type(msg).FromString(msg.SerializeToString())


ROUND_TRIPS = [
    pytest.param(kv_events, convert.kv_event_to_proto, convert.kv_event_from_proto, id="KVEvent"),
    pytest.param(
        event_batches, convert.event_batch_to_proto, convert.event_batch_from_proto, id="EventBatch"
    ),
    pytest.param(holdings, convert.holding_to_proto, convert.holding_from_proto, id="Holding"),
    pytest.param(snapshots, convert.snapshot_to_proto, convert.snapshot_from_proto, id="Snapshot"),
    pytest.param(admissions, convert.admission_to_proto, convert.admission_from_proto, id="Admission"),
    pytest.param(worker_infos, convert.worker_info_to_proto, convert.worker_info_from_proto, id="WorkerInfo"),
    pytest.param(worker_loads, convert.worker_load_to_proto, convert.worker_load_from_proto, id="WorkerLoad"),
    pytest.param(
        sampling_params, convert.sampling_params_to_proto, convert.sampling_params_from_proto, id="Sampling"
    ),
    pytest.param(usages(), convert.usage_to_proto, convert.usage_from_proto, id="Usage"),
    pytest.param(cache_hints, convert.cache_hint_to_proto, convert.cache_hint_from_proto, id="CacheHint"),
]


@pytest.mark.parametrize(("values", "to_proto", "from_proto"), ROUND_TRIPS)
@given(data=st.data())
def test_round_trip_through_bytes(
    values: st.SearchStrategy[Any],
    to_proto: Callable[[Any], Message],
    from_proto: Callable[[Any], Any],
    data: st.DataObject,
) -> None:
    value = data.draw(values)
    assert from_proto(_over_the_wire(to_proto(value))) == value


@pytest.mark.parametrize("tier", [Tier.GPU, Tier.CPU])
def test_tier_round_trip_through_bytes(tier: Tier) -> None:
    wire = _over_the_wire(common_pb2.Holding(tier=convert.tier_to_proto(tier)))
    assert convert.tier_from_proto(wire.tier) is tier


@pytest.mark.parametrize("reason", list(FinishReason))
def test_finish_reason_round_trip(reason: FinishReason) -> None:
    assert convert.finish_reason_from_proto(convert.finish_reason_to_proto(reason)) is reason


# --- defaults and absent fields ----------------------------------------------------------------------


def test_unset_submessages_mean_defaults() -> None:
    """A request that carries no sampling or cache hint gets the domain defaults, not zeros."""
    assert convert.sampling_params_from_proto(common_pb2.SamplingParams()) == SamplingParams()
    assert convert.cache_hint_from_proto(common_pb2.CacheHint()) == CacheHint()


def test_explicit_zeros_are_not_defaults() -> None:
    """temperature 0 (greedy), top_k 0 and seed 0 survive: presence, not value, marks them set."""
    params = SamplingParams(temperature=0.0, top_k=0, seed=0, max_tokens=1)
    wire = _over_the_wire(convert.sampling_params_to_proto(params))
    assert wire.HasField("temperature")
    assert wire.HasField("seed")
    assert convert.sampling_params_from_proto(wire) == params
    assert convert.sampling_params_from_proto(wire).greedy


def test_absent_seed_and_ttl_stay_absent() -> None:
    assert not convert.sampling_params_to_proto(SamplingParams()).HasField("seed")
    assert not convert.cache_hint_to_proto(CacheHint(pinned_prefix_tokens=256)).HasField("ttl_s")


def test_max_tokens_zero_on_the_wire_means_the_default() -> None:
    params = convert.sampling_params_from_proto(common_pb2.SamplingParams(temperature=0.0))
    assert params.max_tokens == DEFAULT_MAX_TOKENS


def test_tierless_events_accept_an_unspecified_tier() -> None:
    chunk = b"\x01" * 16
    evicted = common_pb2.KVEvent(kind=common_pb2.EVENT_KIND_EVICTED, chunk=chunk)
    cleared = common_pb2.KVEvent(kind=common_pb2.EVENT_KIND_CLEARED)
    assert convert.kv_event_from_proto(evicted) == KVEvent.evicted(ChunkHash(chunk))
    assert convert.kv_event_from_proto(cleared) == KVEvent.cleared()
