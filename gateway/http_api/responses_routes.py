"""``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``, ``GET
/v1/responses/{id}/input_items``: OpenAI's Responses API, a thin translation over the request core.

A stored response (``store``, true by default) is kept with its whole conversation, for its tenant,
in the :class:`~kvgate.gateway.conversations.ResponseStore` the composition root gives; a request
naming it as ``previous_response_id`` continues that conversation (see :mod:`.responses_input`). An
id the caller's tenant has no response of (unknown, expired, deleted, another tenant's) is a 404.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from kvgate.gateway.conversations import ResponseStore, StoredResponse
from kvgate.gateway.core.request import GenerateRequest
from kvgate.gateway.core.spine import RequestCore
from kvgate.gateway.core.textgen import TextDelta, TextDone
from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.http_api.auth import HttpAuth
from kvgate.gateway.http_api.error_bodies import error_responses
from kvgate.gateway.http_api.json_body import body_doc, json_body, most_items
from kvgate.gateway.http_api.request_ids import with_id
from kvgate.gateway.http_api.responses_events import ResponseEvents
from kvgate.gateway.http_api.responses_format import ResponseShape
from kvgate.gateway.http_api.responses_input import input_turns, readable_names, responses_request
from kvgate.gateway.http_api.responses_input_items import input_items, page
from kvgate.gateway.http_api.responses_items import OutputItems
from kvgate.gateway.http_api.responses_schemas import ResponsesRequest
from kvgate.gateway.http_api.streaming import CLIENT_CLOSED_REQUEST, collect_while_connected, stream_response
from kvgate.gateway.tenancy import Caller
from kvgate.gateway.upstream.errors import UpstreamError
from kvgate.gateway.upstream.job import Job
from kvgate.proto.sampling import FinishReason

Events = AsyncIterator[TextDelta | TextDone]
log = logging.getLogger(__name__)


class _Turn:
    """One response being made: its request, the conversation it continues, where it is kept."""

    def __init__(self, body: ResponsesRequest, earlier: Sequence[dict[str, str]], store: ResponseStore,
                 tenant: str) -> None:  # fmt: skip
        self.body, self.earlier, self.store, self.tenant = body, earlier, store, tenant

    async def keep(self, response: dict[str, Any], output: OutputItems) -> None:
        """Stores ``response`` with its whole conversation, unless ``store`` is false. A store that
        cannot keep it now is logged: the answer goes out all the same (a continuation of it is then
        a 404)."""
        if not self.body.stored:
            return
        turns = (*self.earlier, *input_turns(self.body), output.turn())
        try:
            await self.store.put(self.tenant, StoredResponse(response, turns, input_items(self.body)))
        except GatewayError as exc:
            log.warning("response %s was not stored: %s", response["id"], exc.message)


async def _collected(events: Events, output: OutputItems) -> TextDone:
    """Feeds the whole generation to ``output``; its end."""
    async with contextlib.aclosing(events) as items:
        async for item in items:
            if isinstance(item, TextDone):
                output.finish(item.finish_reason is not FinishReason.LENGTH)
                return item
            output.text(item.text)
    raise UpstreamError("the generation ended without a final event")


async def _rendered(
    events: Events, render: ResponseEvents, turn: _Turn, output: OutputItems
) -> AsyncIterator[list[bytes]]:
    """The stream's events, the response stored before its last event is sent (a client that has it
    can continue at once)."""
    async with contextlib.aclosing(events) as items:
        async for item in items:
            chunks = render.render(item)
            if isinstance(item, TextDone) and render.final is not None:
                await turn.keep(render.final, output)
            yield chunks


# The core's names of the fields it refuses, and this API's (the prompt: the input and its history).
_FIELDS = {"messages": "input", "max_tokens": "max_output_tokens"}


async def _prepared(core: RequestCore, generate: GenerateRequest, caller: Caller) -> Job:
    """:meth:`RequestCore.prepare`, its refusals naming this API's fields."""
    try:
        return await core.prepare(generate, caller)
    except GatewayError as exc:
        if exc.param in _FIELDS:
            exc.message = exc.message.replace(exc.param, _FIELDS[exc.param], 1)
            exc.param = _FIELDS[exc.param]
        raise


def _not_found(response_id: str, param: str) -> GatewayError:
    return GatewayError(f"No response with id '{response_id}' found.", ErrorKind.NOT_FOUND, param=param,
                        code="response_not_found")  # fmt: skip


def build_responses_router(core: RequestCore, auth: HttpAuth, store: ResponseStore) -> APIRouter:
    router = APIRouter()
    items = most_items(core.settings.limits)

    async def stored(caller: Caller, response_id: str, param: str) -> StoredResponse:
        found = await store.get(caller.tenant.name, response_id)
        if found is None:
            raise _not_found(response_id, param)
        return found

    @router.post("/v1/responses", response_model=None, responses=error_responses(),
                 openapi_extra=body_doc(ResponsesRequest))  # fmt: skip
    async def create(
        request: Request,
        body: ResponsesRequest = Depends(json_body(ResponsesRequest, items)),  # noqa: B008
        caller: Caller = Depends(auth),  # noqa: B008
    ) -> Response:
        """A response, streamed or not; stored unless ``store`` is false."""
        previous = body.previous_response_id
        earlier = (await stored(caller, previous, "previous_response_id")).turns if previous else ()
        job = await _prepared(core, with_id(responses_request(body, earlier), request), caller)
        shape = ResponseShape(f"resp_{job.request_id}", int(time.time()), body)
        turn, output = (
            _Turn(body, earlier, store, caller.tenant.name),
            OutputItems(core.call_reading(readable_names(body))),
        )
        if body.stream:
            render = ResponseEvents(shape, output)
            chunks = _rendered(core.generate(job), render, turn, output)
            return await stream_response(chunks, lambda c: c, error_event=render.error)
        done = await collect_while_connected(_collected(core.generate(job), output), request)
        if done is None:
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        response = shape.object(output.items, done)
        await turn.keep(response, output)
        return JSONResponse(response)

    @router.get("/v1/responses/{response_id}", response_model=None, responses=error_responses())
    async def get(response_id: str, caller: Caller = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        """A stored response of the caller's tenant; 404 for any other id."""
        return (await stored(caller, response_id, "response_id")).response

    @router.get("/v1/responses/{response_id}/input_items", response_model=None, responses=error_responses())
    async def listed(
        response_id: str, request: Request, caller: Caller = Depends(auth),  # noqa: B008
    ) -> dict[str, Any]:  # fmt: skip
        """The input items of a stored response of the caller's tenant, paged (``limit``, ``order``,
        ``after``); 404 for any other id."""
        found = await stored(caller, response_id, "response_id")
        return page(found.input_items, request.query_params)

    @router.delete("/v1/responses/{response_id}", response_model=None, responses=error_responses())
    async def delete(response_id: str, caller: Caller = Depends(auth)) -> dict[str, Any]:  # noqa: B008
        """Forgets a stored response of the caller's tenant; 404 for any other id."""
        if not await store.delete(caller.tenant.name, response_id):
            raise _not_found(response_id, "response_id")
        return {"id": response_id, "object": "response.deleted", "deleted": True}

    return router
