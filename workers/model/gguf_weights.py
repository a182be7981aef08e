"""Load a GGUF file: config from its metadata, weights dequantised with the ``gguf`` package.

Tensor names are mapped to Hugging Face names, then loaded by ``WeightLoader``. llama.cpp's converter
reorders the rows of each Q and K head of ``llama``-architecture models (rotate-half pairs ``(j, j + D/2)``
become adjacent rows ``(2j, 2j + 1)`` for its interleaved RoPE); that is undone here so the rotate-half
RoPE of ``rope.py`` gives the original model's results. ``qwen2`` files keep the HF order.
"""

from __future__ import annotations

import re
from pathlib import Path

import gguf
import numpy as np
import torch

from kvgate.common.tokenizer.gguf_metadata import metadata_of
from kvgate.kernels.protocol import AttentionKernels
from kvgate.workers.model.config import ModelConfig
from kvgate.workers.model.decoder import DecoderModel
from kvgate.workers.model.empty import empty_model
from kvgate.workers.model.progress import LoadProgress
from kvgate.workers.model.weights import WeightLoader

_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}  # fmt: skip
_BLOCK_NAME = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")
PERMUTED_ARCHITECTURES = frozenset({"llama"})


def hf_name(gguf_name: str) -> str | None:
    """The HF checkpoint name of a GGUF tensor name, None for tensors that are not weights
    (``rope_freqs.weight``)."""
    module, _, kind = gguf_name.rpartition(".")
    if module in _TOP:
        return f"{_TOP[module]}.{kind}"
    match = _BLOCK_NAME.fullmatch(gguf_name)
    if match is None or match[2] not in _BLOCK:
        return None
    return f"model.layers.{match[1]}.{_BLOCK[match[2]]}.{match[3]}"


def unpermute_rope_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row order for ``num_heads`` heads (query heads for Q, kv heads for K):
    within each head, row ``2j + i`` goes back to row ``i * D/2 + j``. Works for weights and biases."""
    half = weight.shape[0] // num_heads // 2
    per_head = weight.reshape(num_heads, half, 2, *weight.shape[1:])
    return per_head.swapaxes(1, 2).reshape(weight.shape)


def gguf_model_config(reader: gguf.GGUFReader) -> ModelConfig:
    """The ``ModelConfig`` of an open GGUF file."""
    tensors = {t.name: t for t in reader.tensors}
    freqs = tensors.get("rope_freqs.weight")
    rope_freqs = _dequantize(freqs).tolist() if freqs is not None else None
    return ModelConfig.from_gguf(metadata_of(reader), tensors.keys(), rope_freqs)


def load_gguf_model(
    path: str | Path, kernels: AttentionKernels, *, device: torch.device | str, dtype: torch.dtype
) -> DecoderModel:
    """The model of a GGUF file, weights dequantised (any quantisation ``gguf`` knows) and converted
    to ``dtype`` on ``device``. Raises ``ValueError`` for an unsupported architecture or missing weight."""
    reader = gguf.GGUFReader(path)
    config = gguf_model_config(reader)
    model = empty_model(config, kernels, device=device, dtype=dtype)
    loader = WeightLoader(model)
    progress = LoadProgress(Path(path).name, len(reader.tensors))
    for tensor in reader.tensors:
        name = hf_name(tensor.name)
        if name is not None:
            loader.load(name, torch.from_numpy(_weight(tensor, config)))
        progress.step(tensor.name)
    loader.finish()
    return model


def _weight(tensor: gguf.ReaderTensor, config: ModelConfig) -> np.ndarray:
    """The tensor in HF layout: dequantised fp32, Q/K rows back in HF order where llama.cpp permuted them."""
    weight = _dequantize(tensor)
    if config.architecture in PERMUTED_ARCHITECTURES:
        if ".attn_q." in tensor.name:
            weight = unpermute_rope_rows(weight, config.num_heads)
        elif ".attn_k." in tensor.name:
            weight = unpermute_rope_rows(weight, config.num_kv_heads)
    return weight


def _dequantize(tensor: gguf.ReaderTensor) -> np.ndarray:
    """A writable fp32 array in PyTorch's dimension order (GGUF lists dimensions innermost first)."""
    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    shape = tuple(int(d) for d in reversed(tensor.shape))
    values = np.ascontiguousarray(values.reshape(shape), dtype=np.float32)
    return values if values.flags.writeable else values.copy()  # fp32 tensors are views of the file
