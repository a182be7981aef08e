"""One ``SubscribeEvents`` stream: the subscription's snapshot and batches (and admissions, if it asked
for them), in order, with the worker's load figures interleaved whenever they changed, at most once per
``load_period_s``. An admission carries the load too, so it counts as the last load sent: a load
message follows it only when the figures changed since, a period later at the earliest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from kvgate.proto import convert, worker_pb2
from kvgate.proto.events import Admission
from kvgate.proto.workers import WorkerLoad
from kvgate.workers.service.event_hub import Subscription
from kvgate.workers.service.messages import event_message

LOAD_PERIOD_S = 0.1


async def event_stream(
    subscription: Subscription, load: Callable[[], WorkerLoad], load_period_s: float = LOAD_PERIOD_S
) -> AsyncIterator[worker_pb2.EventStreamMessage]:
    """Until the subscription ends. ``load`` is read on the event loop (no I/O)."""
    loop = asyncio.get_running_loop()
    sent: WorkerLoad | None = None
    sent_at = -load_period_s
    waiting: asyncio.Task | None = None
    try:
        while True:
            waiting = waiting or asyncio.ensure_future(subscription.get())
            done, _ = await asyncio.wait([waiting], timeout=max(0.0, sent_at + load_period_s - loop.time()))
            if done:
                item, waiting = waiting.result(), None
                if item is None:
                    return
                yield event_message(item)
                if isinstance(item, Admission):
                    sent, sent_at = item.load, loop.time()
            if loop.time() >= sent_at + load_period_s and (current := load()) != sent:
                sent, sent_at = current, loop.time()
                yield worker_pb2.EventStreamMessage(load=convert.worker_load_to_proto(current))
            elif loop.time() >= sent_at + load_period_s:
                sent_at = loop.time()  # unchanged: look again one period later
    finally:
        if waiting is not None:
            waiting.cancel()
