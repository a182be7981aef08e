"""Tiny LoRA adapters made with ``peft`` over a saved model, saved as PEFT folders, with the ``peft``
models that are their reference outputs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from tests.common.tokenizer.default_model import transformers_module


def make_adapters(model_dir: Path, out: Path, seeds: dict[str, int]) -> dict[str, Any]:
    """For each ``name -> seed``: an adapter of rank 4 on every linear layer, A and B drawn at random
    (so every update is non-zero), saved to ``out / name``. Returns ``name -> peft model`` and ``""``
    -> the base ``transformers`` model, all fp32 in eval mode."""
    import peft

    hf = transformers_module().AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    models: dict[str, Any] = {"": hf}
    for name, seed in seeds.items():
        torch.manual_seed(seed)
        config = peft.LoraConfig(r=4, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
        wrapped = peft.get_peft_model(copy.deepcopy(hf), config)
        wrapped.save_pretrained(out / name)
        models[name] = wrapped.eval()
    return models


def greedy_text(model: Any, tokenizer: Any, messages: list[dict[str, str]], n: int) -> str:
    """``model``'s greedy continuation of ``n`` tokens of the chat, as text (special tokens dropped,
    as the gateway answers)."""
    text = tokenizer.apply_chat_template(messages)
    ids = torch.tensor([tokenizer.encode(text, add_special_tokens=False).tolist()])
    with torch.inference_mode():
        out = model.generate(input_ids=ids, do_sample=False, max_new_tokens=n, min_new_tokens=n)
    return tokenizer.decode(out[0, ids.shape[1] :].tolist(), skip_special_tokens=True)
