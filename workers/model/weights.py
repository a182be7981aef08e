"""Copy checkpoint tensors, named as in Hugging Face checkpoints, into ``LlamaModel``'s parameters.

Both loaders (safetensors and GGUF) speak Hugging Face names; this module owns the one mapping onto the
model's fused parameters (``qkv`` = q, k, v rows; ``gate_up`` = gate, up rows) and checks that every
parameter was filled exactly once.
"""

from __future__ import annotations

import logging
import re

import torch

from kvgate.workers.model.llama import LlamaModel

log = logging.getLogger(__name__)

_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)")
# HF module path in a layer -> (our module path, shard of a fused parameter or None)
_LAYER_MODULES = {
    "input_layernorm": ("attn_norm", None),
    "post_attention_layernorm": ("mlp_norm", None),
    "self_attn.q_proj": ("attn.qkv", "q"),
    "self_attn.k_proj": ("attn.qkv", "k"),
    "self_attn.v_proj": ("attn.qkv", "v"),
    "self_attn.o_proj": ("attn.o", None),
    "mlp.gate_proj": ("mlp.gate_up", "gate"),
    "mlp.up_proj": ("mlp.gate_up", "up"),
    "mlp.down_proj": ("mlp.down", None),
}
_TOP = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight",
        "lm_head.weight": "lm_head.weight"}  # fmt: skip

_FUSED = {"attn.qkv": ("q", "k", "v"), "mlp.gate_up": ("gate", "up")}
Target = tuple[str, str | None]  # (our parameter name, shard)


def target_of(hf_name: str) -> Target | None:
    """Where the checkpoint tensor ``hf_name`` goes, None when the model has no such weight."""
    if hf_name in _TOP:
        return _TOP[hf_name], None
    match = _LAYER.fullmatch(hf_name)
    if match is None or match[2] not in _LAYER_MODULES:
        return None
    module, shard = _LAYER_MODULES[match[2]]
    return f"layers.{match[1]}.{module}.{match[3]}", shard


class WeightLoader:
    """Fills a model's parameters from named tensors; ``finish`` raises unless every one was filled."""

    def __init__(self, model: LlamaModel) -> None:
        config = model.config
        q, kv = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
        inter = config.intermediate_size
        self._rows = {"q": (0, q), "k": (q, kv), "v": (q + kv, kv), "gate": (0, inter), "up": (inter, inter)}
        self._params = dict(model.named_parameters())
        self._missing = _expected(list(self._params))

    def load(self, hf_name: str, tensor: torch.Tensor) -> bool:
        """Copy ``tensor`` (any float dtype, any device) into its parameter, converting the dtype;
        returns False (and copies nothing) for a name the model has no weight for."""
        target = target_of(hf_name)
        if target is None or target[0] not in self._params:
            log.debug("skipping checkpoint tensor %s", hf_name)
            return False
        destination = self._slice(*target)
        if destination.shape != tensor.shape:
            raise ValueError(
                f"{hf_name}: checkpoint shape {tuple(tensor.shape)} != model shape {tuple(destination.shape)}"
            )
        with torch.no_grad():
            destination.copy_(tensor)
        self._missing.discard(target)
        return True

    def finish(self) -> None:
        """Raise ``ValueError`` naming the parameters no checkpoint tensor filled."""
        if self._missing:
            names = sorted(f"{name}[{shard}]" if shard else name for name, shard in self._missing)
            raise ValueError(f"checkpoint lacks {len(names)} weights: {', '.join(names[:8])}")

    def _slice(self, name: str, shard: str | None) -> torch.Tensor:
        param = self._params[name]
        if shard is None:
            return param
        start, rows = self._rows[shard]
        return param.narrow(0, start, rows)


def _expected(param_names: list[str]) -> set[Target]:
    """Every (parameter, shard) a checkpoint must fill: each shard of a fused parameter, the others whole."""
    expected: set[Target] = set()
    for name in param_names:
        module = name.rsplit(".", 1)[0]
        shards = next((parts for suffix, parts in _FUSED.items() if module.endswith(suffix)), (None,))
        expected |= {(name, shard) for shard in shards}
    return expected
