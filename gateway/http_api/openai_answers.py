"""An OpenAI answer of several choices, from one or more generations: ``n`` choices of one prompt, and
a completions batch (one generation per prompt, choice ``i * n + j`` for prompt ``i``'s ``j``-th).

:func:`combined` turns the generations' events into one answer's (indexes offset, every choice's end
as a :class:`ChoiceEnded`, one TextDone with the usage summed); :func:`collect_choices` collects them
for a JSON answer; :func:`chat_renderer` and :func:`completion_renderer` render them as OpenAI's
stream chunks (one choice per chunk, its ``index``, its log-probabilities in the chunk).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from kvgate.gateway.core.call_formats import CallReading
from kvgate.gateway.core.textgen import ChoiceEnded, TextDelta, TextDone, TokenText
from kvgate.gateway.http_api import openai_format as fmt
from kvgate.gateway.http_api.openai_tool_stream import ToolDeltas
from kvgate.gateway.upstream.errors import UpstreamError
from kvgate.proto.sampling import FinishReason, Usage

Event = TextDelta | ChoiceEnded | TextDone
Events = AsyncIterator[Event]
Renderer = Callable[[Event], list[bytes]]


async def combined(streams: Sequence[Events], n: int) -> Events:
    """The events of ``streams`` (each of ``n`` choices), one after the other, as one answer's."""
    dones: list[TextDone] = []
    for number, events in enumerate(streams):
        offset = number * n
        async with contextlib.aclosing(events) as items:
            async for item in items:
                if isinstance(item, TextDone):
                    if n == 1:
                        yield ChoiceEnded(offset, item.finish_reason)
                    dones.append(item)
                else:
                    yield replace(item, index=item.index + offset)
    yield _summed(dones)


async def collect_choices(streams: Sequence[Events], n: int) -> tuple[list[fmt.Choice], TextDone]:
    """Every choice of the answer, collecting the generations at the same time."""
    results = await asyncio.gather(*(_collect(combined([s], n)) for s in streams))
    choices = [replace(c, index=c.index + i * n) for i, (found, _) in enumerate(results) for c in found]
    return choices, _summed([done for _, done in results])


async def _collect(events: Events) -> tuple[list[fmt.Choice], TextDone]:
    """One generation's choices; its prompt's scores (choice 0's) go with every choice."""
    choices: dict[int, fmt.Choice] = {}
    prompt: list[TokenText] = []
    async with contextlib.aclosing(events) as items:
        async for item in items:
            if isinstance(item, TextDone):
                found = [choices[i] for i in sorted(choices)]
                return [replace(c, prompt_logprobs=prompt) for c in found], item
            choice = choices.setdefault(item.index, fmt.Choice(item.index))
            if isinstance(item, ChoiceEnded):
                choice.finish_reason = item.finish_reason.value
            else:
                choice.parts.append(item.text)
                choice.logprobs.extend(item.logprobs)
                prompt += item.prompt_logprobs
    raise UpstreamError("the generation ended without a final event")


async def prompt_only(events: Events) -> Events:
    """``events`` with the generated text and its tokens left out, ending with ``length`` and no
    completion token counted: ``max_tokens: 0`` with ``echo`` (one token is generated, as the engine
    needs at least one, and dropped here)."""
    length = FinishReason.LENGTH
    async with contextlib.aclosing(events) as items:
        async for item in items:
            if isinstance(item, TextDelta):
                yield replace(item, text="", token_ids=(), logprobs=())
            elif isinstance(item, ChoiceEnded):
                yield replace(item, finish_reason=length)
            else:
                yield replace(item, finish_reason=length, usage=replace(item.usage, completion_tokens=0))


def _summed(dones: list[TextDone]) -> TextDone:
    """The last generation's end, with the usage of all of them."""
    fields = ("prompt_tokens", "completion_tokens", "cached_tokens", "cached_gpu_tokens",
              "cached_cpu_tokens", "evicted_predicted_tokens")  # fmt: skip
    usage = Usage(**{f: sum(getattr(d.usage, f) for d in dones) for f in fields})
    return replace(dones[-1], usage=usage)


