"""The response object of ``/v1/responses`` (a dict, as OpenAI's API returns it), from the request
body, the output items and the generation's end."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kvgate.gateway.core.textgen import TextDone
from kvgate.gateway.http_api.openai_format import route_json
from kvgate.gateway.http_api.responses_schemas import FunctionTool, ResponsesRequest
from kvgate.proto.sampling import FinishReason, Usage

_STATUS = {FinishReason.LENGTH: "incomplete", FinishReason.ERROR: "failed", FinishReason.ABORT: "failed"}


def status_of(done: TextDone) -> str:
    """``completed``; ``incomplete`` when the token limit cut it off; ``failed`` when its worker did."""
    return _STATUS.get(done.finish_reason, "completed")


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


@dataclass(frozen=True, slots=True)
class ResponseShape:
    """What a response object repeats of its request, fixed when it is created."""

    rid: str
    created_at: int
    body: ResponsesRequest

    def object(self, output: list[dict[str, Any]], done: TextDone | None) -> dict[str, Any]:
        """The response object: ``in_progress`` with no output and no usage before ``done``."""
        status = "in_progress" if done is None else status_of(done)
        return (
            self._request_fields()
            | {
                "status": status,
                "output": output,
                "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
                "error": _failure() if status == "failed" else None,
                "usage": None if done is None else usage_json(done.usage),
                "completed_at": int(time.time()) if status == "completed" else None,
            }
            | ({} if done is None else {"kvgate": route_json(done)})
        )

    def _request_fields(self) -> dict[str, Any]:
        body = self.body
        return {
            "id": self.rid,
            "object": "response",
            "created_at": self.created_at,
            "model": body.model,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "previous_response_id": body.previous_response_id,
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "tool_choice": _choice(body),
            "tools": [_tool(t) for t in body.tools or () if isinstance(t, FunctionTool)],
            "temperature": 1.0 if body.temperature is None else body.temperature,
            "top_p": 1.0 if body.top_p is None else body.top_p,
            "text": {"format": _format(body)},
            "store": body.stored,
            "metadata": body.metadata or {},
            "user": body.user,
            "prompt_cache_key": body.prompt_cache_key,
            "safety_identifier": body.safety_identifier,
            "background": False,
            "truncation": body.truncation or "disabled",
            "reasoning": {"effort": None, "summary": None},
            "service_tier": "default",
            "top_logprobs": 0,
        }


def _choice(body: ResponsesRequest) -> Any:
    choice = body.tool_choice
    if choice is None:
        return "auto"
    return choice if isinstance(choice, str) else {"type": "function", "name": choice.name}  # type: ignore[union-attr]


def _tool(tool: FunctionTool) -> dict[str, Any]:
    return {"type": "function", "name": tool.name, "description": tool.description,
            "parameters": tool.parameters, "strict": tool.strict}  # fmt: skip


def _format(body: ResponsesRequest) -> dict[str, Any]:
    fmt = body.text.format if body.text is not None else None
    return {"type": "text"} if fmt is None else fmt.model_dump(by_alias=True, exclude_none=True)


def _failure() -> dict[str, Any]:
    return {"code": "server_error", "message": "the generation failed on its worker"}
