"""The views of a plan: a text report and one JSON object (pure functions of the plan and the sweep)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from kvgate.plan.memory import MemoryPlan
from kvgate.plan.search import Sweep

GIB = 2**30


def plan_json(
    source: str,
    plans: Mapping[str, MemoryPlan],
    primary: str,
    prefix_tokens: int,
    sweep: Sweep | None,
    check: str | None = None,
) -> dict[str, Any]:
    """One object: the ``primary`` KV dtype's figures at the top level (``kv_bytes_per_token``,
    ``tokens_per_worker``, ``blocks_per_worker``, ...), every dtype's under ``kv_dtypes``, the sweep
    (if any) under ``sweep``, with ``check``: the ``kvgate simulate`` command of its recommendation."""
    out: dict[str, Any] = {"model": source, **_plan_fields(plans[primary], prefix_tokens)}
    out["kv_dtypes"] = {name: _plan_fields(plan, prefix_tokens) for name, plan in plans.items()}
    if sweep is not None:
        out["sweep"] = {
            "target": asdict(sweep.target),
            "policy": sweep.policy,
            "candidates": [asdict(c) for c in sweep.candidates],
            "recommended": asdict(sweep.recommended) if sweep.recommended else None,
            "check": check,
        }
    return out


def format_plan(source: str, plan: MemoryPlan, prefix_tokens: int) -> str:
    """The memory plan of one KV dtype, as lines of text."""
    i, bs = plan.inputs, plan.inputs.block_size
    lines = [
        f"model            {source}: {plan.parameters:,} parameters",
        f"worker           {i.tp} x {i.gpu_memory_bytes / GIB:.4g} GiB GPU at {i.memory_utilization:g},"
        f" weights {i.weight_dtype}: {plan.weight_bytes_per_gpu / GIB:.2f} GiB per GPU",
        f"KV dtype         {i.kv.name} ({i.kv.storage}, {i.kv.element_bytes} B/element"
        + (", a float32 scale per block, layer, K/V and KV head)" if i.kv.scaled else ")"),
        f"KV bytes/token   {_num(plan.kv_bytes_per_token):,} (model); block of {bs} tokens: "
        f"{plan.block_bytes_per_gpu:,} B per GPU ({plan.kv_heads_per_gpu} KV heads per GPU)",
    ]
    for tier_name, tier in (("GPU tier", plan.gpu), ("CPU tier", plan.cpu)):
        line = f"{tier_name:<17}{tier.kv_bytes / GIB:.2f} GiB: {tier.blocks:,} blocks, {tier.tokens:,} tokens"
        line += " per worker"
        if prefix_tokens:
            line += f", {tier.prefix_copies(prefix_tokens, bs):,} copies of a {prefix_tokens:,}-token prefix"
        lines.append(line)
    return "\n".join(lines)


def format_others(plans: Mapping[str, MemoryPlan], primary: str) -> str:
    """One line per other KV dtype: what the same memory holds in it."""
    base = plans[primary].gpu.tokens
    return "\n".join(
        f"same memory in {name:<5}{_num(p.kv_bytes_per_token):>10,} B/token: {p.gpu.tokens:,} GPU + "
        f"{p.cpu.tokens:,} CPU tokens per worker ({p.gpu.tokens / base:.2f}x {primary})"
        for name, p in plans.items()
        if name != primary
    )


def format_sweep(sweep: Sweep, check: str | None = None) -> str:
    """The sweep's table, one row per candidate, the recommendation and ``check``, the command that
    replays it."""
    header = (
        f"{'workers':>7}  {'KV dtype':<8}{'GPU tokens':>12}{'CPU tokens':>12}{'hit rate':>9}{'TTFT p99':>10}"
        "  meets"
    )
    lines = [f"target: {sweep.target.describe()} (policy {sweep.policy})", header]
    for c in sweep.candidates:
        lines.append(
            f"{c.workers:>7}  {c.kv_dtype:<8}{c.capacity_tokens:>12,}{c.cpu_capacity_tokens:>12,}"
            f"{c.hit_rate:>9.3f}{c.ttft_p99_s:>10.2f}  {'yes' if c.meets_target else 'no'}"
        )
    best = sweep.recommended
    lines.append(
        f"recommended: {best.workers} workers with {best.kv_dtype} KV{_cpu_tier(best.cpu_memory_bytes)} "
        f"(hit rate {best.hit_rate:.3f}, "
        f"TTFT p99 {best.ttft_p99_s:.2f} s)"
        if best
        else "recommended: none of these configurations meets the target (more workers or memory)"
    )
    if check:
        lines.append(f"check: {check}")
    return "\n".join(lines)


def _cpu_tier(cpu_memory_bytes: int) -> str:
    return f" and a {cpu_memory_bytes / GIB:g} GiB CPU tier" if cpu_memory_bytes else ""


def _plan_fields(plan: MemoryPlan, prefix_tokens: int) -> dict[str, Any]:
    bs = plan.inputs.block_size
    return {
        "kv_dtype": plan.inputs.kv.name,
        "kv_bytes_per_token": _num(plan.kv_bytes_per_token),
        "kv_scale_bytes": plan.inputs.kv.scale_bytes,
        "block_size": bs,
        "block_bytes_per_gpu": plan.block_bytes_per_gpu,
        "kv_heads_per_gpu": plan.kv_heads_per_gpu,
        "parameters": plan.parameters,
        "weight_bytes_per_gpu": plan.weight_bytes_per_gpu,
        "kv_bytes_per_gpu": plan.gpu.kv_bytes,
        "blocks_per_worker": plan.gpu.blocks,
        "tokens_per_worker": plan.gpu.tokens,
        "cpu_blocks_per_worker": plan.cpu.blocks,
        "cpu_tokens_per_worker": plan.cpu.tokens,
        "prefix_tokens": prefix_tokens,
        "prefix_copies_gpu": plan.gpu.prefix_copies(prefix_tokens, bs) if prefix_tokens else None,
        "prefix_copies_cpu": plan.cpu.prefix_copies(prefix_tokens, bs) if prefix_tokens else None,
    }


def _num(value: float) -> int | float:
    """``value`` as an int when it is whole (bytes per token usually are)."""
    return int(value) if float(value).is_integer() else value
