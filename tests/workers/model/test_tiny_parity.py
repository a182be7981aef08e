"""Tiny random-weight models of every supported family, saved by ``transformers`` as safetensors and
loaded by kvgate's loader: logits equal Hugging Face's (fp32, tight tolerance) in batched prefill, decode,
chunked prefill and mixed steps, and greedy generation gives the same tokens."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch

from kvgate.kernels import get_kernels
from kvgate.workers.model import DecoderModel, ScheduledSequence, allocate_kv_caches, build_step, load_model
from tests.common.tokenizer.default_model import transformers_module
from tests.workers.model.harness import PagedRunner
from tests.workers.model.tiny import VARIANTS, save_tiny_model

BLOCK = 4  # small blocks: every sequence crosses several block boundaries
TOL = {"atol": 2e-5, "rtol": 1e-4}
# by model_type: a checkpoint tensor of layer 1 to drop, and how the loader must name what is then missing
DROPPED = {
    "llama": ("model.layers.1.mlp.up_proj.weight", r"layers\.1\.mlp\.gate_up\.weight\[up\]"),
    "phi3": ("model.layers.1.mlp.gate_up_proj.weight", r"layers\.1\.mlp\.gate_up\.weight\[gate\]"),
    "mixtral": ("model.layers.1.block_sparse_moe.experts.2.w3.weight",
                r"layers\.1\.mlp\.experts\.2\.gate_up\.weight\[up\]"),
    "qwen3_moe": ("model.layers.1.mlp.experts.2.up_proj.weight",
                  r"layers\.1\.mlp\.experts\.2\.gate_up\.weight\[up\]"),
}  # fmt: skip


@dataclass(frozen=True)
class Pair:
    hf: Any
    ours: DecoderModel
    folder: Path


BACKENDS = ("reference", "sdpa")  # the specification and the engine's fast path


@pytest.fixture(scope="module", params=[(v, k) for v in sorted(VARIANTS) for k in BACKENDS], ids=str)
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    variant, kernels = request.param
    transformers_module()
    folder = tmp_path_factory.mktemp(variant)
    hf = save_tiny_model(variant, folder)
    return Pair(hf, load_model(folder, get_kernels(kernels), device="cpu", dtype=torch.float32), folder)


def _ids(n: int, seed: int) -> list[int]:
    return torch.randint(0, 320, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _hf_logits(hf: Any, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return hf(torch.tensor([ids])).logits[0]  # [T, vocab]


def _forward(model: DecoderModel, caches: Any, seqs: list[ScheduledSequence], ids: list[int],
             every_row: bool = False) -> torch.Tensor:  # fmt: skip
    step = build_step([replace(s, all_logits=every_row) for s in seqs], BLOCK, "cpu")
    with torch.inference_mode():
        return model(torch.tensor(ids), step.positions, step.attn, caches)


def _tables(*lengths: int) -> list[list[int]]:
    """Disjoint block tables, allocated linearly, for sequences of these lengths."""
    tables, start = [], 0
    for n in lengths:
        count = -(-n // BLOCK)
        tables.append(list(range(start, start + count)))
        start += count
    return tables


def test_config_is_read_from_config_json(pair: Pair) -> None:
    hf, ours = pair.hf.config, pair.ours.config
    assert (ours.num_layers, ours.num_heads, ours.num_kv_heads) == (2, 4, hf.num_key_value_heads)
    assert ours.head_dim == (getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads)
    assert ours.tie_word_embeddings == hf.tie_word_embeddings
    assert ours.qkv_bias == (hf.model_type == "qwen2")


def test_batched_prefill_logits_equal_transformers_at_every_position(pair: Pair) -> None:
    prompts = [_ids(5, 1), _ids(17, 2), _ids(33, 3)]
    caches = allocate_kv_caches(pair.ours.config.kv_geometry("float32"), 32, BLOCK, device="cpu")
    seqs = [ScheduledSequence(t, 0, len(p)) for t, p in zip(_tables(5, 17, 33), prompts, strict=True)]
    logits = _forward(pair.ours, caches, seqs, [t for p in prompts for t in p], every_row=True)  # [55, V]
    expected = torch.cat([_hf_logits(pair.hf, p) for p in prompts])
    torch.testing.assert_close(logits, expected, **TOL)


def test_decode_and_chunked_prefill_in_mixed_steps_equal_transformers(pair: Pair) -> None:
    a, b = _ids(23, 4), _ids(30, 5)
    caches = allocate_kv_caches(pair.ours.config.kv_geometry("float32"), 32, BLOCK, device="cpu")
    table_a, table_b = _tables(24, 30)
    # step 1: all of a but its last token, and b's first chunk: no logits wanted for either
    first = [ScheduledSequence(table_a, 0, 22, needs_logits=False), ScheduledSequence(table_b, 0, 12, False)]
    assert _forward(pair.ours, caches, first, a[:22] + b[:12]).shape == (0, pair.ours.config.vocab_size)
    # step 2: a decodes one token while b prefills the rest of its prompt (the prefill path)
    second = [ScheduledSequence(table_a, 22, 1), ScheduledSequence(table_b, 12, 18)]
    logits = _forward(pair.ours, caches, second, a[22:] + b[12:])  # [2, V]
    expected = torch.stack([_hf_logits(pair.hf, a)[-1], _hf_logits(pair.hf, b)[-1]])
    torch.testing.assert_close(logits, expected, **TOL)
    # step 3: both decode (the decode path)
    a, b = [*a, 7], [*b, 11]
    third = [ScheduledSequence(table_a, 23, 1), ScheduledSequence(table_b, 30, 1)]
    logits = _forward(pair.ours, caches, third, [7, 11])
    expected = torch.stack([_hf_logits(pair.hf, a)[-1], _hf_logits(pair.hf, b)[-1]])
    torch.testing.assert_close(logits, expected, **TOL)


def test_the_last_layer_runs_the_logits_rows_alone_with_the_same_logits_and_cache(pair: Pair) -> None:
    a, b, c = _ids(23, 8), _ids(13, 9), _ids(6, 10)
    seqs = [
        ScheduledSequence(table, 0, n, needs_logits=n != 13)  # b: a prompt chunk, no logits
        for table, n in zip(_tables(23, 13, 6), (23, 13, 6), strict=True)
    ]
    step = build_step(seqs, BLOCK, "cpu")
    geometry = pair.ours.config.kv_geometry("float32")
    seen: list[int] = []
    last = pair.ours.layers[-1]
    hook = last.mlp_norm.register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape[0]))
    results = []
    try:
        for attn in (step.attn, replace(step.attn, output_rows=None)):  # pruned, then every row
            caches = allocate_kv_caches(geometry, 32, BLOCK, device="cpu")
            with torch.inference_mode():
                results.append((pair.ours(torch.tensor(a + b + c), step.positions, attn, caches), caches))
    finally:
        hook.remove()
    assert seen == [2, 23 + 13 + 6]  # a's and c's last rows, then all of them
    (pruned, pruned_caches), (full, full_caches) = results
    torch.testing.assert_close(pruned, full, **TOL)  # the same sums, blocked differently by BLAS
    for ours, every in zip(pruned_caches, full_caches, strict=True):  # every token's K/V, last layer too
        assert torch.equal(ours.k, every.k)
        assert torch.equal(ours.v, every.v)


def test_greedy_tokens_equal_transformers(pair: Pair) -> None:
    prompts = [_ids(9, 6), _ids(20, 7)]
    runner = PagedRunner(pair.ours, num_blocks=32, block_size=BLOCK)
    seqs = [runner.start(p) for p in prompts]
    runner.generate(seqs, 12, eos_ids=())
    for seq, prompt in zip(seqs, prompts, strict=True):
        out = pair.hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12, min_new_tokens=12)
        assert seq.generated == out[0, len(prompt) :].tolist()


def test_a_missing_weight_is_reported(pair: Pair, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    source = pair.folder
    tensors = load_file(source / "model.safetensors")
    dropped, reported = DROPPED.get(pair.hf.config.model_type, DROPPED["llama"])
    del tensors[dropped]
    save_file(tensors, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text((source / "config.json").read_text())
    with pytest.raises(ValueError, match=reported):
        load_model(tmp_path, get_kernels("reference"))
