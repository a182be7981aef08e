"""Prefix-reuse traces: one JSON object per line, one request each.

Fields: ``timestamp`` (arrival), ``input_length`` and ``output_length`` (tokens), ``hash_ids`` (one id
per ``block_tokens``-token block of the prompt, ``ceil(input_length / block_tokens)`` of them; equal
ids mean equal blocks). Two record formats (:mod:`.trace_format`): Mooncake's (timestamps in ms, the
format of Mooncake, Dynamo's data generator and AIPerf's ``mooncake_trace``) and Qwen-Bailian's
(timestamps in s, 16-token blocks, conversation fields beside them), told apart by the first record.
The block size is the file's, not kvgate's chunk size. Requests are kept in ms from the trace's zero.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import groupby, islice
from pathlib import Path

from kvgate.sim.trace_format import AUTO, MOONCAKE, TraceFormat, resolve

DEFAULT_BLOCK_TOKENS = MOONCAKE.block_tokens
_USUAL_BLOCKS = tuple(2**k for k in range(4, 12))  # 16 ... 2048 tokens: the block sizes traces use
_ID_LIMIT = 2**64  # block ids are unsigned 64-bit (:func:`kvgate.sim.tokens.prompt_tokens`)


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace. ``hash_ids`` has ``ceil(input_length / block_tokens)`` entries."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def parse_request(
    line: str, block_tokens: int, where: str = "", trace_format: TraceFormat = MOONCAKE
) -> TraceRequest:
    """One trace line (a ``trace_format`` record) as a request, its timestamp in ms; ValueError
    naming ``where`` (e.g. ``file:line``) when malformed."""
    try:
        raw = json.loads(line)
        request = TraceRequest(
            float(raw["timestamp"]) * trace_format.ms_per_unit,
            int(raw["input_length"]),
            int(raw.get("output_length", 1)),
            tuple(int(h) for h in raw["hash_ids"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{where}: not a {trace_format.label} trace record ({exc})") from None
    _check(request, block_tokens, where, trace_format)
    return request


def _check(request: TraceRequest, block_tokens: int, where: str, trace_format: TraceFormat) -> None:
    blocks = len(request.hash_ids)
    if request.input_length < 1 or request.output_length < 0 or not 0 <= request.timestamp_ms < math.inf:
        raise ValueError(f"{where}: lengths and timestamp must be non-negative, the prompt non-empty")
    if not _covers(block_tokens, blocks, request.input_length):
        fits = [b for b in _USUAL_BLOCKS if _covers(b, blocks, request.input_length)]
        hint = f"blocks of {' or '.join(map(str, fits))} tokens would fit; " if fits else ""
        raise ValueError(
            f"{where}: {blocks} hash ids do not cover input_length {request.input_length} in blocks of "
            f"{block_tokens} tokens ({hint}is it a {trace_format.label} trace of {block_tokens}-token "
            "blocks? see --trace-format and --trace-block-tokens)"
        )
    if any(not 0 <= h < _ID_LIMIT for h in request.hash_ids):
        raise ValueError(f"{where}: hash ids must be non-negative integers under 2**64")


def _covers(block_tokens: int, blocks: int, input_length: int) -> bool:
    """Whether ``blocks`` ids of ``block_tokens`` tokens cover exactly ``input_length`` tokens."""
    return block_tokens * (blocks - 1) < input_length <= block_tokens * blocks


def read_requests(
    lines: Iterable[str],
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    name: str = "trace",
    trace_format: TraceFormat = MOONCAKE,
) -> Iterator[TraceRequest]:
    """The requests of ``lines`` in file order, blank lines skipped."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield parse_request(line, block_tokens, f"{name}:{number}", trace_format)


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace file's requests (sorted by arrival, stable), its format and its tokens per hash id."""

    requests: list[TraceRequest]
    trace_format: TraceFormat
    block_tokens: int

    def describe(self) -> str:
        """``12,031 requests over 3,600.0 s, mooncake (timestamps in ms, 512 tokens per hash id)``."""
        requests = self.requests
        span_s = (requests[-1].timestamp_ms - requests[0].timestamp_ms) / 1000 if requests else 0.0
        return (
            f"{len(self.requests):,} requests over {span_s:,.1f} s, "
            f"{self.trace_format.describe(self.block_tokens)}"
        )


def read_trace(
    path: str | Path, trace_format: str = AUTO, block_tokens: int | None = None, limit: int | None = None
) -> Trace:
    """The first ``limit`` (all when None) requests of the file, sorted by arrival (stable), read as
    ``trace_format`` (:data:`~.trace_format.AUTO`: told by the first record) with ``block_tokens``
    per hash id (None: the format's usual block size). ValueError for a malformed record, naming
    its line; OSError when the file cannot be read."""
    if block_tokens is not None and block_tokens < 1:
        raise ValueError("block_tokens must be positive")
    with open(path, encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), None)
        fmt = resolve(trace_format, first)
        block = block_tokens if block_tokens is not None else fmt.block_tokens
        lines.seek(0)
        requests = list(islice(read_requests(lines, block, str(path), fmt), limit))
    return Trace(sorted(requests, key=lambda r: r.timestamp_ms), fmt, block)


def load_trace(
    path: str | Path,
    block_tokens: int | None = None,
    limit: int | None = None,
    trace_format: str = AUTO,
) -> list[TraceRequest]:
    """:func:`read_trace`'s requests."""
    return read_trace(path, trace_format, block_tokens, limit).requests


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
