"""A multi-turn conversation trace in the Mooncake JSONL format (``kvgate simulate`` replays it).

    python bench/conversation_trace.py OUT.jsonl [--seed N] [--conversations 1200] [--duration-s 900]

Conversations start at random over ``--duration-s``. Each opens with one of ``--system-prompts``
shared system prompts (Zipf popularity, 300-8,000 tokens), sometimes a shared document (30%, 2k-12k
tokens, Zipf over ``--documents``), then takes turns (geometric, mean 6): the user's message, the
model's answer, a pause to read and type. Turn t's prompt is everything so far plus its message, so
later turns extend earlier ones. Block ids are prefix-chained per 512-token block, as in Mooncake's
traces: two requests share id k at position i only if their first i+1 blocks are identical.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

BLOCK = 512
DECODE_S_PER_TOKEN = 0.02  # how long an answer takes to arrive, per output token


def _lengths(rng: np.random.Generator, mean: float, low: int, high: int, n: int) -> np.ndarray:
    return np.clip(rng.lognormal(np.log(mean), 0.8, n), low, high).astype(int)


def _zipf_pick(rng: np.random.Generator, n: int, s: float = 1.1) -> int:
    weights = 1.0 / np.arange(1, n + 1) ** s
    return int(rng.choice(n, p=weights / weights.sum()))


class BlockIds:
    """Prefix-chained block ids: the id of a block is fixed by the one before it and its content."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}

    def of(self, segments: list[tuple[str, int]]) -> list[int]:
        ids, previous, pieces, filled = [], -1, [], 0
        for segment, length in segments:
            start = 0
            while start < length:
                take = min(length - start, BLOCK - filled)
                pieces.append((segment, start, start + take))
                filled, start = filled + take, start + take
                if filled == BLOCK:
                    previous = self._id(previous, pieces)
                    ids.append(previous)
                    pieces, filled = [], 0
        if pieces:
            ids.append(self._id(previous, pieces))
        return ids

    def _id(self, previous: int, pieces: list) -> int:
        return self._ids.setdefault((previous, tuple(pieces)), len(self._ids))


def generate(args: argparse.Namespace) -> list[dict]:
    rng = np.random.default_rng(args.seed)
    systems = _lengths(rng, 2000, 300, 8000, args.system_prompts)
    documents = _lengths(rng, 5000, 2000, 12000, args.documents)
    blocks, records = BlockIds(), []
    for c in range(args.conversations):
        at_s = float(rng.uniform(0, args.duration_s))
        segments = [(f"system-{(s := _zipf_pick(rng, len(systems)))}", int(systems[s]))]
        if rng.random() < 0.3:
            segments.append((f"doc-{(d := _zipf_pick(rng, len(documents)))}", int(documents[d])))
        for t in range(min(int(rng.geometric(1 / 6)), 30)):
            segments.append((f"user-{c}-{t}", int(_lengths(rng, 200, 20, 2000, 1)[0])))
            output = int(_lengths(rng, 300, 20, 1500, 1)[0])
            length = sum(n for _, n in segments)
            records.append({"timestamp": round(at_s * 1000), "input_length": length,
                            "output_length": output, "hash_ids": blocks.of(segments)})  # fmt: skip
            segments.append((f"answer-{c}-{t}", output))
            at_s += output * DECODE_S_PER_TOKEN + float(rng.exponential(args.think_s))
    return sorted(records, key=lambda r: r["timestamp"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--conversations", type=int, default=1200)
    parser.add_argument("--duration-s", type=float, default=900.0)
    parser.add_argument("--system-prompts", type=int, default=20)
    parser.add_argument("--documents", type=int, default=50)
    parser.add_argument("--think-s", type=float, default=20.0, help="mean pause between turns")
    args = parser.parse_args()
    records = generate(args)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    tokens = sum(r["input_length"] for r in records)
    print(f"{args.out}: {len(records)} requests, {tokens:,} prompt tokens, "
          f"{records[-1]['timestamp'] / 1000:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
