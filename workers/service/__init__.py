"""The worker service: the gRPC face of one engine.

Walk a request through it: the gateway calls ``KVWorker.Generate`` -> :class:`WorkerServicer`
(``servicer``) converts and validates it (``messages``) and submits it to the :class:`EngineLoop`
(``engine_loop``), which admits it (bounded) and hands it to the engine; the engine thread steps the
engine and posts each step's outputs back to the event loop, where the request's
:class:`RequestStream` (``request_stream``) feeds the gRPC stream: one TokenBatch per step, then a
FinalResult. Each step's KV events go to the :class:`EventHub` (``event_hub``), which keeps a
:class:`HoldingsMirror` (``holdings``) for snapshots and fans the events out to ``SubscribeEvents``
streams (the gateway's embedded index) and to the :class:`IndexPublisher` (``index_publisher``; the
shared Redis index). :class:`WorkerServer` (``server``) builds it all from a :class:`WorkerConfig`.
"""

from kvgate.workers.service.config import WorkerConfig
from kvgate.workers.service.engine_loop import EngineLoop
from kvgate.workers.service.engine_stats import EngineStats
from kvgate.workers.service.errors import (
    AdmissionFullError,
    DuplicateRequestError,
    EngineUnavailableError,
    ServiceError,
)
from kvgate.workers.service.event_hub import EventHub, Subscription
from kvgate.workers.service.holdings import EventItem, HoldingsMirror
from kvgate.workers.service.index_publisher import IndexPublisher
from kvgate.workers.service.request_stream import RequestStream
from kvgate.workers.service.server import SERVICE_NAME, WorkerServer
from kvgate.workers.service.servicer import WorkerServicer

__all__ = [
    "SERVICE_NAME",
    "AdmissionFullError",
    "DuplicateRequestError",
    "EngineLoop",
    "EngineStats",
    "EngineUnavailableError",
    "EventHub",
    "EventItem",
    "HoldingsMirror",
    "IndexPublisher",
    "RequestStream",
    "ServiceError",
    "Subscription",
    "WorkerConfig",
    "WorkerServer",
    "WorkerServicer",
]
