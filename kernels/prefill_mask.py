"""The attention mask of a prefill over a cached prefix (or a prompt chunk after earlier chunks, or a
windowed layer): built once per step for all its layers.

A sequence's ``Q`` new tokens sit at the last ``Q`` of its ``L`` positions; the query at position ``i``
sees keys ``0..i`` (the last ``window`` of them with a window). SDPA's ``is_causal`` aligns the square's
corner top-left, so these shapes need an explicit mask; given as a bool mask it is converted to an
additive one inside every call. :func:`additive_mask` builds the additive form (0 where visible,
``-inf`` elsewhere) directly, in the query's dtype, and :class:`PrefillMasks` keeps it for the step's
other layers (see ``step_memo``).
"""

from __future__ import annotations

import torch

from kvgate.kernels.step_memo import StepMemo


def additive_mask(
    num_q: int, context_len: int, window: int | None, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """``[num_q, context_len]``: 0 where query ``r`` (position ``context_len - num_q + r``) sees the key,
    ``-inf`` elsewhere."""
    q_pos = torch.arange(context_len - num_q, context_len, device=device)[:, None]
    k_pos = torch.arange(context_len, device=device)[None, :]
    hidden = k_pos > q_pos  # [Q, L]
    if window is not None:
        hidden |= k_pos <= q_pos - window
    return torch.zeros(hidden.shape, dtype=dtype, device=device).masked_fill_(hidden, float("-inf"))


MAX_KEPT_ELEMENTS = 1 << 24  # larger masks (e.g. a 2,048-token chunk over 8,192+ tokens) are not kept


class PrefillMasks:
    """The masks of the prefill step in progress, per (new tokens, context, window, dtype). A mask of
    more than :data:`MAX_KEPT_ELEMENTS` is built for each call instead: the memo outlives its step
    until the next one, and a mask that large costs little next to the attention it serves."""

    def __init__(self) -> None:
        self._memo: StepMemo[torch.Tensor] = StepMemo()

    def mask(
        self,
        step: tuple[torch.Tensor, torch.Tensor],
        num_q: int,
        context_len: int,
        window: int | None,
        dtype: torch.dtype,
        device: torch.device,
    ) -> torch.Tensor:
        """The mask of one sequence of the step whose ``(cu_seqlens_q, context_lens)`` are ``step``."""
        if num_q * context_len > MAX_KEPT_ELEMENTS:
            return additive_mask(num_q, context_len, window, dtype, device)
        return self._memo.get(
            step,
            (num_q, context_len, window, dtype, device),
            lambda: additive_mask(num_q, context_len, window, dtype, device),
        )
