"""Running a generation for an HTTP handler: collect it, or stream it as server-sent events.

The first event is awaited before the response starts, so a request that cannot be routed still gets
a proper 4xx/5xx status; a failure after that ends the event stream with an error event.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from fastapi.responses import StreamingResponse

from kvgate.gateway.api.errors import from_upstream
from kvgate.gateway.api.openai_format import sse
from kvgate.gateway.textgen import TextDelta, TextDone
from kvgate.gateway.upstream.errors import UpstreamError

log = logging.getLogger(__name__)

Events = AsyncIterator[TextDelta | TextDone]


async def collect(events: Events) -> tuple[str, TextDone]:
    """All the text and the final event of a generation."""
    parts: list[str] = []
    async with contextlib.aclosing(events) as items:
        async for item in items:
            if isinstance(item, TextDone):
                return "".join(parts), item
            parts.append(item.text)
    raise UpstreamError("the generation ended without a final event")


async def stream_response(
    events: Events, render: Callable[[TextDelta | TextDone], list[bytes]], done_marker: bool = True
) -> StreamingResponse:
    """An SSE response whose events ``render`` makes from the text stream; raises the first error."""
    first = await anext(events)
    return StreamingResponse(
        _body(first, events, render, done_marker),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _body(
    first: TextDelta | TextDone, events: Events, render: Callable, done_marker: bool
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
            error = from_upstream(exc)
            yield sse({"error": {"message": error.message, "type": error.type, "code": error.code}})
    if done_marker:
        yield sse("[DONE]")
