"""Loading a PEFT LoRA checkpoint (a folder with ``adapter_config.json`` and
``adapter_model.safetensors``) for a model of a supported family.

Tensor names are PEFT's: ``base_model.model.model.layers.{i}.{module}.lora_A.weight`` (``[r, in]``) and
``lora_B.weight`` (``[out, r]``), ``module`` a Hugging Face path inside the layer (``self_attn.q_proj``)
that the model's family maps onto kvgate's modules, as it does for the base weights. What kvgate does
not apply is refused with a ValueError naming it (DoRA, trained biases, extra trained modules,
per-module ranks or alphas, embedding or output-head targets), never silently ignored.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.families import family_of
from kvgate.workers.model.lora.adapter import LORA_MODULES, LoraAdapter, LoraPair, fuse_shards

CONFIG_FILE, WEIGHTS_FILE = "adapter_config.json", "adapter_model.safetensors"
_TENSOR = re.compile(r"base_model\.model\.model\.layers\.(\d+)\.(.+)\.lora_([AB])(?:\.[\w-]+)?\.weight")
Shards = dict[str | None, tuple[torch.Tensor, torch.Tensor]]


def load_peft_adapter(folder: str | Path, name: str, model: ModelConfig) -> LoraAdapter:
    """The adapter in ``folder`` under the id ``name``, in fp32 on the CPU (see ``LoraAdapter.to``).
    Raises FileNotFoundError without its two files and ValueError when it does not fit ``model``."""
    folder = Path(folder)
    for file in (CONFIG_FILE, WEIGHTS_FILE):
        if not (folder / file).is_file():
            raise FileNotFoundError(f"LoRA adapter {name!r}: no {file} in {folder}")
    rank, scale = _rank_and_scale(json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8")), name)
    modules = _read_modules(folder / WEIGHTS_FILE, name, model)
    if not modules:
        raise ValueError(f"LoRA adapter {name!r}: {WEIGHTS_FILE} holds no LoRA weights of decoder layers")
    pairs = {key: _pair(key, shards, model, rank, scale, name) for key, shards in modules.items()}
    return LoraAdapter(name, rank, pairs)


def _rank_and_scale(config: dict[str, Any], name: str) -> tuple[int, float]:
    refused = {
        "peft_type": config.get("peft_type", "LORA") != "LORA",
        "use_dora": bool(config.get("use_dora")),
        "fan_in_fan_out": bool(config.get("fan_in_fan_out")),
        "bias": config.get("bias", "none") != "none",
        "modules_to_save": bool(config.get("modules_to_save")),
        "rank_pattern": bool(config.get("rank_pattern")),
        "alpha_pattern": bool(config.get("alpha_pattern")),
    }
    bad = [key for key, is_bad in refused.items() if is_bad]
    if bad:
        raise ValueError(f"LoRA adapter {name!r}: {', '.join(bad)} not supported (plain LoRA only)")
    rank, alpha = int(config["r"]), float(config.get("lora_alpha", 8))
    if rank < 1:
        raise ValueError(f"LoRA adapter {name!r}: r must be >= 1, got {rank}")
    return rank, alpha / (math.sqrt(rank) if config.get("use_rslora") else rank)


def _read_modules(file: Path, name: str, model: ModelConfig) -> dict[tuple[int, str], Shards]:
    """(layer, kvgate module) -> shard -> (A, B), from every LoRA tensor of the file."""
    layer_weight = family_of(model.architecture).layer_weight
    halves: dict[tuple[int, str, str | None], dict[str, torch.Tensor]] = defaultdict(dict)
    with safe_open(file, framework="pt", device="cpu") as weights:
        for key in weights.keys():  # noqa: SIM118 (safe_open is not a mapping)
            match = _TENSOR.fullmatch(key)
            if match is None:
                raise ValueError(
                    f"LoRA adapter {name!r}: tensor {key} is not a LoRA update of a decoder layer"
                )
            layer, hf_module, half = int(match[1]), match[2], match[3]
            target = layer_weight(hf_module)
            if target is None or target[0] not in LORA_MODULES or layer >= model.num_layers:
                raise ValueError(f"LoRA adapter {name!r}: {key} targets a module kvgate cannot adapt")
            halves[(layer, target[0], target[1])][half] = weights.get_tensor(key).float()
    modules: dict[tuple[int, str], Shards] = defaultdict(dict)
    for (layer, module, shard), pair in halves.items():
        if set(pair) != {"A", "B"}:
            raise ValueError(f"LoRA adapter {name!r}: layer {layer} {module} has lora_A or lora_B alone")
        modules[(layer, module)][shard] = (pair["A"], pair["B"])
    return modules


def _pair(
    key: tuple[int, str], shards: Shards, model: ModelConfig, rank: int, scale: float, name: str
) -> LoraPair:
    inputs, rows = _geometry(model)[key[1]]
    for a, b in shards.values():
        if a.shape != (rank, inputs) or b.shape[1] != rank:
            raise ValueError(
                f"LoRA adapter {name!r}: layer {key[0]} {key[1]}: A {tuple(a.shape)}, B {tuple(b.shape)}"
                f" do not fit rank {rank} and {inputs} inputs"
            )
    if None in shards:
        rows = {None: (0, sum(count for _, count in rows.values()))}
    out = sum(count for _, count in rows.values())
    a, b = fuse_shards(shards, rows, out)
    return LoraPair(a, b, scale)


def _geometry(model: ModelConfig) -> dict[str, tuple[int, dict[str | None, tuple[int, int]]]]:
    """Per adaptable module: its input size and the (first row, rows) of each shard of its output."""
    q, kv = model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim
    hidden, inter = model.hidden_size, model.intermediate_size
    return {
        "attn.qkv": (hidden, {"q": (0, q), "k": (q, kv), "v": (q + kv, kv)}),
        "attn.o": (q, {None: (0, hidden)}),
        "mlp.gate_up": (hidden, {"gate": (0, inter), "up": (inter, inter)}),
        "mlp.down": (inter, {None: (0, hidden)}),
    }
