"""Choosing a model's :class:`GemmPlan` by measuring it: each weight shape's products at each row bucket,
every :data:`GEMMS` form, timed over the model's own weights of that shape (as many as fit in
``budget_bytes``, so that they stream from memory as in a decode step and not from cache).

A form replaces ``linear`` only when it is faster by more than ``margin`` (5% by default), so noise
keeps the standard product. The choice is made once per process, at load; :func:`install` gives it to
every projection of the model and to its output head.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import torch

from kvgate.workers.model.decoder import DecoderModel
from kvgate.workers.model.gemm import (
    BUCKETS,
    GEMM_CHOICES,
    GEMMS,
    STANDARD,
    GemmPlan,
    Projection,
    Shape,
    bucket_of,
    fits,
)

log = logging.getLogger("kvgate.workers.model.gemm")

TUNE_MIN_BYTES = 32 << 20  # smaller models sit in the CPU's caches: the form hardly matters there
TUNE_BUDGET_BYTES = 128 << 20


def projection_weights(model: DecoderModel) -> dict[Shape, list[torch.Tensor]]:
    """Every projection weight and the output head's, grouped by shape, in layer order."""
    groups: dict[Shape, list[torch.Tensor]] = defaultdict(list)
    for weight in _weights(model):
        groups[(weight.shape[0], weight.shape[1])].append(weight)
    return dict(groups)


def _weights(model: DecoderModel) -> Iterator[torch.Tensor]:
    for module in model.modules():
        if isinstance(module, Projection):
            yield module.weight
    yield model.output_weight


def plan_for(model: DecoderModel, choice: str) -> GemmPlan:
    """``choice``: a :data:`GEMMS` name (used everywhere), or ``auto``: measured by :func:`tune` on a
    model of at least :data:`TUNE_MIN_BYTES` of weights, else the standard product. Off the CPU every
    choice is the standard product (GPU BLAS has no such gap)."""
    if choice not in GEMM_CHOICES:
        raise ValueError(f"gemm must be one of {', '.join(GEMM_CHOICES)}, got {choice!r}")
    if model.output_weight.device.type != "cpu":
        return STANDARD
    if choice != "auto":
        _probe(choice, model.output_weight.dtype)
        return GemmPlan.uniform(choice, list(projection_weights(model)))
    weights = sum(w.numel() * w.element_size() for w in _weights(model))
    return tune(model) if weights >= TUNE_MIN_BYTES else STANDARD


def _probe(name: str, dtype: torch.dtype) -> None:
    """ValueError when form ``name`` cannot compute ``dtype`` products on this machine (oneDNN has
    no fp16 products on a CPU without AVX512-FP16 or AVX-NE-CONVERT): a worker told to use it
    refuses to load rather than fail its first request."""
    try:
        GEMMS[name](torch.ones(1, 8, dtype=dtype), torch.ones(4, 8, dtype=dtype), None)
    except RuntimeError as exc:
        reason = str(exc).splitlines()[0].split(". ")[0][:160]
        raise ValueError(
            f"gemm {name} cannot compute {dtype} products on this machine ({reason}); "
            "choose another form or auto"
        ) from None


def tune(
    model: DecoderModel,
    budget_bytes: int = TUNE_BUDGET_BYTES,
    rounds: int = 2,
    margin: float = 0.05,
    clock: Callable[[], float] = time.perf_counter,
) -> GemmPlan:
    """The fastest form per (shape, bucket), measured (see the module docstring); best of ``rounds``."""
    started = clock()
    choices: dict[tuple[Shape, int], str] = {}
    for shape, weights in projection_weights(model).items():
        sample = _within(weights, budget_bytes)
        for bucket in BUCKETS:
            x = torch.randn(bucket, shape[1], dtype=sample[0].dtype, device=sample[0].device)
            times = _measure(x, sample, rounds, clock)
            best = min(times, key=lambda name: times[name])
            choices[(shape, bucket)] = best if times[best] < (1 - margin) * times["linear"] else "linear"
    plan = GemmPlan(choices)
    log.info("GEMM forms measured in %.1f s: %s", clock() - started, plan.describe())
    return plan


def _within(weights: list[torch.Tensor], budget_bytes: int) -> list[torch.Tensor]:
    """The leading weights whose bytes fit in ``budget_bytes`` (at least one)."""
    taken, total = [], 0
    for weight in weights:
        total += weight.numel() * weight.element_size()
        if taken and total > budget_bytes:
            break
        taken.append(weight)
    return taken


@torch.inference_mode()
def _measure(
    x: torch.Tensor, weights: list[torch.Tensor], rounds: int, clock: Callable[[], float]
) -> dict[str, float]:
    """Seconds per pass of each form over ``weights`` (one warm-up pass each, then the best of
    ``rounds``, the forms interleaved so that drift falls on all of them). A form this build cannot
    run on these tensors (a RuntimeError), or that does not take ``x``'s rows, takes forever, so it is
    never chosen."""
    best = {name: float("inf") for name in GEMMS}
    failed = {name for name in GEMMS if not fits(name, bucket_of(x.shape[0]))}
    for round_ in range(rounds + 1):
        for name, gemm in GEMMS.items():
            if name in failed:
                continue
            start = clock()
            try:
                for weight in weights:
                    gemm(x, weight, None)
            except RuntimeError:
                failed.add(name)
                continue
            if round_:
                best[name] = min(best[name], clock() - start)
    return best


def install(model: DecoderModel, plan: GemmPlan) -> None:
    """Gives ``plan`` to every projection of ``model`` and to its output head. Mutates ``model``."""
    for module in model.modules():
        if isinstance(module, Projection):
            module.plan = plan
    model.gemm = plan
