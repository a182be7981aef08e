"""Quality of quantised KV blocks (default model: SmolLM2-135M-Instruct, fp32 weights, SDPA kernels):
greedy agreement of the int8 and fp8 caches with the fp32 cache, and perplexity of a fixed text.

    python bench/kv_quality.py [--prompts 32] [--tokens 64] [--threads 2] [--model PATH] [--out bench/results]

- **Greedy agreement.** ``--prompts`` chat prompts (the questions below), ``--tokens`` new tokens each
  (EOS ignored, so every sequence is full length), served by the engine as one batch per KV dtype. Per
  prompt, the tokens identical to the fp32 cache's before the first divergence, over ``--tokens``; the
  figure is their mean (``prefix_agreement``), with the share of sequences identical in full
  (``identical_sequences``).
- **Perplexity.** ``TEXT`` below (a few hundred tokens) in one prefill through the paged cache: every
  token's K/V is written (quantised) and attention reads it back from the cache, so every logit sees
  the quantised cache. ``exp`` of the mean negative log-likelihood of tokens 1..n-1.

Writes ``kv_quality.json`` and ``kv_quality.md`` to --out, naming the machine, torch threads, commit and
command; prints the Markdown. Deterministic: greedy decoding, fixed prompts and text.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine_info
from kvgate.common.models import DEFAULT_MODEL_ID, default_model_path
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.kernels import get_kernels
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.kv_dtype import kv_dtype
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import EngineConfig, EngineRequest, LLMEngine, run_to_completion
from kvgate.workers.kv import StepEventPublisher
from kvgate.workers.model import DecoderModel, ScheduledSequence, allocate_kv_caches, build_step, load_model

KV_DTYPES = ("fp32", "int8", "fp8")  # fp32 first: the reference
BLOCK = 16
QUESTIONS = [
    "What is the capital of France?", "Write a short poem about the sea.",
    "Explain in two sentences why the sky is blue.", "List three fruits that are red.",
    "How do airplanes stay in the air?", "What is a prime number? Give examples.",
    "Describe a cat to someone who has never seen one.", "What causes the seasons on Earth?",
    "Give me three tips for learning a new language.", "What is the difference between weather and climate?",
    "Summarise the story of Cinderella in three sentences.", "How does a refrigerator keep food cold?",
    "Why do we need sleep?", "Write a haiku about autumn leaves.",
    "What is photosynthesis?", "Explain what a computer program is to a child.",
    "Name four planets and one fact about each.", "How should I prepare for a job interview?",
    "What are the benefits of drinking water?", "Describe the water cycle.",
    "What is the Pythagorean theorem?", "Give a recipe for a simple salad.",
    "Why is exercise good for health?", "What does a librarian do?",
    "Explain how a bicycle works.", "What is the tallest mountain in the world?",
    "Tell me a fun fact about octopuses.", "How do bees make honey?",
    "What is the role of the heart in the body?", "Write two sentences about friendship.",
    "How do you make a paper airplane?", "What is gravity?",
    "Why do leaves change colour in autumn?", "What is an ecosystem?",
    "Describe a sunrise at the beach.", "What are the three states of matter?",
    "How does the internet send a message from one computer to another?", "What is a volcano?",
    "Give me a short motivational message for a Monday morning.", "What is the moon made of?",
]  # fmt: skip
TEXT = (
    "The harbour town woke slowly on winter mornings. Before the sun rose above the hills, the fishing "
    "boats had already left, their lamps moving like small stars across the dark water. In the bakery "
    "near the market square, the ovens had been warm for hours, and the smell of fresh bread drifted "
    "along the narrow streets where the cobblestones were still wet from the night's rain.\n\n"
    "Most of the people who lived there had never travelled far. They knew the tides better than the "
    "names of distant cities, and they measured the year by the arrival of certain fish, the storms of "
    "October, and the first warm evening of spring when everyone carried chairs outside to sit by their "
    "doors. Children learned to swim before they learned to read, and the old men on the pier could tell "
    "from the colour of the sky whether the afternoon would bring wind.\n\n"
    "Every few years, a stranger would arrive and decide to stay. Some opened small shops; others "
    "repaired boats or taught at the school on the hill. The town accepted them slowly, as it accepted "
    "everything, first with polite distance and then, after a winter or two, with a kind of quiet "
    "affection. Nobody could say exactly when a newcomer stopped being a newcomer, but everyone agreed "
    "that it happened eventually, usually on a day when the sea was calm and the market was crowded.\n\n"
    "The library was the oldest building in town. Its shelves held maps of coastlines that no longer "
    "existed, diaries of sailors, and a collection of recipes written by hand in a dozen languages. On "
    "Saturday afternoons the librarian read stories aloud, and even the fishermen, back early from the "
    "water, would stand at the back of the room, pretending they had only come in to get warm."
)


def _engine(model: DecoderModel, tokenizer: Tokenizer, name: str, blocks: int) -> LLMEngine:
    cache = CacheLayout(DEFAULT_MODEL_ID, secret=b"bench", block_size=BLOCK, kv_dtype=name)
    config = EngineConfig(cache, num_gpu_blocks=blocks)
    publisher = StepEventPublisher(WorkerId("quality"), Epoch(1))
    return LLMEngine(config, model, get_kernels(config.kernel_backend), publisher, tokenizer=tokenizer)


def greedy_outputs(
    model: DecoderModel, tokenizer: Tokenizer, name: str, prompts: list[list[int]], tokens: int
) -> list[list[int]]:
    """Every prompt's ``tokens`` greedy tokens (EOS ignored), all prompts in one batch."""
    sampling = SamplingParams(temperature=0, max_tokens=tokens, ignore_eos=True)
    blocks = sum(-(-(len(p) + tokens) // BLOCK) for p in prompts) + 8
    engine = _engine(model, tokenizer, name, blocks)
    requests = [
        EngineRequest(f"p{i}", np.asarray(p, dtype=np.uint32), sampling) for i, p in enumerate(prompts)
    ]
    done = run_to_completion(engine, requests)
    return [list(done[f"p{i}"].token_ids) for i in range(len(prompts))]


def agreement(reference: list[list[int]], other: list[list[int]], tokens: int) -> dict[str, Any]:
    """Mean share of tokens identical before the first divergence, share of identical sequences, and
    per prompt the number of identical tokens before the first divergence."""
    agreeing = []
    for ref, out in zip(reference, other, strict=True):
        agreeing.append(next((i for i, (a, b) in enumerate(zip(ref, out, strict=True)) if a != b), len(ref)))
    identical = sum(ref == out for ref, out in zip(reference, other, strict=True)) / len(reference)
    return {
        "prefix_agreement": sum(agreeing) / len(agreeing) / tokens,
        "identical_sequences": identical,
        "min_prefix": min(agreeing) / tokens,
        "first_token_differs": sum(n == 0 for n in agreeing),
        "agreeing_tokens": agreeing,
    }


def perplexity(model: DecoderModel, name: str, ids: list[int]) -> float:
    """exp(mean NLL) of ``ids[1:]`` given their prefixes, in one prefill over a paged cache of ``name``."""
    storage = kv_dtype(name).storage
    blocks = -(-len(ids) // BLOCK)
    caches = allocate_kv_caches(model.config.kv_geometry(storage), blocks, BLOCK, device="cpu")
    step = build_step([ScheduledSequence(list(range(blocks)), 0, len(ids), all_logits=True)], BLOCK, "cpu")
    with torch.inference_mode():
        logits = model(torch.tensor(ids), step.positions, step.attn, caches)[:-1]  # [n - 1, vocab]
        nll = torch.nn.functional.cross_entropy(logits.float(), torch.tensor(ids[1:]))
    return math.exp(float(nll))


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    path = args.model or default_model_path()
    tokenizer = load_tokenizer(path)
    model = load_model(path, get_kernels("sdpa"), device="cpu", dtype=torch.float32)
    prompts = [_chat(tokenizer, q) for q in QUESTIONS[: args.prompts]]
    text_ids = tokenizer.encode(TEXT, add_special_tokens=False).tolist()
    results: dict[str, Any] = {}
    outputs: dict[str, list[list[int]]] = {}
    for name in KV_DTYPES:
        start = time.perf_counter()
        outputs[name] = greedy_outputs(model, tokenizer, name, prompts, args.tokens)
        entry = {"perplexity": perplexity(model, name, text_ids), "seconds": time.perf_counter() - start}
        if name != KV_DTYPES[0]:
            entry.update(agreement(outputs[KV_DTYPES[0]], outputs[name], args.tokens))
        results[name] = entry
        print(f"{name}: {entry}", file=sys.stderr)
    return {
        "machine": machine_info("cpu"),
        "threads": args.threads,
        "model": str(path.name),
        "prompts": len(prompts),
        "new_tokens": args.tokens,
        "text_tokens": len(text_ids),
        "results": results,
    }


def _chat(tokenizer: Tokenizer, question: str) -> list[int]:
    text = tokenizer.apply_chat_template([{"role": "user", "content": question}])
    return tokenizer.encode(text, add_special_tokens=False).tolist()


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# Quantised KV quality (SmolLM2-135M-Instruct, fp32 weights, SDPA kernels)",
        "",
        f"Commit `{m['commit']}`, `{m['command']}`, {m['cpu_model']}, {report['threads']} torch threads.",
        f"Greedy agreement with the fp32 cache over {report['prompts']} chat prompts x "
        f"{report['new_tokens']} new tokens (EOS ignored); perplexity of a fixed "
        f"{report['text_tokens']}-token text in one prefill through the paged cache.",
        "",
        "| KV dtype | tokens identical before the first divergence (mean) | identical sequences | "
        "prompts differing at the first token | perplexity |",
        "|---|---|---|---|---|",
    ]
    for name, r in report["results"].items():
        if "prefix_agreement" in r:
            first = f"{r['first_token_differs']} of {report['prompts']}"
            agree = f"{r['prefix_agreement']:.1%} | {r['identical_sequences']:.1%} | {first}"
        else:
            agree = "(reference) | | "
        lines.append(f"| {name} | {agree} | {r['perplexity']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    if not 1 <= args.prompts <= len(QUESTIONS):
        parser.error(f"--prompts must lie in [1, {len(QUESTIONS)}]")
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kv_quality.json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    (args.out / "kv_quality.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
