"""A ``/v1/responses`` stream, as OpenAI sends it: named server-sent events, each with its
``sequence_number``: ``response.created`` and ``response.in_progress``; per output item
``response.output_item.added``, then for a message ``response.content_part.added``,
``response.output_text.delta`` ..., ``response.output_text.done``, ``response.content_part.done``, or
for a call ``response.function_call_arguments.delta`` / ``.done``; ``response.output_item.done``; and
last ``response.completed`` (``response.incomplete`` when the token limit cut it off,
``response.failed`` when the worker failed) with the whole response, as a non-streamed answer has it.
A failure after the first event is an ``error`` event. No ``[DONE]`` follows."""

from __future__ import annotations

import json
from typing import Any

from kvgate.gateway.core.textgen import TextDelta, TextDone
from kvgate.gateway.errors import GatewayError
from kvgate.gateway.http_api.errors import error_body
from kvgate.gateway.http_api.responses_format import ResponseShape
from kvgate.gateway.http_api.responses_items import OutputItems
from kvgate.proto.sampling import FinishReason


class ResponseEvents:
    """The events of one stream; mutable, one per stream. :attr:`final` is the whole response once
    the generation's end was rendered."""

    def __init__(self, shape: ResponseShape, output: OutputItems) -> None:
        self._shape = shape
        self._output = output
        self._sequence = 0
        self.final: dict[str, Any] | None = None

    def render(self, item: TextDelta | TextDone) -> list[bytes]:
        events = self._start() if self._sequence == 0 else []
        if isinstance(item, TextDelta):
            events += self._output.text(item.text)
        else:
            events += self._output.finish(item.finish_reason is not FinishReason.LENGTH)
            self.final = self._shape.object(self._output.items, item)
            events.append({"type": f"response.{self.final['status']}", "response": self.final})
        return [self._sse(event) for event in events]

    def error(self, error: GatewayError) -> bytes:
        """The ``error`` event that ends a stream that failed."""
        fields = error_body(error)["error"]
        code = fields["code"] or fields["type"]
        return self._sse(
            {"type": "error", "code": code, "message": fields["message"], "param": fields["param"]}
        )

    def _start(self) -> list[dict[str, Any]]:
        response = self._shape.object([], None)
        return [{"type": "response.created", "response": response},
                {"type": "response.in_progress", "response": response}]  # fmt: skip

    def _sse(self, event: dict[str, Any]) -> bytes:
        event = event | {"sequence_number": self._sequence}
        self._sequence += 1
        return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
