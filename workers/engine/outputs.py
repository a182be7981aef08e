"""What one engine step reports per request: new tokens, and at the end why and at what cost."""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass, replace

from kvgate.proto.sampling import FinishReason, TokenLogprob, Usage
from kvgate.workers.engine.sequence import RequestTimings, Sequence
from kvgate.workers.engine.stopping import Stop


@dataclass(frozen=True, slots=True)
class StepOutput:
    """One request's part of a step: ``new_token_ids`` sampled in it (possibly none, e.g. an abort) for
    choice ``index`` (always 0 unless the request asked for ``n`` > 1), with their ``logprobs`` when
    the request asked for them (one per token, else empty).

    The last output of a request has ``finish_reason`` set, with ``usage`` (cached tokens split by
    tier; with ``n`` > 1 the prompt counts once and the completion tokens of every choice are summed),
    ``matched_stop`` (the stop string that ended it, else None; the tokens are not trimmed) and
    ``timings``; earlier outputs have all four None. A request gets exactly one finished output; with
    ``n`` > 1 its reason and stop are choice 0's, and each choice's own end comes first as
    ``choice_end`` (with ``choice_tokens``, the tokens that choice generated). ``prompt_logprobs``:
    with ``SamplingParams.prompt_logprobs``, on choice 0's first token only, one per prompt token after
    the first.
    """

    request_id: str
    new_token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    matched_stop: str | None = None
    timings: RequestTimings | None = None
    index: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()
    choice_end: Stop | None = None
    choice_tokens: int = 0
    prompt_logprobs: tuple[TokenLogprob, ...] = ()

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @classmethod
    def of(
        cls, seq: Sequence, new_token_ids: tuple[int, ...], logprobs: tuple[TokenLogprob, ...] = (),
        prompt_logprobs: tuple[TokenLogprob, ...] = (),
    ) -> StepOutput:  # fmt: skip
        """``seq``'s output for this step, its request going on (its choice may have ended)."""
        ended = seq.stop if seq.request.sampling.n > 1 else None
        return cls(seq.request_id, new_token_ids, index=seq.index, logprobs=logprobs, choice_end=ended,
                   choice_tokens=len(seq.output_ids) if ended else 0,
                   prompt_logprobs=prompt_logprobs)  # fmt: skip

    @classmethod
    def last(
        cls, choices: Seq[Sequence], seq: Sequence, new_token_ids: tuple[int, ...],
        logprobs: tuple[TokenLogprob, ...] = (), prompt_logprobs: tuple[TokenLogprob, ...] = (),
    ) -> StepOutput:  # fmt: skip
        """The request's final output: ``choices`` have all ended, ``seq`` (one of them) last."""
        first = choices[0]
        assert first.stop is not None
        usage = replace(first.usage(), completion_tokens=sum(len(s.output_ids) for s in choices))
        ended = seq.stop if seq.request.sampling.n > 1 else None
        return cls(
            seq.request_id, new_token_ids, first.stop.reason, usage, first.stop.matched, first.timings(),
            seq.index, logprobs, ended, len(seq.output_ids) if ended else 0, prompt_logprobs,
        )  # fmt: skip
