"""Traces of the workload shapes users run, in the Mooncake JSONL format (``kvgate simulate``
replays them); each shape's parameters are the options below, its defaults the documented ones.

    python bench/workload_traces.py OUT.jsonl --shape {chat,agents,documents} [--seed N]

- ``chat``: multi-turn conversations with growing history (``bench/conversation_trace.py``):
  shared system prompts, sometimes a document, turns that extend each other.
- ``agents``: tool-using agents. ``--agent-types`` agent kinds (Zipf popularity), each with a
  system prompt plus tool definitions (lognormal, median 8k tokens, 2k-30k); ``--sessions`` tasks
  (600) run ``--steps`` steps on average (geometric): each step is one model call whose prompt is
  everything so far; its output is a short tool call (20-300 tokens) and the tool's result
  (lognormal, median 600 tokens, 50-8k) joins the history after ``--tool-s`` seconds on average.
- ``pastes``: a public chat service, where caches fill: ``--conversations`` short conversations
  (3500; ``--turns`` turns on average, geometric, 1.7), each opening with one of ``--system-prompts``
  system prompts (1000; lognormal, median 1.5k tokens, 100-8k; Zipf popularity) and text the user
  pasted (lognormal, median ``--paste-tokens`` 8k, 20-60k); later messages are 20-8k tokens (median
  300), answers 20-2k (median 350), pauses ``--think-s`` (120 s) on average. Most of the content is
  seen once, so the GPU tiers fill and evict before their TTL; a conversation's turns and the
  popular system prompts are what can be reused.
- ``documents``: many users over a few long documents. ``--sessions`` users (1500), ``--documents``
  documents (100; lognormal, median 20k tokens, 5k-60k; Zipf popularity) behind one of 5 system
  prompts; each user asks 1-4 questions (a follow-up extends the previous question and answer),
  questions 30-600 tokens.

Sessions start at random over ``--duration-s`` (by default 300 s for chat, 200 s for agents, 120 s
for documents and 1,800 s for pastes: sized so that 8 simulated workers of 10k prefill tokens/s, at
the hit rate a pooled 8M-token cache gets, spend a fifth to a third of their time prefilling, as on
the shared synthetic trace; at lower load routing hardly matters). Block ids are prefix-chained per
512-token block.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.conversation_trace import DECODE_S_PER_TOKEN, BlockIds, _lengths, _zipf_pick
from bench.conversation_trace import generate as generate_chat

Record = dict[str, object]


def _record(at_s: float, segments: list[tuple[str, int]], output: int, blocks: BlockIds) -> Record:
    return {"timestamp": round(at_s * 1000), "input_length": sum(n for _, n in segments),
            "output_length": output, "hash_ids": blocks.of(segments)}  # fmt: skip


def _exchange(
    rng: np.random.Generator, at_s: float, segments: list[tuple[str, int]], message: tuple[str, int],
    answer: tuple[int, int], think_s: float, blocks: BlockIds, records: list[Record],
) -> float:  # fmt: skip
    """One turn of a session at ``at_s``: ``message`` joins ``segments``, the prompt so far is
    recorded with an answer of lognormal length (median, most: ``answer``; at least 20 tokens),
    the answer joins ``segments``; returns when the next message comes (the answer's decode, then
    a pause of ``think_s`` on average)."""
    segments.append(message)
    output = int(_lengths(rng, answer[0], 20, answer[1], 1)[0])
    records.append(_record(at_s, segments, output, blocks))
    segments.append((f"answer-to-{message[0]}", output))
    return at_s + output * DECODE_S_PER_TOKEN + float(rng.exponential(think_s))


def generate_agents(args: argparse.Namespace) -> list[Record]:
    rng = np.random.default_rng(args.seed)
    prefixes = _lengths(rng, 8000, 2000, 30000, args.agent_types)
    blocks, records = BlockIds(), []
    for task in range(args.sessions):
        at_s = float(rng.uniform(0, args.duration_s))
        kind = _zipf_pick(rng, len(prefixes))
        opening = int(_lengths(rng, 150, 20, 1500, 1)[0])  # the task as the user states it
        segments = [(f"agent-{kind}", int(prefixes[kind])), (f"task-{task}", opening)]
        for step in range(min(int(rng.geometric(1 / args.steps)), 60)):
            call = int(_lengths(rng, 80, 20, 300, 1)[0])
            records.append(_record(at_s, segments, call, blocks))
            segments.append((f"call-{task}-{step}", call))
            segments.append((f"result-{task}-{step}", int(_lengths(rng, 600, 50, 8000, 1)[0])))
            at_s += call * DECODE_S_PER_TOKEN + float(rng.exponential(args.tool_s))
    return sorted(records, key=lambda r: r["timestamp"])  # type: ignore[arg-type,return-value]


def generate_documents(args: argparse.Namespace) -> list[Record]:
    rng = np.random.default_rng(args.seed)
    systems = _lengths(rng, 800, 200, 3000, 5)
    documents = _lengths(rng, 20000, 5000, 60000, args.documents)
    blocks, records = BlockIds(), []
    for user in range(args.sessions):
        at_s = float(rng.uniform(0, args.duration_s))
        d = _zipf_pick(rng, len(documents))
        system = d % len(systems)
        segments = [(f"system-{system}", int(systems[system])), (f"doc-{d}", int(documents[d]))]
        for q in range(int(rng.integers(1, 5))):
            question = (f"question-{user}-{q}", int(_lengths(rng, 120, 30, 600, 1)[0]))
            at_s = _exchange(rng, at_s, segments, question, (250, 1200), args.think_s, blocks, records)
    return sorted(records, key=lambda r: r["timestamp"])  # type: ignore[arg-type,return-value]


def generate_pastes(args: argparse.Namespace) -> list[Record]:
    rng = np.random.default_rng(args.seed)
    systems = _lengths(rng, 1500, 100, 8000, args.system_prompts)
    blocks, records = BlockIds(), []
    for c in range(args.conversations):
        at_s = float(rng.uniform(0, args.duration_s))
        s = _zipf_pick(rng, len(systems))
        segments = [(f"system-{s}", int(systems[s]))]
        for t in range(min(int(rng.geometric(1 / args.turns)), 30)):
            first = t == 0  # the paste, then follow-up messages
            message = _lengths(rng, args.paste_tokens if first else 300, 20, 60000 if first else 8000, 1)
            user = (f"user-{c}-{t}", int(message[0]))
            at_s = _exchange(rng, at_s, segments, user, (350, 2000), args.think_s, blocks, records)
    return sorted(records, key=lambda r: r["timestamp"])  # type: ignore[arg-type,return-value]


DURATION_S = {"chat": 300.0, "agents": 200.0, "documents": 120.0, "pastes": 1800.0}
SHAPES: dict[str, Callable[[argparse.Namespace], list[Record]]] = {
    "chat": generate_chat,  # type: ignore[dict-item]
    "agents": generate_agents,
    "documents": generate_documents,
    "pastes": generate_pastes,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration-s", type=float, help="sessions start over this time (see above)")
    parser.add_argument("--sessions", type=int, help="agent tasks (600) or document users (1500)")
    parser.add_argument("--conversations", type=int, help="chat (1200), pastes (3500): conversations")
    parser.add_argument("--system-prompts", type=int, help="chat (20), pastes (1000): system prompts")
    parser.add_argument("--turns", type=float, default=1.7, help="pastes: mean turns per conversation")
    parser.add_argument("--paste-tokens", type=float, default=8000.0, help="pastes: median pasted text")
    parser.add_argument("--agent-types", type=int, default=12, help="agents: kinds of agent")
    parser.add_argument("--steps", type=float, default=10.0, help="agents: mean steps per task")
    parser.add_argument("--tool-s", type=float, default=2.0, help="agents: mean tool time per step")
    parser.add_argument("--documents", type=int, help="documents (100; chat: 50)")
    parser.add_argument("--think-s", type=float, help="mean pause before a follow-up (20; pastes: 120)")
    args = parser.parse_args()
    if args.turns < 1 or args.paste_tokens <= 0:
        parser.error("--turns must be at least 1 and --paste-tokens positive")
    pastes = args.shape == "pastes"
    args.conversations = args.conversations or (3500 if pastes else 1200)
    args.system_prompts = args.system_prompts or (1000 if pastes else 20)
    args.think_s = args.think_s if args.think_s is not None else (120.0 if pastes else 20.0)
    args.documents = args.documents or (50 if args.shape == "chat" else 100)
    args.sessions = args.sessions or (600 if args.shape == "agents" else 1500)
    if args.duration_s is None:
        args.duration_s = DURATION_S[args.shape]
    records = SHAPES[args.shape](args)
    if not records:
        parser.error("the trace came out empty: raise --sessions or --conversations")
    args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    tokens = sum(int(r["input_length"]) for r in records)  # type: ignore[call-overload]
    print(f"{args.out}: {args.shape}, {len(records)} requests, {tokens:,} prompt tokens, "
          f"{int(records[-1]['timestamp']) / 1000:.0f} s")  # type: ignore[call-overload]  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
