"""Token stream -> text stream: incremental detokenization and stop-string trimming on top of the
dispatcher. Shared by every front (OpenAI, Anthropic, gRPC)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from kvgate.common.tokenizer import IncrementalDetokenizer, Tokenizer
from kvgate.gateway.routing.types import Routed
from kvgate.gateway.text.stops import StopTrimmer
from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.gateway.upstream.errors import UpstreamError
from kvgate.gateway.upstream.job import ChoiceDone, Done, Job, Tokens
from kvgate.proto.sampling import FinishReason, TokenLogprob, Usage


@dataclass(frozen=True, slots=True)
class TokenText:
    """A token's log-probability with its text, and the most likely tokens' (text, log-probability).
    ``logprob`` None: the prompt's first token, which nothing predicts. ``token_id`` and ``top_ids``:
    the same tokens' ids (None and empty where a caller built one from text alone)."""

    token: str
    logprob: float | None
    top: tuple[tuple[str, float], ...] = ()
    token_id: int | None = None
    top_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TextDelta:
    """New text of choice ``index`` (never a split character, never part of a stop string), the tokens
    it came from, and their log-probabilities when asked for (one per token, else empty).
    ``prompt_logprobs``: with ``SamplingParams.prompt_logprobs``, on choice 0's first delta, every
    prompt token (the first with ``logprob`` None); else empty."""

    text: str
    token_ids: tuple[int, ...]
    index: int = 0
    logprobs: tuple[TokenText, ...] = ()
    prompt_logprobs: tuple[TokenText, ...] = ()


@dataclass(frozen=True, slots=True)
class ChoiceEnded:
    """With ``n`` > 1: choice ``index`` ended (its last text came before); a TextDone follows them all."""

    index: int
    finish_reason: FinishReason


@dataclass(frozen=True, slots=True)
class TextDone:
    """End of the stream; ``finish_reason`` is STOP when a stop string ended it; ``attempts``: the
    workers tried (more than 1: an earlier one failed or was busy before its first token)."""

    finish_reason: FinishReason
    usage: Usage
    routed: Routed
    matched_stop: str | None = None  # the stop string that ended it, if one did
    attempts: int = 1


class TextGenerator:
    """``markers``: the ids of the served model's tool-call markers that are special tokens; shown in
    the text of a job that reads calls (``Job.reads_calls``), every other special token hidden."""

    def __init__(
        self, dispatcher: Dispatcher, tokenizer: Tokenizer, markers: frozenset[int] = frozenset()
    ) -> None:
        self._dispatcher = dispatcher
        self._tokenizer = tokenizer
        self._markers = markers

    async def stream(self, job: Job) -> AsyncIterator[TextDelta | ChoiceEnded | TextDone]:
        """Yields deltas (and, with ``n`` > 1, each choice's ChoiceEnded) then one TextDone;
        UpstreamError subclasses propagate. Closing the iterator early cancels the request on its
        worker. Each choice is detokenized and trimmed at its stop strings on its own."""
        keep = self._markers if job.reads_calls else frozenset()
        choices = [_Choice(self._tokenizer, job, keep) for _ in range(job.sampling.n)]
        scoring = job.sampling.prompt_logprobs is not None  # until choice 0's first delta
        async with contextlib.aclosing(self._dispatcher.stream(job)) as items:
            async for item in items:
                if isinstance(item, Tokens):
                    text = choices[item.index].feed(item.token_ids)
                    prompt = self._prompt(job, item) if scoring and item.index == 0 else ()
                    scoring = scoring and item.index != 0
                    if text or item.token_ids:
                        texts = self._texts(item.token_ids, item.logprobs)
                        yield TextDelta(text, item.token_ids, item.index, texts, prompt)
                elif isinstance(item, ChoiceDone):
                    yield TextDelta(choices[item.index].flush(), (), item.index)  # what was held back
                    reason = choices[item.index].reason(item.finish_reason, item.matched_stop)
                    yield ChoiceEnded(item.index, reason)
                else:
                    if job.sampling.n == 1:
                        yield TextDelta(choices[0].flush(), ())
                    yield _finish(item, choices[0])

    def decode(self, token_ids: list[int]) -> str:
        """The text of ``token_ids``, special tokens shown."""
        return self._tokenizer.decode(token_ids, skip_special_tokens=False)

    def _texts(self, token_ids: tuple[int, ...], logprobs: tuple[TokenLogprob, ...]) -> tuple[TokenText, ...]:
        """Log-probabilities with each token's text (decoded alone, special tokens shown)."""
        decode = self._token_text
        return tuple(
            TokenText(decode(token), lp.logprob, tuple((decode(t), v) for t, v in lp.top), token, _ids(lp))
            for token, lp in zip(token_ids, logprobs, strict=False)
        )

    def _prompt(self, job: Job, item: Tokens) -> tuple[TokenText, ...]:
        """Every prompt token with its text and log-probability (the first has none); UpstreamError
        when the worker scored another number of tokens."""
        ids = job.token_ids.tolist()
        if len(item.prompt_logprobs) != len(ids) - 1:
            raise UpstreamError(
                f"a worker scored {len(item.prompt_logprobs)} prompt tokens, not {len(ids) - 1}"
            )
        first = TokenText(self._token_text(ids[0]), None, token_id=ids[0])
        return (first, *self._texts(tuple(ids[1:]), item.prompt_logprobs))

    def _token_text(self, token_id: int) -> str:
        return self._tokenizer.decode([token_id], skip_special_tokens=False)


def _ids(logprob: TokenLogprob) -> tuple[int, ...]:
    return tuple(token for token, _ in logprob.top)


class _Choice:
    """One choice's detokenizer and stop trimmer."""

    def __init__(self, tokenizer: Tokenizer, job: Job, keep: frozenset[int]) -> None:
        prompt = job.token_ids.tolist()
        self._detok = IncrementalDetokenizer(tokenizer, prompt, skip_special_tokens=True, keep=keep)
        self.stops = StopTrimmer(job.sampling.stop)

    def feed(self, token_ids: tuple[int, ...]) -> str:
        return self.stops.feed(self._detok.push(token_ids))

    def flush(self) -> str:
        return self.stops.feed(self._detok.flush()) + self.stops.flush()

    def reason(self, worker_reason: FinishReason, matched: str | None) -> FinishReason:
        """STOP when a stop string ended the choice (here or on the worker), else the worker's reason."""
        return FinishReason.STOP if (self.stops.matched or matched) is not None else worker_reason


def _finish(done: Done, choice: _Choice) -> TextDone:
    matched = choice.stops.matched or done.matched_stop
    reason = FinishReason.STOP if matched is not None else done.finish_reason
    return TextDone(reason, done.usage, done.routed, matched, done.attempts)