def chat_renderer(
    rid: str, model: str, choices: int, usage: bool, logprobs: bool, tools: CallReading | None = None
) -> Renderer:
    """OpenAI's chat chunks: the role of every choice first, then content (with its log-probabilities
    when asked), each choice's finish as it ends, and the usage last when asked. With ``tools`` (how
    calls are read), calls stream as ``tool_calls`` deltas (see :class:`ToolDeltas`)."""
    started = [False]
    calls = None if tools is None else ToolDeltas(rid, model, tools)

    def render(item: Event) -> list[bytes]:
        out = []
        if not started[0]:
            started[0] = True
            role = {"role": "assistant", "content": ""}
            out += [fmt.sse(fmt.chat_chunk(rid, model, role, index=i)) for i in range(choices)]
        if isinstance(item, TextDelta):
            lp = fmt.chat_logprobs(item.logprobs) if logprobs else None
            if calls is not None:
                out += calls.text(item.index, item.text, lp if item.logprobs else None)
            elif item.text or item.logprobs:
                out.append(fmt.sse(fmt.chat_chunk(rid, model, {"content": item.text}, None, item.index, lp)))
        elif isinstance(item, ChoiceEnded):
            if calls is not None:
                out += calls.end(item.index, item.finish_reason.value)
            else:
                out.append(fmt.sse(fmt.chat_chunk(rid, model, {}, item.finish_reason.value, item.index)))
        elif usage:
            out.append(fmt.sse(fmt.usage_chunk(rid, model, "chat.completion.chunk", item.usage)))
        return out

    return render


def completion_renderer(
    rid: str, model: str, usage: bool, logprobs: bool, echo: Sequence[str], n: int = 1
) -> Renderer:
    """OpenAI's completion chunks: each choice's echoed prompt first (with ``echo``; with its tokens'
    log-probabilities when they were scored), then its text (with its log-probabilities when asked),
    its finish as it ends, and the usage last when asked. ``n``: choices per prompt (the prompt's
    scores come with its first choice's first delta, before any other choice of that prompt's)."""
    offsets = [len(e) for e in echo]
    echoed: set[int] = set()
    scored: dict[int, tuple[TokenText, ...]] = {}  # prompt number -> its tokens' log-probabilities

    def echo_chunk(item: TextDelta | ChoiceEnded) -> list[bytes]:
        echoed.add(item.index)
        if isinstance(item, TextDelta) and item.prompt_logprobs:
            scored[item.index // n] = item.prompt_logprobs
        prompt = scored.get(item.index // n, ())
        lp = fmt.completion_logprobs(prompt) if prompt and logprobs else None
        if prompt:
            offsets[item.index] = sum(len(t.token) for t in prompt)
        if not echo[item.index]:
            return []
        return [fmt.sse(fmt.completion_chunk(rid, model, echo[item.index], None, item.index, lp))]

    def render(item: Event) -> list[bytes]:
        out = []
        if not isinstance(item, TextDone) and item.index not in echoed:
            out += echo_chunk(item)
        if isinstance(item, TextDelta):
            if item.text or item.logprobs:
                lp = fmt.completion_logprobs(item.logprobs, offsets[item.index]) if logprobs else None
                offsets[item.index] += sum(len(t.token) for t in item.logprobs)
                out.append(fmt.sse(fmt.completion_chunk(rid, model, item.text, None, item.index, lp)))
        elif isinstance(item, ChoiceEnded):
            out.append(fmt.sse(fmt.completion_chunk(rid, model, "", item.finish_reason.value, item.index)))
        elif usage:
            out.append(fmt.sse(fmt.usage_chunk(rid, model, "text_completion", item.usage)))
        return out

    return render


async def token_ids_as_text(events: Events) -> Events:
    """``events`` with every log-probability's token written ``token_id:N`` (vLLM's
    ``return_tokens_as_token_ids``: the id survives tokens that do not decode alone)."""
    async with contextlib.aclosing(events) as items:
        async for item in items:
            if isinstance(item, TextDelta):
                prompt = _as_ids(item.prompt_logprobs)
                item = replace(item, logprobs=_as_ids(item.logprobs), prompt_logprobs=prompt)
            yield item


def _as_ids(items: tuple[TokenText, ...]) -> tuple[TokenText, ...]:
    def named(t: TokenText) -> TokenText:
        top = tuple((f"token_id:{i}", v) for i, (_, v) in zip(t.top_ids, t.top, strict=True))
        return replace(t, token=f"token_id:{t.token_id}", top=top)

    return tuple(named(t) for t in items)


def with_echo(to_json: Callable[..., dict], echo: str) -> Callable[..., dict]:
    """``to_json`` with ``echo`` (a continued assistant message, chat ``echo``) before each choice's text."""

    def answer(choices: list[fmt.Choice], done: TextDone) -> dict:
        return to_json([replace(c, parts=[echo, *c.parts]) for c in choices], done)

    return answer
