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
from kvgate.gateway.upstream.job import Done, Job, Tokens
from kvgate.proto.sampling import FinishReason, Usage


@dataclass(frozen=True, slots=True)
class TextDelta:
    """New text (never a split character, never part of a stop string) and the tokens it came from."""

    text: str
    token_ids: tuple[int, ...]


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
    def __init__(self, dispatcher: Dispatcher, tokenizer: Tokenizer) -> None:
        self._dispatcher = dispatcher
        self._tokenizer = tokenizer

    async def stream(self, job: Job) -> AsyncIterator[TextDelta | TextDone]:
        """Yields deltas then one TextDone; UpstreamError subclasses propagate. Closing the
        iterator early cancels the request on its worker."""
        detok = IncrementalDetokenizer(self._tokenizer, job.token_ids.tolist(), skip_special_tokens=True)
        stops = StopTrimmer(job.sampling.stop)
        async with contextlib.aclosing(self._dispatcher.stream(job)) as items:
            async for item in items:
                if isinstance(item, Tokens):
                    text = stops.feed(detok.push(item.token_ids))
                    if text or item.token_ids:
                        yield TextDelta(text, item.token_ids)
                else:
                    yield TextDelta(stops.feed(detok.flush()) + stops.flush(), ())  # what was held back
                    yield _finish(item, stops)


def _finish(done: Done, stops: StopTrimmer) -> TextDone:
    matched = stops.matched or done.matched_stop
    reason = FinishReason.STOP if matched is not None else done.finish_reason
    return TextDone(reason, done.usage, done.routed, matched, done.attempts)
