"""Mooncake-format traces: one JSON object per line, one request each.

Fields: ``timestamp`` (arrival, ms from the start), ``input_length`` and ``output_length`` (tokens),
``hash_ids`` (one id per ``block_tokens``-token block of the prompt, ``ceil(input_length /
block_tokens)`` of them; equal ids mean equal blocks). The format is shared by Mooncake, Dynamo's data
generator and AIPerf's ``mooncake_trace``; the block size is the file's, not kvgate's chunk size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import groupby, islice
from pathlib import Path

DEFAULT_BLOCK_TOKENS = 512


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace. ``hash_ids`` has ``ceil(input_length / block_tokens)`` entries."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def parse_request(line: str, block_tokens: int, where: str = "") -> TraceRequest:
    """One trace line as a request; ValueError naming ``where`` (e.g. ``file:line``) when malformed."""
    try:
        raw = json.loads(line)
        request = TraceRequest(
            float(raw["timestamp"]),
            int(raw["input_length"]),
            int(raw.get("output_length", 1)),
            tuple(int(h) for h in raw["hash_ids"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{where}: not a Mooncake trace record ({exc})") from None
    _check(request, block_tokens, where)
    return request


def _check(request: TraceRequest, block_tokens: int, where: str) -> None:
    blocks = len(request.hash_ids)
    if request.input_length < 1 or request.output_length < 0 or request.timestamp_ms < 0:
        raise ValueError(f"{where}: lengths and timestamp must be non-negative, the prompt non-empty")
    if not block_tokens * (blocks - 1) < request.input_length <= block_tokens * blocks:
        raise ValueError(
            f"{where}: {blocks} hash ids do not cover input_length {request.input_length} in blocks of "
            f"{block_tokens} tokens (is --trace-block-tokens right?)"
        )
    if any(h < 0 for h in request.hash_ids):
        raise ValueError(f"{where}: hash ids must be non-negative")


def read_requests(
    lines: Iterable[str], block_tokens: int = DEFAULT_BLOCK_TOKENS, name: str = "trace"
) -> Iterator[TraceRequest]:
    """The requests of ``lines`` in file order, blank lines skipped."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield parse_request(line, block_tokens, f"{name}:{number}")


def load_trace(
    path: str | Path, block_tokens: int = DEFAULT_BLOCK_TOKENS, limit: int | None = None
) -> list[TraceRequest]:
    """The first ``limit`` (all when None) requests of the file, sorted by arrival (stable)."""
    if block_tokens < 1:
        raise ValueError("block_tokens must be positive")
    with open(path, encoding="utf-8") as lines:
        requests = list(islice(read_requests(lines, block_tokens, str(path)), limit))
    return sorted(requests, key=lambda r: r.timestamp_ms)


def spread_arrivals(requests: Sequence[TraceRequest], window_ms: float) -> list[TraceRequest]:
    """``requests`` (sorted by arrival) with the ``k`` recorded at one timestamp arriving evenly over
    the ``window_ms`` that follow it, at ``i x window_ms / k`` after it in file order; 0 changes
    nothing. A trace that rounds its timestamps (Mooncake's, to about 3 s) otherwise replays each
    step's requests at one instant, a burst the recorded service may not have seen: one gateway
    routes it in order, but gateway replicas each route their share of it before any hears of the
    others'. Sorted again by arrival (stable) when a window reaches past the next timestamp."""
    if not (math.isfinite(window_ms) and window_ms >= 0):
        raise ValueError(f"the arrival spread must be a finite number of ms >= 0, not {window_ms!r}")
    if window_ms == 0:
        return list(requests)
    spread: list[TraceRequest] = []
    for at, same in groupby(requests, key=lambda r: r.timestamp_ms):
        step = list(same)
        spread += [replace(r, timestamp_ms=at + i * window_ms / len(step)) for i, r in enumerate(step)]
    return sorted(spread, key=lambda r: r.timestamp_ms)
