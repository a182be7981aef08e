"""``GET /v1/responses/{id}/input_items``: the items of a stored response's input, in OpenAI's list
shape (``data``, ``first_id``, ``last_id``, ``has_more``), paged by ``limit``, ``order`` and ``after``.

The items are those of the response's own ``input`` (not its ``instructions``, nor the turns of the
response it continued), as OpenAI lists them: a string input is one ``user`` message of one
``input_text`` part; each item has an ``id`` (the one the client gave, else a fresh ``msg_...``,
``fc_...`` or ``fco_...``) and ``status: "completed"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvgate.gateway.errors import invalid
from kvgate.gateway.http_api.responses_items import item_id
from kvgate.gateway.http_api.responses_schemas import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ResponsesRequest,
)

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
Item = dict[str, Any]


def input_items(body: ResponsesRequest) -> tuple[Item, ...]:
    """The items of ``body.input``, oldest first, as the list endpoint returns them."""
    if isinstance(body.input, str):
        return (_message("user", [{"type": "input_text", "text": body.input}], None),)
    return tuple(_item(item) for item in body.input)


def _item(item: Any) -> Item:
    if isinstance(item, MessageItem):
        if not isinstance(item.content, str):
            return _message(item.role, _dumped(item.content), item.id)
        kind = "output_text" if item.role == "assistant" else "input_text"
        return _message(item.role, [{"type": kind, "text": item.content}], item.id)
    if isinstance(item, FunctionCallItem):
        return {"id": item.id or item_id("fc"), "type": "function_call", "status": "completed",
                "call_id": item.call_id, "name": item.name, "arguments": item.arguments}  # fmt: skip
    assert isinstance(item, FunctionCallOutputItem)  # the other kinds are refused before
    output = item.output if isinstance(item.output, str) else _dumped(item.output)
    return {"id": item.id or item_id("fco"), "type": "function_call_output", "status": "completed",
            "call_id": item.call_id, "output": output}  # fmt: skip


def _message(role: str, content: list[Item], given_id: str | None) -> Item:
    return {"id": given_id or item_id("msg"), "type": "message", "role": role, "status": "completed",
            "content": content}  # fmt: skip


def _dumped(parts: Sequence[Any]) -> list[Item]:
    return [part.model_dump(exclude_none=True) for part in parts]


def page(items: Sequence[Item], query: Mapping[str, str]) -> dict[str, Any]:
    """One page of ``items`` (oldest first) as ``query`` asks: ``order`` ``desc`` (the default: newest
    first) or ``asc``, the items after the one whose id is ``after`` in that order, at most ``limit``
    (1 to 100, default 20). INVALID_REQUEST, naming the parameter, for a value outside those."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid(f"`order` must be `asc` or `desc`, got {order!r}", "order")
    ordered = list(items) if order == "asc" else list(reversed(items))
    start = _after(ordered, query.get("after"))
    chosen = ordered[start : start + _limit(query.get("limit"))]
    return {
        "object": "list",
        "data": chosen,
        "first_id": chosen[0]["id"] if chosen else None,
        "last_id": chosen[-1]["id"] if chosen else None,
        "has_more": start + len(chosen) < len(ordered),
    }


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise invalid(f"`limit` must be an integer from 1 to {MAX_LIMIT}, got {value!r}", "limit")
    return int(value)


def _after(ordered: Sequence[Item], after: str | None) -> int:
    """Where the page starts: 0, or just past the item ``after`` names."""
    if after is None:
        return 0
    for at, item in enumerate(ordered):
        if item["id"] == after:
            return at + 1
    raise invalid(f"`after` names no input item of this response: {after!r}", "after")
