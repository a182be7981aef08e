"""Token sampling from a step's logits: greedy, temperature, min-p, top-k, top-p, per-sequence seeds.

Logits are taken in fp32. A sampled (temperature > 0) row draws through its sequence's own
``torch.Generator`` with the exponential race ``argmax(p / q), q ~ Exp(1)`` (equivalent to drawing
from ``p``): the draw depends only on that generator's state and that row's probabilities, so a
seeded sequence samples the same tokens whatever else is in the batch.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import torch

from kvgate.proto.sampling import SamplingParams


def make_generator(params: SamplingParams, device: torch.device, choice: int = 0) -> torch.Generator | None:
    """The random stream of a new sequence on ``device``: seeded with ``params.seed`` (plus ``choice``,
    the index of one of ``n`` choices, so each draws its own sample; a random seed when None); None for
    greedy sampling, which draws nothing."""
    if params.greedy:
        return None
    seed = secrets.randbits(63) if params.seed is None else params.seed
    if choice and params.seed is not None:
        seed = (seed + choice) % 2**63
    return torch.Generator(device=device).manual_seed(seed)


def sample(
    logits: torch.Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator | None]
) -> list[int]:
    """One token per row of logits ``[B, V]`` (any float dtype), row ``b`` by ``params[b]`` with
    ``generators[b]`` (advanced only for sampled rows). Pure apart from the generators."""
    logits = logits.float()
    tokens = logits.argmax(dim=-1)  # [B]
    rows = [b for b, p in enumerate(params) if not p.greedy]
    if rows:
        drawn = _draw(logits[rows], [params[b] for b in rows], [generators[b] for b in rows])
        tokens[rows] = drawn
    return tokens.tolist()


def _draw(
    logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None]
) -> torch.Tensor:
    """Sampled tokens ``[R]`` of rows ``[R, V]``, all with temperature > 0."""
    device = logits.device
    logits = logits / torch.tensor([p.temperature for p in params], device=device)[:, None]
    if any(p.min_p > 0 for p in params):
        logits = min_p_filter(logits, torch.tensor([p.min_p for p in params], device=device))
    if any(p.top_k > 0 or p.top_p < 1 for p in params):
        top_k = torch.tensor([p.top_k for p in params], device=device)
        top_p = torch.tensor([p.top_p for p in params], device=device)
        logits = top_k_top_p(logits, top_k, top_p)
    probs = logits.softmax(dim=-1)  # [R, V]
    race = torch.empty_like(probs)
    for row, generator in zip(race, generators, strict=True):
        row.exponential_(generator=generator)
    return (probs / race).argmax(dim=-1)


def min_p_filter(logits: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """Logits ``[R, V]`` with every token less likely than ``min_p[r]`` times row ``r``'s most likely
    token set to -inf (0 = keep all). Returns a new tensor."""
    probs = logits.softmax(dim=-1)  # [R, V]
    floor = probs.max(dim=-1, keepdim=True).values * min_p[:, None]  # [R, 1]
    return logits.masked_fill(probs < floor, float("-inf"))


def top_k_top_p(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Logits ``[R, V]`` with every token outside row ``r``'s top ``top_k[r]`` (0 = all) and outside
    its nucleus of mass ``top_p[r]`` (1 = all) set to -inf. The most likely token always stays; tokens
    tied with the k-th stay too. Returns a new tensor."""
    vocab = logits.shape[-1]
    ordered, order = logits.sort(dim=-1)  # ascending: the most likely token is last
    k = torch.where(top_k > 0, top_k, vocab).clamp(max=vocab)  # [R]
    kth = ordered.gather(1, (vocab - k).unsqueeze(1))  # [R, 1]: the k-th largest logit
    ordered = ordered.masked_fill(ordered < kth, float("-inf"))
    mass = ordered.softmax(dim=-1).cumsum(dim=-1)  # [R, V]: mass of this token and all less likely ones
    drop = mass <= (1 - top_p).unsqueeze(1)
    drop[:, -1] = False
    ordered = ordered.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(1, order, ordered)
