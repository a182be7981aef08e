"""The FastAPI application: routes, error format, body limit, health. Built once by the
composition root from the services it is given."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from kvgate.gateway.conversations import ResponseStore
from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.http_api.admin import AdminOnly
from kvgate.gateway.http_api.admission import Admission
from kvgate.gateway.http_api.anthropic_routes import build_anthropic_router
from kvgate.gateway.http_api.anthropic_schemas import MessagesRequest
from kvgate.gateway.http_api.auth import HttpAuth
from kvgate.gateway.http_api.body_limit import BodyLimit, BodyReader
from kvgate.gateway.http_api.dashboard import build_dashboard_router
from kvgate.gateway.http_api.diagnose_routes import build_diagnose_router
from kvgate.gateway.http_api.errors import install_error_handlers
from kvgate.gateway.http_api.health import HEALTH_RESPONSES
from kvgate.gateway.http_api.json_body import document_bodies
from kvgate.gateway.http_api.openai_routes import build_openai_router
from kvgate.gateway.http_api.openai_schemas import ChatCompletionRequest, CompletionRequest
from kvgate.gateway.http_api.request_ids import RequestIds
from kvgate.gateway.http_api.responses_routes import build_responses_router
from kvgate.gateway.http_api.responses_schemas import ResponsesRequest
from kvgate.gateway.http_api.route_routes import build_route_router
from kvgate.gateway.metrics import GatewayMetrics
from kvgate.gateway.upstream.directory import WorkerDirectory

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_app(
    core: RequestCore,
    directory: WorkerDirectory,
    metrics: GatewayMetrics,
    responses: ResponseStore,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """The HTTP front over ``core`` (whose in-flight gate and authenticator its gRPC front shares);
    ``responses`` keeps the Responses API's stored responses."""
    app = FastAPI(title="kvgate", version="0.1.0", lifespan=lifespan)
    auth = HttpAuth(core)
    install_error_handlers(app)
    reader = BodyReader(core.settings.limits.max_body_bytes, core.settings.http_timeouts)
    app.add_middleware(BodyLimit, reader=reader)
    app.add_middleware(Admission, core=core, reader=reader)  # the key before the body
    app.add_middleware(AdminOnly, keys=core.settings.admin_keys)
    app.add_middleware(RequestIds)  # outermost: every answer, refusals included, names its request
    app.include_router(build_openai_router(core, auth))
    app.include_router(build_anthropic_router(core, auth))
    app.include_router(build_responses_router(core, auth, responses))
    app.include_router(
        build_dashboard_router(metrics, directory, diagnosis_enabled=core.settings.diagnosis.enabled)
    )
    app.include_router(build_route_router(core, auth))
    app.include_router(build_diagnose_router(core, auth))
    document_bodies(app, [ChatCompletionRequest, CompletionRequest, MessagesRequest, ResponsesRequest])

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> Response:
        """Prometheus exposition of this gateway's metrics."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/health", responses=HEALTH_RESPONSES)
    async def health() -> JSONResponse:
        """200 when at least one worker is routable (quarantined ones are a last resort, so they count),
        else 503 (load balancers take it out). ``degraded`` while the worker list is stale or Redis
        is unreachable (routing goes on, on this gateway's replica)."""
        live, stale, shared = len(directory.known()), directory.stale, directory.shared_reachable
        body = {
            "status": ("degraded" if stale or shared is False else "ok") if live else "unavailable",
            "workers": live,
            "index_degraded": directory.degraded,
            "discovery_stale": stale,
            "refused_workers": len(directory.rejected),
            "unfollowed_workers": directory.unfollowed,
            "shared_index_reachable": shared,
        }
        return JSONResponse(body, status_code=200 if live else 503)

    return app
