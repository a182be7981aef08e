"""Log-probabilities of tokens, as OpenAI reports them: the model's own log-softmax at a position
(before temperature, penalties or any filter), for the token there and the most likely ones."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kvgate.proto.sampling import TokenLogprob


def token_logprobs(logits: torch.Tensor, token_ids: Sequence[int], top: Sequence[int]) -> list[TokenLogprob]:
    """Row ``r`` of logits ``[R, V]``: the log-probability of ``token_ids[r]`` and of the ``top[r]``
    most likely tokens (most likely first; ties in id order as ``torch.topk`` breaks them)."""
    if not token_ids:
        return []
    logprobs = torch.log_softmax(logits.float(), dim=-1)  # [R, V]
    index = torch.as_tensor(list(token_ids), dtype=torch.int64, device=logits.device)[:, None]
    chosen = logprobs.gather(1, index)[:, 0].tolist()  # [R]
    k = max(top)
    values, ids = logprobs.topk(k, dim=-1) if k else (logprobs[:, :0], logprobs[:, :0].long())
    values_l, ids_l = values.tolist(), ids.tolist()
    return [
        TokenLogprob(chosen[r], tuple(zip(ids_l[r][: top[r]], values_l[r][: top[r]], strict=True)))
        for r in range(len(token_ids))
    ]
