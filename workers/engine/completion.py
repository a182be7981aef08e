"""Running requests to the end in one call: for tests, benchmarks and offline use (not for serving,
where the worker streams each step's outputs)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvgate.proto.sampling import FinishReason, Usage
from kvgate.workers.engine.engine import LLMEngine
from kvgate.workers.engine.outputs import StepOutput
from kvgate.workers.engine.request import EngineRequest
from kvgate.workers.engine.sequence import RequestTimings


@dataclass(frozen=True, slots=True)
class Completion:
    """A finished request: every token it generated, why it ended, usage and timings."""

    request_id: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    usage: Usage
    matched_stop: str | None
    timings: RequestTimings


def run_to_completion(engine: LLMEngine, requests: Iterable[EngineRequest]) -> dict[str, Completion]:
    """Adds ``requests`` (all before the next step: they are batched together) and steps the engine
    until each has finished; returns their completions by request id. Outputs of other requests the
    engine runs meanwhile are dropped. Raises ValueError as :meth:`LLMEngine.add_request` does."""
    tokens: dict[str, list[int]] = {}
    for request in requests:
        engine.add_request(request)
        tokens[request.request_id] = []
    done: dict[str, Completion] = {}
    while len(done) < len(tokens):
        for out in engine.step():
            if out.request_id in tokens:
                tokens[out.request_id].extend(out.new_token_ids)
                if out.finished:
                    done[out.request_id] = _completion(out, tokens[out.request_id])
    return done


def _completion(final: StepOutput, token_ids: list[int]) -> Completion:
    assert final.finish_reason is not None
    assert final.usage is not None
    assert final.timings is not None
    return Completion(
        final.request_id,
        tuple(token_ids),
        final.finish_reason,
        final.usage,
        final.matched_stop,
        final.timings,
    )
