"""A minimal paged engine for model tests: blocks handed out linearly from one pool, one prefill step
for a batch of prompts (each may start from another sequence's cached prefix blocks), then batched
greedy decode steps until every sequence has hit EOS or its token budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from kvgate.workers.model import DecoderModel, ScheduledSequence, allocate_kv_caches, build_step


@dataclass
class TestSequence:
    """One sequence: its tokens (prompt + generated), its blocks, and how many tokens' K/V are cached."""

    tokens: list[int]
    block_table: list[int]
    num_cached: int = 0
    prompt_len: int = 0
    finished: bool = False
    generated: list[int] = field(default_factory=list)


class PagedRunner:
    """Runs ``model`` over a KV pool of ``num_blocks`` blocks; blocks are never freed (tests are short)."""

    def __init__(self, model: DecoderModel, num_blocks: int, block_size: int = 16) -> None:
        self.model, self.block_size = model, block_size
        dtype = model.embed.weight.dtype
        self.caches = allocate_kv_caches(
            model.config.kv_geometry(str(dtype).removeprefix("torch.")), num_blocks, block_size, device="cpu"
        )
        self.num_blocks, self.next_block = num_blocks, 0

    def start(self, prompt: Sequence[int], prefix_of: TestSequence | None = None) -> TestSequence:
        """A new sequence; with ``prefix_of`` it reuses that sequence's full blocks of the longest common
        prefix (its K/V is not recomputed), leaving at least one prompt token to compute."""
        seq = TestSequence(tokens=list(prompt), block_table=[], prompt_len=len(prompt))
        if prefix_of is not None:
            shared = _common_prefix(prefix_of.tokens[: prefix_of.num_cached], prompt[:-1]) // self.block_size
            seq.block_table = prefix_of.block_table[:shared]
            seq.num_cached = shared * self.block_size
        return seq

    def step(self, seqs: Sequence[TestSequence]) -> list[int]:
        """Compute every uncached token of ``seqs`` in one forward pass; returns each one's greedy token."""
        for seq in seqs:
            self._grow(seq)
        scheduled = [
            ScheduledSequence(s.block_table, s.num_cached, len(s.tokens) - s.num_cached) for s in seqs
        ]
        inputs = build_step(scheduled, self.block_size, "cpu")
        ids = torch.tensor([t for s in seqs for t in s.tokens[s.num_cached :]], dtype=torch.int64)
        with torch.inference_mode():
            logits = self.model(ids, inputs.positions, inputs.attn, self.caches)  # [B, vocab]
        for seq in seqs:
            seq.num_cached = len(seq.tokens)
        return logits.argmax(dim=-1).tolist()

    def generate(self, seqs: Sequence[TestSequence], max_new_tokens: int, eos_ids: Sequence[int]) -> None:
        """Greedy decoding of ``seqs`` together until each emits an EOS (kept) or ``max_new_tokens``."""
        running = list(seqs)
        while running:
            for seq, token in zip(running, self.step(running), strict=True):
                seq.tokens.append(token)
                seq.generated.append(token)
                seq.finished = token in eos_ids or len(seq.generated) >= max_new_tokens
            running = [s for s in running if not s.finished]

    def _grow(self, seq: TestSequence) -> None:
        needed = -(-len(seq.tokens) // self.block_size)
        while len(seq.block_table) < needed:
            if self.next_block == self.num_blocks:
                raise RuntimeError("test KV pool exhausted")
            seq.block_table.append(self.next_block)
            self.next_block += 1


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
