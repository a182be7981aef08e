"""Proto <-> domain conversion (kvgate.proto.convert), malformed input: a wrong hash length, unset or
unknown enums, forgotten required fields, values the domain forbids are rejected with ValueError,
never turned into a domain value (nor sent)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from google.protobuf.message import Message

from kvgate.proto import common_pb2, convert
from kvgate.proto.events import MAX_ADMISSION_CHUNKS, EventBatch, Holding
from kvgate.proto.ids import ChunkHash, Epoch, SeqNo, Tier, WorkerId
from kvgate.proto.sampling import CacheHint, SamplingParams, Usage
from kvgate.proto.workers import WorkerLoad


def _over_the_wire(msg: Message) -> Message:
    """What the receiver sees: the message serialized and parsed back."""
    return type(msg).FromString(msg.SerializeToString())


CHUNK = b"\xab" * 16
STORED = common_pb2.EVENT_KIND_STORED
GPU = common_pb2.TIER_GPU

INVALID_EVENTS = [
    pytest.param(dict(kind=STORED, chunk=CHUNK[:15], tier=GPU), "16 bytes", id="short-chunk"),
    pytest.param(dict(kind=STORED, chunk=CHUNK + b"\0", tier=GPU), "16 bytes", id="long-chunk"),
    pytest.param(dict(kind=common_pb2.EVENT_KIND_EVICTED), "16 bytes", id="evicted-without-chunk"),
    pytest.param(dict(kind=common_pb2.EVENT_KIND_CLEARED, chunk=CHUNK), "no chunk", id="cleared-with-chunk"),
    pytest.param(dict(chunk=CHUNK, tier=GPU), "event kind", id="unset-kind"),
    pytest.param(dict(kind=99, chunk=CHUNK, tier=GPU), "event kind", id="unknown-kind"),
    pytest.param(dict(kind=STORED, chunk=CHUNK), "tier", id="stored-without-tier"),
    pytest.param(dict(kind=STORED, chunk=CHUNK, tier=7), "tier", id="unknown-tier"),
    pytest.param(
        dict(kind=common_pb2.EVENT_KIND_OFFLOADED, chunk=CHUNK, tier=GPU), "CPU", id="offload-to-gpu"
    ),
]


@pytest.mark.parametrize(("fields", "message"), INVALID_EVENTS)
def test_invalid_events_are_rejected(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        convert.kv_event_from_proto(_over_the_wire(common_pb2.KVEvent(**fields)))


def test_invalid_batches_and_snapshots_are_rejected() -> None:
    with pytest.raises(ValueError, match="seq"):
        convert.event_batch_from_proto(common_pb2.EventBatch(worker_id="w0", epoch=1, seq=0))
    with pytest.raises(ValueError, match="worker_id"):
        convert.event_batch_from_proto(common_pb2.EventBatch(epoch=1, seq=1))
    with pytest.raises(ValueError, match="worker_id"):
        convert.snapshot_from_proto(common_pb2.Snapshot(epoch=1))
    bad_holding = common_pb2.Holding(chunk=CHUNK, tier=common_pb2.TIER_UNSPECIFIED)
    with pytest.raises(ValueError, match="tier"):
        convert.snapshot_from_proto(common_pb2.Snapshot(worker_id="w0", holdings=[bad_holding]))


def test_invalid_admissions_are_rejected() -> None:
    with pytest.raises(ValueError, match="worker_id"):
        convert.admission_from_proto(common_pb2.Admission(epoch=1, pending=[CHUNK]))
    with pytest.raises(ValueError, match="16 bytes"):
        convert.admission_from_proto(common_pb2.Admission(worker_id="w0", pending=[CHUNK, b"short"]))
    too_many = [CHUNK] * (MAX_ADMISSION_CHUNKS + 1)
    with pytest.raises(ValueError, match="at most"):
        convert.admission_from_proto(common_pb2.Admission(worker_id="w0", pending=too_many))


@pytest.mark.parametrize("field", ["worker_id", "address", "fingerprint", "model_id"])
def test_worker_info_requires_its_identity_fields(field: str) -> None:
    full = dict(worker_id="w0", epoch=3, address="10.0.0.1:50051", fingerprint="ab" * 16, model_id="m")
    with pytest.raises(ValueError, match=field):
        convert.worker_info_from_proto(common_pb2.WorkerInfo(**(full | {field: ""})))


INVALID_SAMPLING = [
    pytest.param(dict(temperature=-0.5), "temperature", id="negative-temperature"),
    pytest.param(dict(temperature=math.nan), "temperature", id="nan-temperature"),
    pytest.param(dict(temperature=math.inf), "temperature", id="inf-temperature"),
    pytest.param(dict(top_p=0.0), "top_p", id="zero-top-p"),
    pytest.param(dict(top_p=1.5), "top_p", id="top-p-above-one"),
    pytest.param(dict(stop=["ok", ""]), "stop", id="empty-stop-string"),
    pytest.param(
        dict(constraint=common_pb2.OutputConstraint(spec="{}")),
        "constraint kind",
        id="constraint-kind-unspecified",
    ),
    pytest.param(dict(constraint=common_pb2.OutputConstraint(kind=1)), "non-empty", id="constraint-empty"),
    pytest.param(
        dict(constraint=common_pb2.OutputConstraint(kind=1, spec="{oops")),
        "not valid JSON",
        id="constraint-not-json",
    ),
    pytest.param(
        dict(constraint=common_pb2.OutputConstraint(kind=1, spec="[1]")),
        "JSON object",
        id="constraint-not-an-object",
    ),
    pytest.param(
        dict(constraint=common_pb2.OutputConstraint(kind=1, spec="[" * 100_000 + "]" * 100_000)),
        "nested too deeply",
        id="constraint-nested-too-deeply",
    ),
]


@pytest.mark.parametrize(("fields", "message"), INVALID_SAMPLING)
def test_invalid_sampling_params_are_rejected(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        convert.sampling_params_from_proto(common_pb2.SamplingParams(**fields))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param(
            dict(prompt_tokens=10, cached_tokens=16, cached_gpu_tokens=16), "exceed", id="cached>prompt"
        ),
        pytest.param(
            dict(prompt_tokens=64, cached_tokens=32, cached_gpu_tokens=16), "equal", id="tiers-dont-add"
        ),
        pytest.param(
            dict(prompt_tokens=64, cached_tokens=48, cached_gpu_tokens=48, evicted_predicted_tokens=32),
            "uncached",
            id="evicted>uncached",
        ),
    ],
)
def test_inconsistent_usage_is_rejected(fields: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        convert.usage_from_proto(common_pb2.Usage(**fields))


def test_present_zero_ttl_is_rejected() -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        convert.cache_hint_from_proto(common_pb2.CacheHint(pinned_prefix_tokens=128, ttl_s=0))


@pytest.mark.parametrize("value", [0, 5, 99])
def test_unset_or_unknown_enums_are_rejected(value: int) -> None:
    with pytest.raises(ValueError, match="finish_reason"):
        convert.finish_reason_from_proto(value)
    with pytest.raises(ValueError, match="tier"):
        convert.tier_from_proto(value if value else common_pb2.TIER_UNSPECIFIED)


# --- domain values the wire cannot carry -------------------------------------------------------------


def test_pending_tier_is_never_sent() -> None:
    with pytest.raises(ValueError, match="tier"):
        convert.tier_to_proto(Tier.PENDING)


def test_malformed_chunk_is_not_sent() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        convert.holding_to_proto(Holding(ChunkHash(b"short"), Tier.GPU, 0))


def test_out_of_range_integers_are_not_sent() -> None:
    with pytest.raises(ValueError, match="out of range"):
        convert.worker_load_to_proto(WorkerLoad(running_seqs=-1))
    with pytest.raises(ValueError, match="out of range"):
        convert.event_batch_to_proto(EventBatch(WorkerId("w0"), Epoch(-1), SeqNo(1), ()))


# --- domain validation the converters rely on --------------------------------------------------------


def test_sampling_params_normalise_sequences_and_reject_bad_types() -> None:
    params = SamplingParams(stop=["</s>"], stop_token_ids=[2], temperature=1)  # type: ignore[arg-type]
    assert params.stop == ("</s>",)
    assert params.stop_token_ids == (2,)
    assert isinstance(params.temperature, float)
    with pytest.raises(ValueError, match="single str"):
        SamplingParams(stop="</s>")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="top_k"):
        SamplingParams(top_k=True)
    with pytest.raises(ValueError, match="seed"):
        SamplingParams(seed=2**63)
    with pytest.raises(ValueError, match="stop_token_ids"):
        SamplingParams(stop_token_ids=(-1,))


def test_usage_and_cache_hint_helpers() -> None:
    usage = Usage(prompt_tokens=300, completion_tokens=20, cached_tokens=256, cached_gpu_tokens=256)
    assert usage.total_tokens == 320
    assert not CacheHint().active
    assert CacheHint(pinned_prefix_tokens=1024, ttl_s=3600).active
    with pytest.raises(ValueError, match="pinned_prefix_tokens"):
        CacheHint(pinned_prefix_tokens=-1)
