"""Logit processing before sampling: OpenAI's presence and frequency penalties, vLLM's repetition
penalty, ``logit_bias``, and the tokens ``min_tokens`` keeps from ending a sequence early.

Everything is batched over the rows that need it (``[R, V]`` tensor ops, no Python loop over the
vocabulary); a row's counts of what it generated live on the device in its :class:`TokenHistory`,
updated by one indexed add per new token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvgate.proto.sampling import SamplingParams


class TokenHistory:
    """One sequence's generated-token counts ``[V]`` int32 and, for a repetition penalty, the mask
    ``[V]`` of tokens seen in its prompt or output; on the logits' device. Mutated by :meth:`add`."""

    def __init__(
        self, prompt_ids: Sequence[int], vocab_size: int, device: torch.device, repeat: bool
    ) -> None:
        self.counts = torch.zeros(vocab_size, dtype=torch.int32, device=device)
        self.seen: torch.Tensor | None = None
        if repeat:
            self.seen = torch.zeros(vocab_size, dtype=torch.bool, device=device)
            self.seen[torch.as_tensor(list(prompt_ids), dtype=torch.int64, device=device)] = True

    def add(self, token_id: int) -> None:
        self.counts[token_id] += 1
        if self.seen is not None:
            self.seen[token_id] = True


@dataclass(frozen=True, slots=True)
class Processing:
    """What changes one row's logits: its parameters, its history (None: no penalty), and the token
    ids it may not sample now (EOS and stop ids while ``min_tokens`` are not reached)."""

    params: SamplingParams
    history: TokenHistory | None
    blocked: tuple[int, ...] = ()

    @property
    def active(self) -> bool:
        return self.history is not None or bool(self.blocked) or bool(self.params.logit_bias)


def process(logits: torch.Tensor, rows: Sequence[Processing]) -> torch.Tensor:
    """Logits ``[B, V]`` fp32 with each row's penalties, biases and blocked tokens applied (rows whose
    :attr:`Processing.active` is False are untouched). Returns a new tensor when any row changes."""
    picked = [b for b, row in enumerate(rows) if row.active]
    if not picked:
        return logits
    logits = logits.clone()
    part = logits[picked]  # [R, V]
    part = _penalize(part, [rows[b] for b in picked])
    part = _bias_and_block(part, [rows[b] for b in picked])
    logits[picked] = part
    return logits


def _penalize(logits: torch.Tensor, rows: list[Processing]) -> torch.Tensor:
    with_history = [r for r, row in enumerate(rows) if row.history is not None]
    if not with_history:
        return logits
    device = logits.device
    counts = torch.stack([rows[r].history.counts for r in with_history]).float()  # type: ignore[union-attr]
    presence = torch.tensor([rows[r].params.presence_penalty for r in with_history], device=device)
    frequency = torch.tensor([rows[r].params.frequency_penalty for r in with_history], device=device)
    part = logits[with_history]  # [H, V]
    part = _repeat(part, [rows[r] for r in with_history])
    part = part - frequency[:, None] * counts - presence[:, None] * (counts > 0).float()
    logits[with_history] = part
    return logits


def _repeat(logits: torch.Tensor, rows: list[Processing]) -> torch.Tensor:
    """vLLM's repetition penalty: a seen token's logit divided by the penalty when positive,
    multiplied when negative."""
    if all(row.params.repetition_penalty == 1 for row in rows):
        return logits
    seen = torch.stack([_seen(row, logits) for row in rows])  # [H, V]
    penalty = torch.tensor([row.params.repetition_penalty for row in rows], device=logits.device)[:, None]
    scaled = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, scaled, logits)


def _seen(row: Processing, like: torch.Tensor) -> torch.Tensor:
    assert row.history is not None
    if row.history.seen is None:  # this row has no repetition penalty
        return torch.zeros(like.shape[-1], dtype=torch.bool, device=like.device)
    return row.history.seen


def _bias_and_block(logits: torch.Tensor, rows: list[Processing]) -> torch.Tensor:
    bias = [(r, t, v) for r, row in enumerate(rows) for t, v in row.params.logit_bias]
    if bias:
        r, t, v = zip(*bias, strict=True)
        index = (torch.tensor(r, device=logits.device), torch.tensor(t, device=logits.device))
        logits.index_put_(index, torch.tensor(v, device=logits.device), accumulate=True)
    blocked = [(r, t) for r, row in enumerate(rows) for t in row.blocked]
    if blocked:
        r, t = zip(*blocked, strict=True)
        logits[torch.tensor(r, device=logits.device), torch.tensor(t, device=logits.device)] = float("-inf")
    return logits
