"""Log-probabilities of a prompt's own tokens (completions' ``echo`` with ``logprobs``).

Position ``p``'s logits predict token ``p + 1``, so the prompt's tokens after the first are scored by the
logits of positions ``0 .. P - 2``; the first token has none (OpenAI and vLLM report null). A cached
block has K/V but no logits, so a request that asks for them computes its whole prompt: its admission
reuses no cached block (``KVCacheManager.admit(reuse=False)``), while what it computes is cached and
published as usual. Its prefill steps return logits for every new row (``ScheduledSequence.all_logits``),
however many chunks the prompt is split into; :func:`score_prompts` takes them out of the step's logits
before sampling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from kvgate.proto.sampling import TokenLogprob
from kvgate.workers.engine.logprobs import token_logprobs

if TYPE_CHECKING:
    from kvgate.workers.engine.scheduler import ScheduledItem


@dataclass(slots=True)
class PromptLogprobs:
    """One prompt's scores, collected step by step. ``prompt_ids``: the prompt; ``top``: how many most
    likely tokens per position. Mutated by :meth:`add` and :meth:`take`."""

    prompt_ids: np.ndarray
    top: int
    found: list[TokenLogprob] = field(default_factory=list)  # tokens 1 .. len(found), in order
    taken: bool = False

    @property
    def complete(self) -> bool:
        """True once every prompt token after the first is scored."""
        return len(self.found) == len(self.prompt_ids) - 1

    def add(self, logits: torch.Tensor, first_position: int) -> None:
        """Scores the tokens that ``logits`` ``[R, V]`` (positions ``first_position ..
        first_position + R - 1``) predict and that are not scored yet. Idempotent for rows scored
        before (a preempted prompt is recomputed). RuntimeError for a gap: positions never scored
        before ``first_position``, as a reused cached prefix would leave."""
        start = len(self.found) - first_position  # the row of the first position not scored yet
        if start < 0:
            raise RuntimeError(f"prompt positions {len(self.found)}..{first_position - 1} have no logits")
        stop = min(logits.shape[0], len(self.prompt_ids) - 1 - first_position)
        if stop > start:
            targets = self.prompt_ids[first_position + 1 + start : first_position + 1 + stop].tolist()
            self.found += token_logprobs(logits[start:stop], targets, [self.top] * len(targets))

    def take(self) -> tuple[TokenLogprob, ...]:
        """The scores, once complete, the first time only (they go with the first new token); else ()."""
        if self.taken or not self.complete:
            return ()
        self.taken = True
        return tuple(self.found)


def score_prompts(items: Sequence[ScheduledItem], logits: torch.Tensor) -> torch.Tensor:
    """Feeds each item's rows of the step's ``logits`` ``[B', V]`` (``work.logit_rows`` each, in batch
    order) to its sequence's :class:`PromptLogprobs` when it has ``all_logits``; returns the rows to
    sample from: the last row of each item that ``needs_logits``, in batch order (``logits`` itself
    when no item has ``all_logits``)."""
    if not any(item.work.all_logits for item in items):
        return logits
    sampled, at = [], 0
    for item in items:
        rows = item.work.logit_rows
        if item.work.all_logits:
            scores = item.seq.prompt_logprobs
            assert scores is not None
            scores.add(logits[at : at + rows], item.work.num_cached)
        if item.work.needs_logits:
            sampled.append(at + rows - 1)
        at += rows
    return logits[sampled]
