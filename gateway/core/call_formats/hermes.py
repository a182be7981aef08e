"""The Hermes format, kvgate's own default (Qwen 2.5 / 3, Hermes): each call a JSON object between
``<tool_call>`` and ``</tool_call>``, ``{"name": ..., "arguments": {...}}``. Always read, whatever the
model: :mod:`kvgate.gateway.core.tools` asks every model for it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kvgate.gateway.core.tool_calls import read_call
from kvgate.gateway.core.tools import CALL_CLOSE, CALL_OPEN, ToolCall


@dataclass(frozen=True, slots=True)
class HermesFormat:
    name: str = "hermes"
    markers: tuple[str, ...] = (CALL_OPEN,)
    kept: tuple[str, ...] = (CALL_OPEN, CALL_CLOSE)
    bare_start: bool = False

    def block_length(self, text: str, final: bool) -> int | None:
        at = text.find(CALL_CLOSE)
        return None if at < 0 else at + len(CALL_CLOSE)

    def calls(self, block: str, names: Collection[str]) -> list[ToolCall] | None:
        call = read_call(block.removesuffix(CALL_CLOSE), names)
        return None if call is None else [call]


HERMES = HermesFormat()
