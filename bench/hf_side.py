"""The Hugging Face ``transformers`` side of the side-by-side benchmarks: the same model file, device,
dtype and batch as the kvgate engine, SDPA attention, greedy ``generate``.

Timings use the methods of the engine's side (see ``bench/engine_vs_hf.py`` and ``bench/gpu_serve.py``):
a prefill is the wall time of ``generate`` for one new token; decode is timed from the first new token to
the last one by a stopping criterion that stamps every step (it never stops anything itself).
"""

from __future__ import annotations

import copy
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import torch

from tests.support.shadowed import prefer_installed

prefer_installed()  # transformers imports PyPI's ``kernels``, not this repository's kernels/ folder

import transformers  # noqa: E402


class DecodeRun(NamedTuple):
    """``tokens`` generated after each sequence's first, over ``seconds`` from the first new token to the
    last; ``rate`` in tokens/s."""

    tokens: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


def load_hf(model_path: Path, device: str, dtype: torch.dtype) -> Any:
    """``transformers``' own load of the model kvgate serves: a ``.gguf`` file (dequantised by
    transformers, as kvgate dequantises it) or a safetensors directory; SDPA attention, eval mode."""
    transformers.logging.set_verbosity_error()
    auto = transformers.AutoModelForCausalLM
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": "sdpa"}
    if model_path.suffix == ".gguf":
        model = auto.from_pretrained(model_path.parent, gguf_file=model_path.name, **kwargs)
    else:
        model = auto.from_pretrained(model_path, **kwargs)
    return model.to(device).eval()


class _StepClock(transformers.StoppingCriteria):
    """Stamps the time after each generation step (the device synchronised first); never stops."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.stamps = device, list[float]()

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **_: Any) -> torch.Tensor:
        _sync(self.device)
        self.stamps.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _generate(model: Any, prompts: torch.Tensor, new_tokens: int, **extra: Any) -> torch.Tensor:
    """Greedy ``generate`` of exactly ``new_tokens`` tokens after each row of ``prompts`` ``[B, L]``
    (equal lengths: no padding), EOS ignored."""
    with torch.inference_mode():
        return model.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            do_sample=False,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=0,
            **extra,
        )


def hf_prefill_s(model: Any, prompts: torch.Tensor) -> float:
    """Wall seconds of ``generate`` for one new token after ``prompts`` ``[B, L]``: the cold time to
    first token of the batch."""
    _sync(prompts.device)
    start = time.perf_counter()
    _generate(model, prompts, 1)
    _sync(prompts.device)
    return time.perf_counter() - start


def hf_decode(model: Any, prompts: torch.Tensor, new_tokens: int) -> DecodeRun:
    """``new_tokens`` (>= 2) greedy tokens after each row of ``prompts`` ``[B, L]``, timed from the step
    that produced the first new token to the one that produced the last."""
    clock = _StepClock(prompts.device)
    _generate(model, prompts, new_tokens, stopping_criteria=transformers.StoppingCriteriaList([clock]))
    stamps = clock.stamps
    return DecodeRun(prompts.shape[0] * (len(stamps) - 1), stamps[-1] - stamps[0])


def hf_prefix_cache(model: Any, prefix: torch.Tensor) -> Any:
    """The KV cache of ``prefix`` ``[1, P]`` (one forward, untimed): what a transformers server keeps to
    reuse a shared prefix across requests."""
    with torch.inference_mode():
        return model(prefix, use_cache=True, logits_to_keep=1).past_key_values  # not [P, vocab] logits


def hf_cached_ttft_s(model: Any, cache: Any, prompt: torch.Tensor) -> float:
    """Time to first token of ``prompt`` ``[1, L]`` whose leading tokens ``cache`` holds: a deep copy of
    the cache (``generate`` extends the cache it is given, so each request needs its own) and the
    prefill of the rest. Does not mutate ``cache``."""
    _sync(prompt.device)
    start = time.perf_counter()
    with warnings.catch_warnings():  # newer releases call it ``cache``; older ones know only this name
        warnings.simplefilter("ignore", FutureWarning)
        _generate(model, prompt, 1, past_key_values=copy.deepcopy(cache))
    _sync(prompt.device)
    return time.perf_counter() - start
