"""The pieces of one gateway-to-worker call: the request message, its timeout, the final message, and
how a failed call is classified (retry elsewhere, client error, deadline, failure mid-stream)."""

from __future__ import annotations

import asyncio
import logging
import time

import grpc

from kvgate.gateway.routing.types import Routed, WarmUp
from kvgate.gateway.upstream.errors import (
    DeadlineError,
    InvalidRequestError,
    UpstreamError,
    WorkerFailedError,
)
from kvgate.gateway.upstream.job import ChoiceDone, Done, Job, Tokens
from kvgate.proto import convert, worker_pb2
from kvgate.proto.sampling import SamplingParams
from kvgate.proto.workers import WorkerInfo

log = logging.getLogger(__name__)
DEAD = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
RETRY = DEAD | {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED}


class RetryableError(Exception):
    """The attempt failed before any token: try another worker."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self.code = code


def classify(exc: grpc.aio.AioRpcError, info: WorkerInfo, first_token_sent: bool) -> Exception:
    code = exc.code()
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidRequestError(exc.details() or "invalid request")
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineError("the request's deadline passed")
    if not first_token_sent and code in RETRY:
        return RetryableError(code)
    # the details (a worker's exception text, addresses of the link) are logged, not shown to clients
    log.warning("worker %s failed (%s): %s", info.worker_id, code.name, exc.details())
    if first_token_sent:
        return WorkerFailedError(f"worker {info.worker_id} failed mid-stream ({code.name})")
    return UpstreamError(f"worker {info.worker_id} failed ({code.name})")


def lost(info: WorkerInfo, first_token_sent: bool) -> Exception:
    """The call was abandoned because its worker left the directory while silent (stalled or gone)."""
    if first_token_sent:
        return WorkerFailedError(f"worker {info.worker_id} stopped responding mid-stream")
    return RetryableError(grpc.StatusCode.UNAVAILABLE)


def cancelling() -> bool:
    """Whether the current task is being cancelled (as opposed to a call cancelled under it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def request(job: Job, routed: Routed, source: WorkerInfo | None = None) -> worker_pb2.GenerateRequest:
    """The worker's request for ``job`` as ``routed``; ``source``: the registration of the decision's
    KV source (the worker to fetch the prompt's prefix from), None to name none."""
    request = worker_pb2.GenerateRequest(
        request_id=job.request_id,
        prompt_token_ids=job.token_ids.tolist(),
        sampling=convert.sampling_params_to_proto(job.sampling),
        cache_salt=job.cache_salt,
        shared_salt=job.shared_salt,
        shared_tokens=job.shared_tokens,
        adapter_id=job.adapter_id,
        predicted_cached_tokens=routed.decision.predicted_cached_tokens,
    )
    if job.cache_hint is not None:
        request.cache_hint.CopyFrom(convert.cache_hint_to_proto(job.cache_hint))
    if source is not None and routed.source is not None:
        request.kv_source.CopyFrom(
            worker_pb2.KVSource(
                worker_id=source.worker_id, address=source.address, tokens=routed.source.tokens
            )
        )
    return request


WARM_SAMPLING = SamplingParams(temperature=0.0, max_tokens=1)  # a warm-up wants the prefill alone


def warm_request(job: Job, warm: WarmUp) -> worker_pb2.GenerateRequest:
    """The background prefill of ``job``'s first ``warm.tokens`` tokens (its shared opening, whole
    chunks) under the job's cache namespaces, so the copy hashes as the job's own prompt does."""
    tokens = min(warm.tokens, job.prompt_tokens)
    shared = min(job.shared_tokens, tokens)
    return worker_pb2.GenerateRequest(
        request_id=f"{job.request_id}:warm",
        prompt_token_ids=job.token_ids[:tokens].tolist(),
        sampling=convert.sampling_params_to_proto(WARM_SAMPLING),
        cache_salt=job.cache_salt,
        shared_salt=job.shared_salt if shared else "",
        shared_tokens=shared,
        adapter_id=job.adapter_id,
        background=True,
    )


def timeout(job: Job) -> float | None:
    if job.deadline_s is None:
        return None
    remaining = job.deadline_s - time.monotonic()
    if remaining <= 0:
        raise DeadlineError("the request's deadline passed before it was sent")
    return remaining


def tokens(batch: worker_pb2.TokenBatch) -> Tokens:
    """A worker's token batch; UpstreamError for log-probabilities that do not fit it."""
    try:
        logprobs = tuple(convert.token_logprob_from_proto(lp) for lp in batch.logprobs)
        prompt = tuple(convert.token_logprob_from_proto(lp) for lp in batch.prompt_logprobs)
    except ValueError as exc:
        raise UpstreamError(f"a worker sent malformed log-probabilities: {exc}") from exc
    if logprobs and len(logprobs) != len(batch.token_ids):
        raise UpstreamError("a worker sent log-probabilities for another number of tokens")
    return Tokens(tuple(batch.token_ids), batch.index, logprobs, prompt)


def choice_done(end: worker_pb2.ChoiceEnd) -> ChoiceDone:
    matched = end.matched_stop if end.HasField("matched_stop") else None
    reason = convert.finish_reason_from_proto(end.finish_reason)
    return ChoiceDone(end.index, reason, matched, end.completion_tokens)


def done(final: worker_pb2.FinalResult, routed: Routed, attempt: int) -> Done:
    return Done(
        finish_reason=convert.finish_reason_from_proto(final.finish_reason),
        usage=convert.usage_from_proto(final.usage),
        routed=routed,
        matched_stop=final.matched_stop if final.HasField("matched_stop") else None,
        attempts=attempt,
    )
