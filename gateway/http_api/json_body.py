"""Request bodies decoded and validated off the event loop.

A body under the limit (8 MiB) can hold hundreds of thousands of JSON items; decoding and validating
it costs about a second of CPU. On the event loop that second would stall every other request,
``/health`` included, so the fronts declare their bodies as dependencies of :func:`json_body`, which
read the (already buffered) body and decode and validate it in a worker thread. The errors are the
ones FastAPI's own parsing gives (the same 400, or 415 for a body that is not JSON), and
:func:`body_doc` with :func:`document_bodies` keep the bodies in the OpenAPI schema.
"""

from __future__ import annotations

import asyncio
import email.message
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ValidationError

from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.body_errors import invalid_body, unreadable_body
from kvgate.gateway.settings import Limits

Body = TypeVar("Body", bound=BaseModel)
Chooser = Callable[[Any], type[BaseModel]]


def json_body(model: type[Body] | Chooser, max_items: int) -> Callable[[Request], Awaitable[Body]]:
    """A FastAPI dependency: the request's body as ``model`` (a model class, or a function of the
    decoded JSON that picks one), decoded and validated in a worker thread. GatewayError (400 / 415)
    when it is not a valid body; a body with an array of more than ``max_items`` items (more than any
    valid request has) is refused before it is validated."""
    choose = (lambda _: model) if isinstance(model, type) else model

    async def dependency(request: Request) -> Any:
        raw = await request.body()
        return await asyncio.to_thread(parse, raw, request.headers.get("content-type"), choose, max_items)

    return dependency


def parse(raw: bytes, content_type: str | None, choose: Chooser, max_items: int) -> BaseModel:
    """``raw`` decoded and validated as the model ``choose`` picks for it (runs in any thread)."""
    if not raw:
        raise invalid_body([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
    if not _is_json(content_type):
        raise invalid_body([], raw)  # the 415
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise invalid_body(
            [{"type": "json_invalid", "loc": ("body", exc.pos), "ctx": {"error": exc.msg}}]
        ) from None
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise _unreadable(exc) from None
    if not isinstance(value, dict):
        raise invalid_body([{"type": "model_attributes_type", "loc": ("body",), "msg": "not an object"}])
    _check_arrays(value, max_items)
    try:
        return choose(value).model_validate(value)
    except ValidationError as exc:
        raise invalid_body([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def _check_arrays(value: dict[str, Any], max_items: int) -> None:
    """GatewayError (400) naming the first array of ``value`` (at any depth) longer than ``max_items``."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        children = (
            item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        )
        if isinstance(item, list) and len(item) > max_items:
            raise invalid(f"{path}: at most {max_items} items, got {len(item)}", path)
        pending.extend((f"{path}.{key}".lstrip("."), child) for key, child in children
                       if isinstance(child, dict | list))  # fmt: skip


def _unreadable(exc: Exception) -> Exception:
    error = unreadable_body(exc)
    return error if error is not None else exc


def _is_json(content_type: str | None) -> bool:
    """``application/json`` or ``application/*+json`` (a body without a content type is not JSON)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def most_items(limits: Limits) -> int:
    """A bound well above the longest array a valid request can have (its messages, or its prompt's
    token ids), so that a request just over a limit still gets the specific error of that limit."""
    return 4 * max(limits.max_messages, limits.context_window)


def body_doc(*models: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of an endpoint whose body is one of ``models``."""
    refs = [{"$ref": f"#/components/schemas/{m.__name__}"} for m in models]
    schema = refs[0] if len(refs) == 1 else {"anyOf": refs}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def document_bodies(app: FastAPI, models: list[type[BaseModel]]) -> None:
    """Adds ``models`` (and the models they use) to ``app``'s OpenAPI components, where
    :func:`body_doc` refers to them."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in models:
                found = model.model_json_schema(ref_template="#/components/schemas/{model}")
                components.update(found.pop("$defs", {}))
                components[model.__name__] = found
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
