"""Token masks of constrained rows: which tokens each row's grammar allows next, applied to a step's
logits as one batched tensor op (no Python loop over the vocabulary).

A bitmask row is ``ceil(V / 32)`` int32 words: token ``t`` is allowed when bit ``t % 32`` of word
``t // 32`` is set (llguidance's layout). llguidance fills the rows of a step in parallel, off the GIL.
"""

from __future__ import annotations

from collections.abc import Sequence

import llguidance
import torch

from kvgate.workers.engine.grammar import GrammarState

_BITS = 32


def bitmask_words(vocab_size: int) -> int:
    """Words of one bitmask row covering ``vocab_size`` ids."""
    return (vocab_size + _BITS - 1) // _BITS


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """Logits ``[R, V]`` with every token row ``r``'s bitmask ``[R, W]`` (int32, any device) does not
    allow set to -inf; ids past ``32 * W`` are not allowed, bits past ``V`` are ignored. Returns a
    new tensor."""
    rows, vocab = logits.shape
    shifts = torch.arange(_BITS, dtype=torch.int32, device=logits.device)  # [32]
    words = bitmask.to(logits.device, torch.int32)  # [R, W]
    allowed = ((words[:, :, None] >> shifts) & 1).bool().reshape(rows, -1)  # [R, 32W]
    if allowed.shape[1] < vocab:
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[1]), value=False)
    return logits.masked_fill(~allowed[:, :vocab], float("-inf"))


class GrammarMasker:
    """Masks a step's constrained rows. Owned by the engine; used on its thread only."""

    def __init__(self, vocab_size: int, threads: int | None = None) -> None:
        """``vocab_size``: the ids a grammar's mask covers (its compiler's ``vocab_size``);
        ``threads``: llguidance's mask workers (None: its default, most of the CPUs)."""
        self._words = bitmask_words(vocab_size)
        self._threads = threads
        self._executor: llguidance.LLExecutor | None = None  # its thread pool starts with the first mask

    def fill(self, states: Sequence[GrammarState]) -> torch.Tensor:
        """The bitmasks ``[len(states), W]`` int32 (CPU) of what each state allows next."""
        if self._executor is None:
            self._executor = llguidance.LLExecutor(self._threads)
        bitmask = torch.full((len(states), self._words), -1, dtype=torch.int32)
        pairs = [(state.matcher, row) for row, state in enumerate(states)]
        self._executor.unsafe_compute_mask_ptr(pairs, bitmask.data_ptr(), self._words * 4, len(states))
        return bitmask

    def constrain(
        self, processed: torch.Tensor, raw: torch.Tensor, grammars: Sequence[GrammarState | None]
    ) -> torch.Tensor:
        """``processed`` logits ``[B, V]`` (penalties and blocks applied) with each constrained row
        (``grammars[b]`` not None) masked by its grammar; unconstrained rows untouched. A row whose
        grammar allows none of the tokens processing left (e.g. only EOS, which ``min_tokens``
        blocks) falls back to its ``raw`` logits under the grammar's mask: the grammar wins.
        Returns ``processed`` itself when no row is constrained, else a new tensor."""
        rows = [b for b, grammar in enumerate(grammars) if grammar is not None]
        if not rows:
            return processed
        bitmask = self.fill([grammars[b] for b in rows])  # type: ignore[misc]  # None filtered out
        masked = apply_token_bitmask(processed[rows], bitmask)  # [R, V]
        dead = torch.isneginf(masked).all(dim=-1)  # [R]
        if bool(dead.any()):
            masked[dead] = apply_token_bitmask(raw[rows][dead], bitmask[dead.cpu()])
        out = processed.clone()
        out[rows] = masked
        return out
