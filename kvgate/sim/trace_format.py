"""The record formats a trace file may be in, and how a file's format is told from its first record.

Both formats name each prompt's blocks by id (``hash_ids``: equal ids mean equal blocks, one id per
block of the file's block size, ``ceil(input_length / block)`` of them) beside ``timestamp``,
``input_length`` and ``output_length``; they differ in the timestamp's unit and the usual block size:

- ``mooncake``: Mooncake's FAST'25 traces, Dynamo's data generator, AIPerf's ``mooncake_trace``
  (``timestamp`` in ms; 512-token blocks unless the file says otherwise);
- ``bailian``: Alibaba's Qwen-Bailian usage traces (``qwen_traceA_blksz_16.jsonl`` and its siblings),
  whose records also carry ``chat_id``, ``parent_chat_id`` (-1 for a conversation's first request),
  ``turn`` and ``type`` (``timestamp`` in seconds; 16-token blocks).

A record with both ``chat_id`` and ``parent_chat_id`` is a Bailian record; any other is Mooncake's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

AUTO = "auto"
"""Detect the format from the file's first record (:func:`detect`)."""


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """One record format: its name, its usual tokens per hash id, and its timestamps' unit."""

    name: str
    label: str
    block_tokens: int
    unit: str  # "ms" or "s"

    @property
    def ms_per_unit(self) -> float:
        return _MS_PER[self.unit]

    def describe(self, block_tokens: int) -> str:
        """``mooncake (timestamps in ms, 512 tokens per hash id)``."""
        return f"{self.name} (timestamps in {self.unit}, {block_tokens} tokens per hash id)"


_MS_PER = {"ms": 1.0, "s": 1000.0}
MOONCAKE = TraceFormat("mooncake", "Mooncake", 512, "ms")
BAILIAN = TraceFormat("bailian", "Qwen-Bailian", 16, "s")
FORMATS: dict[str, TraceFormat] = {f.name: f for f in (MOONCAKE, BAILIAN)}
CHOICES = (AUTO, *FORMATS)
_BAILIAN_KEYS = ("chat_id", "parent_chat_id")


def detect(record: Mapping[str, object]) -> TraceFormat:
    """:data:`BAILIAN` for a record with ``chat_id`` and ``parent_chat_id``, else :data:`MOONCAKE`."""
    return BAILIAN if all(key in record for key in _BAILIAN_KEYS) else MOONCAKE


def resolve(name: str, first_line: str | None) -> TraceFormat:
    """The format called ``name``, or for :data:`AUTO` the format of ``first_line`` (a file's first
    non-blank line; None for an empty file): Mooncake's when that line is not a JSON object (its
    parser then says what is wrong with it). ValueError for an unknown name."""
    if name != AUTO:
        if name not in FORMATS:
            raise ValueError(f"unknown trace format {name!r}: choose from {', '.join(CHOICES)}")
        return FORMATS[name]
    try:
        record = json.loads(first_line) if first_line is not None else None
    except ValueError:
        record = None
    return detect(record) if isinstance(record, dict) else MOONCAKE
