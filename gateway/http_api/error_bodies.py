"""The error bodies, as OpenAPI sees them: OpenAI's ``{"error": {message, type, param, code}}`` and
Anthropic's ``{"type": "error", "error": {type, message}}``. ``errors.error_response`` builds them;
these models only document them, and the schemathesis test checks every answer against them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(BaseModel):
    error: OpenAIError


class AnthropicError(BaseModel):
    type: str
    message: str


class AnthropicErrorBody(BaseModel):
    type: Literal["error"]
    error: AnthropicError


def error_responses(body: type[BaseModel] = OpenAIErrorBody) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses=`` entries: every 4xx and 5xx of a route answers with ``body``. (Declaring
    ``4XX`` also keeps FastAPI from documenting a 422 that kvgate never sends: it answers 400.)"""
    return {
        "4XX": {"model": body, "description": "The request was refused: bad input, unknown model, too large"},
        "5XX": {"model": body, "description": "No worker could serve it, or the gateway failed"},
    }
