"""What one engine step reports per request: new tokens, and at the end why and at what cost."""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.proto.sampling import FinishReason, Usage
from kvgate.workers.engine.sequence import RequestTimings, Sequence


@dataclass(frozen=True, slots=True)
class StepOutput:
    """One request's part of a step: ``new_token_ids`` sampled in it (possibly none, e.g. an abort).

    The last output of a request has ``finish_reason`` set, with ``usage`` (cached tokens split by
    tier), ``matched_stop`` (the stop string that ended it, else None; the tokens are not trimmed) and
    ``timings``; earlier outputs have all four None. A request gets exactly one finished output.
    """

    request_id: str
    new_token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    matched_stop: str | None = None
    timings: RequestTimings | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @classmethod
    def of(cls, seq: Sequence, new_token_ids: tuple[int, ...]) -> StepOutput:
        """``seq``'s output for this step (a final one iff ``seq`` has finished)."""
        if seq.stop is None:
            return cls(seq.request_id, new_token_ids)
        return cls(
            seq.request_id, new_token_ids, seq.stop.reason, seq.usage(), seq.stop.matched, seq.timings()
        )
