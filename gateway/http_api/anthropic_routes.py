"""``POST /v1/messages``, Anthropic-style: cache_control breakpoints pin prefixes for their TTL class,
and usage separates cache reads from cache writes. A thin translation over the request core."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.http_api import anthropic_events as events
from kvgate.gateway.http_api.anthropic_prompt import anthropic_request
from kvgate.gateway.http_api.anthropic_responses import MESSAGES_RESPONSES
from kvgate.gateway.http_api.anthropic_schemas import MessagesRequest
from kvgate.gateway.http_api.anthropic_tools import readable_names
from kvgate.gateway.http_api.auth import HttpAuth
from kvgate.gateway.http_api.json_body import body_doc, json_body, most_items
from kvgate.gateway.http_api.request_ids import with_id
from kvgate.gateway.http_api.streaming import CLIENT_CLOSED_REQUEST, collect_while_connected, stream_response
from kvgate.gateway.tenancy import Caller


def build_anthropic_router(core: RequestCore, auth: HttpAuth) -> APIRouter:
    router = APIRouter()
    items = most_items(core.settings.limits)

    @router.post("/v1/messages", response_model=None, responses=MESSAGES_RESPONSES,
                 openapi_extra=body_doc(MessagesRequest))  # fmt: skip
    async def messages(
        request: Request,
        body: MessagesRequest = Depends(json_body(MessagesRequest, items)),  # noqa: B008
        caller: Caller = Depends(auth),  # noqa: B008
    ) -> Response:
        job = await core.prepare(with_id(anthropic_request(body), request), caller)
        mid, hint, tools = f"msg_{job.request_id}", job.cache_hint, core.call_reading(readable_names(body))
        if not body.stream:
            answer = await collect_while_connected(core.generate(job), request)
            if answer is None:
                return Response(status_code=CLIENT_CLOSED_REQUEST)
            return JSONResponse(events.message(mid, body.model, *answer, hint, tools))
        render = events.renderer(mid, body.model, hint, job.prompt_tokens, tools)
        return await stream_response(core.generate(job), render, anthropic=True)

    return router
