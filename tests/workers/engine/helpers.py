"""Builders for the engine tests: engines over a loaded model with small blocks, requests, token ids, a
letter-pair tokenizer for stop strings, and checks that no KV block leaked."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np
import tokenizers
import torch
from tokenizers import decoders, models

from kvgate.common.clock import Clock, ManualClock
from kvgate.common.tokenizer import SpecialTokens, Tokenizer
from kvgate.kernels import get_kernels
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import SamplingParams
from kvgate.workers.engine import EngineConfig, EngineRequest, LLMEngine, SchedulingLimits
from kvgate.workers.kv import StepEventPublisher
from kvgate.workers.model import DecoderModel
from kvgate.workers.model.lora import AdapterSet

WORKER = WorkerId("worker-0")
TINY_CACHE = CacheLayout("tiny-llama", secret=b"test", chunk_size=8, block_size=4)  # 2 blocks per chunk
GREEDY = SamplingParams(temperature=0, max_tokens=12)


def greedy(max_tokens: int) -> SamplingParams:
    return SamplingParams(temperature=0, max_tokens=max_tokens)


def engine_for(
    model: DecoderModel,
    *,
    gpu_blocks: int,
    cpu_blocks: int = 0,
    cache: CacheLayout = TINY_CACHE,
    limits: SchedulingLimits | None = None,
    max_model_len: int | None = None,
    tokenizer: Tokenizer | None = None,
    clock: Clock | None = None,
    adapters: AdapterSet | None = None,
) -> LLMEngine:
    """A fresh engine (empty KV tiers, epoch 1) over an already loaded ``model`` (the default kernels
    for its block copies; attention runs on the kernels the model was loaded with)."""
    config = EngineConfig(
        cache,
        num_gpu_blocks=gpu_blocks,
        num_cpu_blocks=cpu_blocks,
        limits=limits or SchedulingLimits(),
        max_model_len=max_model_len,
    )
    publisher = StepEventPublisher(WORKER, Epoch(1))
    return LLMEngine(config, model, get_kernels(config.kernel_backend), publisher, tokenizer=tokenizer,
                     clock=clock or ManualClock(), adapters=adapters)  # fmt: skip


def request(
    request_id: str, prompt: Sequence[int], sampling: SamplingParams = GREEDY, **extra: Any
) -> EngineRequest:
    """An :class:`EngineRequest` of ``prompt`` (greedy, 12 new tokens unless ``sampling`` says else)."""
    return EngineRequest(request_id, np.asarray(prompt, dtype=np.uint32), sampling, **extra)


def random_ids(n: int, seed: int, vocab: int = 320) -> list[int]:
    """``n`` token ids drawn from ``[0, vocab)``, reproducibly."""
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def assert_no_leak(engine: LLMEngine) -> None:
    """Nothing runs or waits, the manager tracks no sequence, and every GPU block is free again
    (empty or cached, unreferenced)."""
    assert not engine.has_work()
    assert engine.kv.seq_ids() == []
    gpu = engine.kv.gpu_pool
    assert gpu.num_free == gpu.num_blocks
    assert all(block.ref_cnt == 0 for block in gpu.blocks)


def letter_tokenizer(eos_ids: tuple[int, ...] = ()) -> Tokenizer:
    """A tokenizer for the tiny models' 320 ids: id ``i`` spells two letters (``aa``, ``ab``, ...),
    decoded by plain concatenation, so stop strings can span tokens."""
    letters = string.ascii_lowercase
    vocab = {letters[i // 26] + letters[i % 26]: i for i in range(320)}
    backend = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="aa"))
    backend.decoder = decoders.Fuse()
    return Tokenizer(backend, SpecialTokens(bos_id=None, eos_ids=eos_ids))
