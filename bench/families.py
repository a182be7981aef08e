"""Decode speed of every model family: kvgate's engine beside ``transformers`` on the same small random
model of each family (safetensors, fp32, CPU, the same torch threads), batch 8.

The models are random and small (hidden 256, 4 layers: ``SIZES``), built with ``transformers`` from each
family's config as the parity tests build theirs; speed does not depend on the weights' values, but a
small model weighs per-step overhead more than a real one would. Each family runs the side-by-side
decode case of ``bench/engine.py --vs-hf`` (same method: alternating rounds, medians).

    python -m bench.families [--threads 1] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench.engine_side import load_engine_side
from bench.engine_vs_hf import Sizes, log, side_by_side
from bench.hf_side import load_hf
from bench.machine import machine_info
from tests.workers.model.tiny import FAMILY_VARIANTS, save_tiny_model

VARIANTS = ("llama-gqa", *FAMILY_VARIANTS)
SIZES = {"vocab_size": 2048, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 1024}  # fmt: skip
# a layer kind per layer where the variant lists them (Gemma 3: five local layers per global one)
PER_VARIANT = {"gemma3": {"layer_types": ["sliding_attention"] * 3 + ["full_attention"]}}
DECODE = Sizes(prefill_tokens=16, decode=((8, 128),), new_tokens=32, runs=3)
SMOKE = Sizes(prefill_tokens=8, decode=((2, 16),), new_tokens=3, runs=1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = SMOKE if args.smoke else DECODE
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants:
            folder = Path(tmp) / variant
            save_tiny_model(variant, folder, sizes=SIZES | PER_VARIANT.get(variant, {}))
            side = load_engine_side(folder, "sdpa", "cpu", "float32")
            hf, attention = _load_hf(folder)
            measured = side_by_side(side, hf, sizes, np.random.default_rng(0))
            rows.extend(
                {"family": variant, "hf_attention": attention, **r}
                for r in measured
                if r["case"].startswith("decode_")
            )
    return {"machine": machine_info("cpu"), "sizes": SIZES, "rows": rows}


def _load_hf(folder: Path) -> tuple[Any, str]:
    """The model in ``transformers`` with SDPA attention, or eager where the family has no SDPA path
    (Gemma 2's soft-capped attention)."""
    try:
        return load_hf(folder, "cpu", torch.float32), "sdpa"
    except ValueError:
        return load_hf(folder, "cpu", torch.float32, attention="eager"), "eager"


def markdown(result: dict[str, Any]) -> str:
    machine = result["machine"]
    lines = [
        f"# Decode speed per model family (commit {machine['commit']})",
        "",
        f"`{machine['command']}` on {machine['device_name']}, {machine['threads']} torch thread(s); random "
        f"models, hidden {result['sizes']['hidden_size']}, {result['sizes']['num_hidden_layers']} layers.",
        "",
        "| family | case | kvgate engine | transformers | its attention | unit | speedup |",
        "|---|---|---:|---:|---|---|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['family']} | {r['case']} | {r['engine']:.1f} | {r['hf']:.1f} | {r['hf_attention']} | "
            f"{r['unit']} | {r['speedup']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variants", type=lambda s: s.split(","), default=list(VARIANTS))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round (tests)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    result = run(args)
    result["wall_s"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "families.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "families.md").write_text(markdown(result))
    print(markdown(result))
    log(f"done in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
