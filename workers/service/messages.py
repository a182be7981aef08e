"""The worker's wire messages: a ``GenerateRequest`` in, ``GenerateResponse`` / ``StatsResponse`` out.

Domain <-> proto conversion of the shared types is :mod:`kvgate.proto.convert`'s; this module only
assembles the worker's own messages from them (the engine's types live on the torch side, which
``convert`` must not import).
"""

from __future__ import annotations

import time

import numpy as np

from kvgate.proto import convert, worker_pb2
from kvgate.proto.events import Admission, EventBatch, Snapshot
from kvgate.proto.sampling import FinishReason, Usage
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from kvgate.workers.engine import EngineRequest, StepOutput
from kvgate.workers.service.engine_stats import EngineStats
from kvgate.workers.service.transfer_counters import TransferCounters


def engine_request(msg: worker_pb2.GenerateRequest) -> EngineRequest:
    """The engine's request for ``msg``. Raises ValueError, naming the field, for an empty request id
    or prompt and for invalid sampling parameters or cache hints (the engine checks the rest: prompt
    length and token ids against its model)."""
    if not msg.request_id:
        raise ValueError("request_id must not be empty")
    if not msg.prompt_token_ids:
        raise ValueError("prompt_token_ids must hold at least one token")
    hint = convert.cache_hint_from_proto(msg.cache_hint) if msg.HasField("cache_hint") else None
    predicted = msg.predicted_cached_tokens if msg.HasField("predicted_cached_tokens") else None
    return EngineRequest(
        request_id=msg.request_id,
        prompt_ids=np.asarray(msg.prompt_token_ids, dtype=np.uint32),
        sampling=convert.sampling_params_from_proto(msg.sampling),
        cache_salt=msg.cache_salt,
        adapter_id=msg.adapter_id,
        cache_hint=hint,
        predicted_cached_tokens=predicted,
        shared_salt=msg.shared_salt,
        shared_tokens=msg.shared_tokens,
        background=msg.background,
    )


def export_request(msg: worker_pb2.ExportKVRequest) -> EngineRequest:
    """The prompt of an ExportKV call as an engine request (its cache namespace as in Generate).
    Raises ValueError, naming the field, for an empty prompt or an inconsistent shared prefix."""
    if not msg.prompt_token_ids:
        raise ValueError("prompt_token_ids must hold at least one token")
    return EngineRequest(
        request_id="kv-export",
        prompt_ids=np.asarray(msg.prompt_token_ids, dtype=np.uint32),
        cache_salt=msg.cache_salt,
        adapter_id=msg.adapter_id,
        shared_salt=msg.shared_salt,
        shared_tokens=msg.shared_tokens,
    )


def token_batch(out: StepOutput) -> worker_pb2.GenerateResponse:
    """A stream message with the new tokens of ``out`` (non-empty), their choice and log-probabilities
    (and the prompt's, in the first)."""
    logprobs = [convert.token_logprob_to_proto(lp) for lp in out.logprobs]
    prompt = [convert.token_logprob_to_proto(lp) for lp in out.prompt_logprobs]
    batch = worker_pb2.TokenBatch(
        token_ids=out.new_token_ids, index=out.index, logprobs=logprobs, prompt_logprobs=prompt
    )
    return worker_pb2.GenerateResponse(tokens=batch)


def choice_end(out: StepOutput) -> worker_pb2.GenerateResponse:
    """The stream message that one choice of an ``n`` > 1 request ended."""
    assert out.choice_end is not None
    end = worker_pb2.ChoiceEnd(
        index=out.index,
        finish_reason=convert.finish_reason_to_proto(out.choice_end.reason),
        completion_tokens=out.choice_tokens,
    )
    if out.choice_end.matched is not None:
        end.matched_stop = out.choice_end.matched
    return worker_pb2.GenerateResponse(choice_end=end)


def final_result(out: StepOutput) -> worker_pb2.GenerateResponse:
    """The last stream message of a finished output (its reason, usage and matched stop)."""
    assert out.finish_reason is not None
    assert out.usage is not None
    final = worker_pb2.FinalResult(
        finish_reason=convert.finish_reason_to_proto(out.finish_reason),
        usage=convert.usage_to_proto(out.usage),
    )
    if out.matched_stop is not None:
        final.matched_stop = out.matched_stop
    return worker_pb2.GenerateResponse(final=final)


def error_result(error: str, prompt_tokens: int, completion_tokens: int) -> worker_pb2.GenerateResponse:
    """The last stream message of a generation the worker failed after streaming tokens."""
    usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    final = worker_pb2.FinalResult(
        finish_reason=convert.finish_reason_to_proto(FinishReason.ERROR),
        usage=convert.usage_to_proto(usage),
        error=error,
    )
    return worker_pb2.GenerateResponse(final=final)


def stats_response(
    info: WorkerInfo, stats: EngineStats, load: WorkerLoad, transfers: TransferCounters | None = None
) -> worker_pb2.StatsResponse:
    """Identity, ``load`` (the worker's current figures) and counters (``transfers``: KV moved
    between workers; None: none). The block manager counts drops without their tier: they are reported
    as evictions of the tier a chunk leaves the worker from (GPU without a CPU tier, else CPU)."""
    c, t = stats.counters, transfers or TransferCounters()
    drops = worker_pb2.Evictions(ttl=stats.kv.evicted_ttl, pressure=stats.kv.evicted_pressure)
    none = worker_pb2.Evictions()
    return worker_pb2.StatsResponse(
        info=convert.worker_info_to_proto(info),
        load=convert.worker_load_to_proto(load),
        now_ms=time.time_ns() // 1_000_000,
        requests_total=c.requests,
        finished_stop_total=c.finished_stop,
        finished_length_total=c.finished_length,
        finished_abort_total=c.finished_abort,
        finished_error_total=c.finished_error,
        prompt_tokens_total=c.prompt_tokens,
        cached_tokens_total=c.cached_tokens,
        cached_gpu_tokens_total=c.cached_gpu_tokens,
        cached_cpu_tokens_total=c.cached_cpu_tokens,
        completion_tokens_total=c.completion_tokens,
        predicted_cached_tokens_total=c.predicted_cached_tokens,
        actual_cached_tokens_of_predicted_total=c.actual_cached_tokens_of_predicted,
        preemptions_total=c.preemptions,
        gpu_evictions=none if stats.has_cpu_tier else drops,
        cpu_evictions=drops if stats.has_cpu_tier else none,
        offloaded_blocks_total=stats.kv.offloaded,
        swapped_in_blocks_total=stats.kv.swapped_in,
        gpu_cached_blocks=stats.gpu_cached_blocks,
        last_event_seq=stats.last_event_seq,
        started_at_ms=stats.started_at_ms,
        kv_imported_blocks_total=t.imported_blocks,
        kv_imported_tokens_total=t.imported_tokens,
        kv_fetch_failures_total=t.fetch_failures,
        kv_exported_blocks_total=t.exported_blocks,
    )


def event_message(item: EventBatch | Snapshot | Admission) -> worker_pb2.EventStreamMessage:
    """One message of the SubscribeEvents stream."""
    if isinstance(item, Snapshot):
        return worker_pb2.EventStreamMessage(snapshot=convert.snapshot_to_proto(item))
    if isinstance(item, Admission):
        return worker_pb2.EventStreamMessage(admission=convert.admission_to_proto(item))
    return worker_pb2.EventStreamMessage(batch=convert.event_batch_to_proto(item))
