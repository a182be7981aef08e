"""Copy checkpoint tensors, named as in Hugging Face checkpoints, into ``DecoderModel``'s parameters.

Both loaders (safetensors and GGUF) speak Hugging Face names; the model's family (``families``) maps the
names inside a layer onto our modules, and this module owns the fused parameters (``qkv`` = q, k, v rows;
``gate_up`` = gate, up rows), filled shard by shard or whole (Phi-3's checkpoints fuse them already), and
the stacked experts of a mixture (``mlp.experts.gate_up [E, 2I, H]``, filled expert by expert under the
names ``mlp.experts.{e}.gate_up.weight``), and checks that every parameter was filled exactly once.
"""

from __future__ import annotations

import logging
import re

import torch

from kvgate.workers.model.decoder import DecoderModel
from kvgate.workers.model.families import LayerTarget, family_of
from kvgate.workers.model.families.family import LayerWeight
from kvgate.workers.model.families.llama import LAYER_WEIGHTS as LLAMA_WEIGHTS

log = logging.getLogger(__name__)

_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)")
_TOP = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight",
        "lm_head.weight": "lm_head.weight"}  # fmt: skip
_FUSED = {"qkv": ("q", "k", "v"), "gate_up": ("gate", "up")}  # our module name -> its shards, in row order
Target = tuple[str, str | None]  # (our parameter name, shard)


def target_of(hf_name: str, layer_weight: LayerWeight = LLAMA_WEIGHTS.get) -> Target | None:
    """Where the checkpoint tensor ``hf_name`` goes (``layer_weight``: the family's mapping of names
    inside a layer), None when the model has no such weight."""
    if hf_name in _TOP:
        return _TOP[hf_name], None
    match = _LAYER.fullmatch(hf_name)
    target: LayerTarget | None = None if match is None else layer_weight(match[2])
    if match is None or target is None:
        return None
    return f"layers.{match[1]}.{target[0]}.{match[3]}", target[1]


class WeightLoader:
    """Fills a model's parameters from named tensors; ``finish`` raises unless every one was filled."""

    def __init__(self, model: DecoderModel) -> None:
        config = model.config
        q, kv = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
        self._qkv_rows = {"q": (0, q), "k": (q, kv), "v": (q + kv, kv)}
        self._layer_weight = family_of(config.architecture).layer_weight
        self._params = _addressable(dict(model.named_parameters()))
        self._missing = _expected(list(self._params))

    def load(self, hf_name: str, tensor: torch.Tensor) -> bool:
        """Copy ``tensor`` (any float dtype, any device) into its parameter, converting the dtype;
        returns False (and copies nothing) for a name the model has no weight for."""
        target = target_of(hf_name, self._layer_weight)
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
        name, shard = target
        self._missing -= {(name, s) for s in _shards(name)} if shard is None else {target}
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
        if shard in self._qkv_rows:
            return param.narrow(0, *self._qkv_rows[shard])
        half = param.shape[0] // 2  # gate rows, then up rows
        return param.narrow(0, 0 if shard == "gate" else half, half)


def _shards(param_name: str) -> tuple[str | None, ...]:
    """The shards of a fused parameter (``layers.0.attn.qkv.weight`` -> q, k, v), else ``(None,)``."""
    module = param_name.rsplit(".", 2)[-2]
    return _FUSED.get(module, (None,))


def _addressable(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``params`` with each stacked expert parameter (``layers.0.mlp.experts.gate_up``, ``[E, ...]``)
    replaced by its E per-expert views (``layers.0.mlp.experts.{e}.gate_up.weight``), as checkpoints
    name them."""
    addressable: dict[str, torch.Tensor] = {}
    for name, param in params.items():
        base, _, kind = name.rpartition(".")
        if base.endswith(".experts") and kind in ("gate_up", "down"):
            addressable |= {f"{base}.{e}.{kind}.weight": param[e] for e in range(param.shape[0])}
        else:
            addressable[name] = param
    return addressable


def _expected(param_names: list[str]) -> set[Target]:
    """Every (parameter, shard) a checkpoint must fill: each shard of a fused parameter, the others whole."""
    return {(name, shard) for name in param_names for shard in _shards(name)}
