"""``RequestStream``: one submitted request's outputs, handed from the engine thread to asyncio, and
``RequestSinks``: the streams of every request in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kvgate.workers.engine import StepOutput

# What the engine loop puts in a request's queue: an output, or the error that ends the stream.
Delivery = StepOutput | Exception


class RequestStream:
    """Async iterator over one request's :class:`StepOutput` s, in order; the last one is final.

    Lives on the event loop's thread (never touch it from another). When the engine fails or stops
    before the final output, iteration raises the error the loop delivered (an
    ``EngineUnavailableError``). :meth:`close` before the end aborts the request in the engine (its
    blocks are freed at the next step boundary); closing a finished stream does nothing.
    """

    def __init__(self, request_id: str, queue: asyncio.Queue[Delivery], detach: Callable[[str], None]):
        self.request_id = request_id
        self._queue = queue
        self._detach = detach
        self._done = False

    @property
    def finished(self) -> bool:
        """True once the final output (or an error) was taken, or the stream was closed."""
        return self._done

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> StepOutput:
        if self._done:
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, Exception):
            self._done = True
            raise item
        self._done = item.finished
        return item

    def close(self) -> None:
        """Stops listening; aborts the request unless it has finished. Idempotent."""
        if not self._done:
            self._done = True
            self._detach(self.request_id)


class RequestSinks:
    """The event loop's end of every request in flight: request id -> its stream's queue (None once
    the consumer left). An entry lives from submission until the final output (or an error) comes
    back, so its count is what the engine still holds. Event-loop only."""

    def __init__(self) -> None:
        self._queues: dict[str, asyncio.Queue[Delivery] | None] = {}

    def __len__(self) -> int:
        return len(self._queues)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._queues

    def open(self, request_id: str, detach: Callable[[str], None]) -> RequestStream:
        """A stream for a request just handed to the engine; ``detach`` aborts it there."""
        queue: asyncio.Queue[Delivery] = asyncio.Queue()
        self._queues[request_id] = queue
        return RequestStream(request_id, queue, detach)

    def mute(self, request_id: str) -> bool:
        """Drops the request's further outputs (its consumer left); False when it is not in flight."""
        if request_id not in self._queues:
            return False
        self._queues[request_id] = None
        return True

    def deliver(self, out: StepOutput) -> None:
        """Queues ``out`` for its consumer; a final output closes the entry. Unknown ids (failed or
        stopped already) are ignored."""
        if out.request_id not in self._queues:
            return
        queue = self._queues.pop(out.request_id) if out.finished else self._queues[out.request_id]
        if queue is not None:
            queue.put_nowait(out)

    def fail_all(self, error: Exception) -> None:
        """Ends every stream in flight with ``error`` and forgets them."""
        queues, self._queues = self._queues, {}
        for queue in queues.values():
            if queue is not None:
                queue.put_nowait(error)
