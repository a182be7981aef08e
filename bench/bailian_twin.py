"""A trace rewritten as a Qwen-Bailian trace: the same requests, timestamps in seconds, 16-token blocks.

    python bench/bailian_twin.py TRACE.jsonl OUT.jsonl

Each block id ``b`` of the input (Mooncake's 512 tokens unless ``--trace-block-tokens`` says
otherwise) becomes the ``block / 16`` ids ``b x block / 16 + k``, the last cut to the prompt
(``ceil(input_length / 16)`` ids); every request is a conversation's first (``parent_chat_id`` -1,
``turn`` 1, ``type`` text). The twin has the input's reuse, block for block, so ``kvgate simulate``
must report the same figures on both: a check of the Qwen-Bailian reader on a real trace's shape.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from kvgate.sim.trace import TraceRequest, read_trace

BAILIAN_BLOCK = 16


def bailian_records(requests: Sequence[TraceRequest], block_tokens: int) -> Iterator[dict]:
    """The Qwen-Bailian record of each request (``block_tokens``: the input's tokens per id, a
    multiple of 16), in order."""
    if block_tokens % BAILIAN_BLOCK:
        raise ValueError(f"{block_tokens}-token blocks do not split into {BAILIAN_BLOCK}-token blocks")
    split = block_tokens // BAILIAN_BLOCK
    for chat_id, r in enumerate(requests):
        ids = [b * split + k for b in r.hash_ids for k in range(split)][: -(-r.input_length // BAILIAN_BLOCK)]
        yield {"chat_id": chat_id, "parent_chat_id": -1, "timestamp": r.timestamp_ms / 1000,
               "input_length": r.input_length, "output_length": r.output_length, "type": "text",
               "turn": 1, "hash_ids": ids}  # fmt: skip


def write_twin(path: Path, requests: Sequence[TraceRequest], block_tokens: int) -> Path:
    """``requests`` written to ``path`` as a Qwen-Bailian trace, one record per line."""
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(record) + "\n" for record in bailian_records(requests, block_tokens))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--trace-block-tokens", type=int, default=None, help="the input's tokens per id")
    args = parser.parse_args(argv)
    try:
        trace = read_trace(args.trace, "mooncake", args.trace_block_tokens)
        write_twin(args.out, trace.requests, trace.block_tokens)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    print(f"{args.out}: {len(trace.requests):,} requests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
