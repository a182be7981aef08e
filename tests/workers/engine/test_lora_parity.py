"""LoRA adapters through the engine against ``peft`` + ``transformers`` on tiny random weights (fp32):
two adapters made with ``peft`` (random A and B, so every update is non-zero) are loaded from their
PEFT folders; one batch mixes sequences of both adapters and of the base model, and each sequence's
last-position logits and greedy tokens equal ``peft``'s for its adapter. A prefix-cache hit is reused
only under the same adapter: another adapter's request over the same prompt recomputes every token."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from kvgate.kernels import get_kernels
from kvgate.workers.engine import LLMEngine, run_to_completion
from kvgate.workers.model import load_model
from kvgate.workers.model.lora import AdapterSet, load_peft_adapter
from tests.common.tokenizer.default_model import transformers_module
from tests.workers.engine.helpers import assert_no_leak, engine_for, greedy, random_ids, request
from tests.workers.model.tiny import save_tiny_model

N = 10  # new tokens per request
PREFIX = random_ids(24, seed=300)
A = [*PREFIX, *random_ids(6, seed=301)]
B = [*PREFIX, *random_ids(9, seed=302)]
TOL = {"atol": 3e-5, "rtol": 1e-4}
# adapter id -> (peft LoraConfig arguments, seed of its random weights); "some-r8-rslora" targets some
# shards of the fused qkv and gate_up (Llama) or fused modules whole (Phi-3's checkpoints fuse them)
ADAPTERS: dict[str, tuple[dict[str, Any], int]] = {
    "all-r4": ({"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}, 1),
    "some-r8-rslora": ({"r": 8, "lora_alpha": 4, "use_rslora": True}, 2),
}
SOME = {"llama-gqa": ["q_proj", "v_proj", "up_proj"], "phi3": ["qkv_proj", "down_proj"]}


@pytest.fixture(scope="module", params=["llama-gqa", "phi3"])
def setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The base model (``transformers``), its adapters with ``peft`` (id -> PeftModel), our model and
    our loaded adapters; phi3's checkpoints fuse qkv and gate_up, so its adapters target fused modules."""
    transformers_module()
    import peft

    folder: Path = tmp_path_factory.mktemp(request.param)
    hf = save_tiny_model(request.param, folder)
    ours = load_model(folder, get_kernels("sdpa"), device="cpu")
    references, loaded = {}, []
    for name, (args, seed) in ADAPTERS.items():
        torch.manual_seed(seed)
        targets = {"target_modules": SOME[request.param]} if name == "some-r8-rslora" else {}
        config = peft.LoraConfig(init_lora_weights=False, **args, **targets)
        wrapped = peft.get_peft_model(copy.deepcopy(hf), config)
        wrapped.save_pretrained(folder / name)
        references[name] = wrapped.eval()
        loaded.append(load_peft_adapter(folder / name, name, ours.config))
    return {"hf": hf, "peft": references, "model": ours, "adapters": AdapterSet(loaded)}


def _reference(model: Any, prompt: Sequence[int]) -> tuple[torch.Tensor, list[int]]:
    ids = torch.tensor([list(prompt)])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, -1]
        out = model.generate(input_ids=ids, do_sample=False, max_new_tokens=N, min_new_tokens=N)
    return logits, out[0, len(prompt) :].tolist()


def _engine(setup: dict[str, Any]) -> LLMEngine:
    return engine_for(setup["model"], gpu_blocks=64, adapters=setup["adapters"])


def _request(rid: str, prompt: Sequence[int], adapter: str = "") -> Any:
    return request(rid, prompt, greedy(N), adapter_id=adapter)


def test_a_batch_mixing_two_adapters_and_the_base_model_matches_peft(setup: dict[str, Any]) -> None:
    engine = _engine(setup)
    runs = {"x": ("all-r4", A), "y": ("some-r8-rslora", B), "z": ("", A)}
    reqs = [_request(rid, prompt, adapter) for rid, (adapter, prompt) in runs.items()]
    done = run_to_completion(engine, reqs)  # one batch: all three prefill and decode together
    for rid, (adapter, prompt) in runs.items():
        reference = setup["peft"][adapter] if adapter else setup["hf"]
        _, tokens = _reference(reference, prompt)
        assert list(done[rid].token_ids) == tokens, rid
    assert_no_leak(engine)


def test_logits_match_peft_and_differ_from_the_base_model(setup: dict[str, Any]) -> None:
    engine = _engine(setup)
    recorded: list[torch.Tensor] = []
    forward = engine.runner.forward
    engine.runner.forward = lambda *args: recorded.append(forward(*args).clone()) or recorded[-1]  # type: ignore[method-assign]
    run_to_completion(engine, [_request("x", A, "all-r4")])
    logits, _ = _reference(setup["peft"]["all-r4"], A)
    base, _ = _reference(setup["hf"], A)
    torch.testing.assert_close(recorded[0][0], logits, **TOL)
    assert (logits - base).abs().max() > 0.1  # the adapter changes the model: the check above can fail


def test_a_prefix_hit_is_reused_only_under_the_same_adapter(setup: dict[str, Any]) -> None:
    engine = _engine(setup)
    run_to_completion(engine, [_request("first", A, "all-r4")])
    done = run_to_completion(engine, [_request("same", B, "all-r4")])["same"]
    assert done.usage.cached_tokens >= len(PREFIX) - 4  # whole blocks of the shared prefix
    assert list(done.token_ids) == _reference(setup["peft"]["all-r4"], B)[1]
    other = run_to_completion(engine, [_request("other", B, "some-r8-rslora")])["other"]
    assert other.usage.cached_tokens == 0
    base = run_to_completion(engine, [_request("base", B)])["base"]
    assert base.usage.cached_tokens == 0
    assert_no_leak(engine)


def test_a_request_for_an_adapter_the_engine_lacks_is_refused_with_the_loaded_ones(
    setup: dict[str, Any],
) -> None:
    engine = _engine(setup)
    with pytest.raises(
        ValueError, match=r"'nope' is not loaded on this worker \(loaded: all-r4, some-r8-rslora\)"
    ):
        engine.add_request(_request("bad", A, "nope"))
