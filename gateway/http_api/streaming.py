"""Running a generation for an HTTP handler: collect it, or stream it as server-sent events.

The first event is awaited before the response starts, so a request that cannot be routed still gets
a proper 4xx/5xx status; a failure after that ends the event stream with an error event (OpenAI: a
data-only event with the error body; Anthropic: an ``error`` event).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import StreamingResponse

from kvgate.gateway.core.textgen import TextDelta, TextDone
from kvgate.gateway.errors import GatewayError
from kvgate.gateway.http_api.errors import error_body
from kvgate.gateway.http_api.openai_format import sse
from kvgate.gateway.upstream.errors import UpstreamError

log = logging.getLogger(__name__)

Events = AsyncIterator[TextDelta | TextDone]
T = TypeVar("T")
CLIENT_CLOSED_REQUEST = 499  # the status logged for an answer nobody was left to receive


def stream_content(events: Sequence[str] = ("message",)) -> dict[str, Any]:
    """OpenAPI ``content`` of a streamed answer: server-sent events named ``events``, each carrying
    one JSON document (or OpenAI's final ``[DONE]``) as its data. (Before OpenAPI 3.2, the schema of
    ``text/event-stream`` describes one event.)"""
    event = {
        "type": "object",
        "properties": {"event": {"enum": list(events)}, "data": {"type": "string"}},
        "required": ["data"],
    }
    return {"text/event-stream": {"schema": event}}


async def collect(events: Events) -> tuple[str, TextDone]:
    """All the text and the final event of a generation."""
    parts: list[str] = []
    async with contextlib.aclosing(events) as items:
        async for item in items:
            if isinstance(item, TextDone):
                return "".join(parts), item
            parts.append(item.text)
    raise UpstreamError("the generation ended without a final event")


async def collect_while_connected(
    events: Events | Awaitable[T], request: Request
) -> tuple[str, TextDone] | T | None:
    """:func:`collect` of ``events`` (or another collecting awaitable), unless the client disconnects
    first: then the generation is closed (which cancels the request on its worker and frees its KV
    blocks) and None is returned."""
    work = asyncio.ensure_future(events if inspect.isawaitable(events) else collect(events))
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if work.done():
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work
    log.info("client disconnected before the answer; the request was cancelled")
    return None


async def _client_gone(request: Request) -> None:
    """Returns when the client disconnects (the body was read already, so the next ASGI message is
    the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def stream_response(
    events: AsyncIterator[T],
    render: Callable[[T], list[bytes]],
    anthropic: bool = False,
    error_event: Callable[[GatewayError], bytes] | None = None,
) -> StreamingResponse:
    """An SSE response whose events ``render`` makes from the text stream; raises the first error.
    OpenAI's streams end with ``data: [DONE]``, Anthropic's with the renderer's ``message_stop``. A
    front with its own ``error_event`` (the Responses API) ends with its renderer's last event, and a
    failure after the first event with that error event."""
    first = await anext(events)
    return StreamingResponse(
        _body(first, events, render, anthropic, error_event),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _body(
    first: T,
    events: AsyncIterator[T],
    render: Callable[[T], list[bytes]],
    anthropic: bool,
    error_event: Callable[[GatewayError], bytes] | None,
) -> AsyncIterator[bytes]:
    async with contextlib.aclosing(events) as items:
        try:
            for chunk in render(first):
                yield chunk
            async for item in items:
                for chunk in render(item):
                    yield chunk
        except UpstreamError as exc:
            log.warning("stream failed: %s", exc)
            yield error_event(exc) if error_event is not None else _error_event(exc, anthropic)
    if not anthropic and error_event is None:
        yield sse("[DONE]")


def _error_event(error: GatewayError, anthropic: bool) -> bytes:
    if anthropic:
        return f"event: error\ndata: {json.dumps(error_body(error, True), ensure_ascii=False)}\n\n".encode()
    return sse(error_body(error))
