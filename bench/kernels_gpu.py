"""GPU benchmark of the paged-attention kernels: Triton against the torch reference, on one CUDA device.

First measures the device's copy-bandwidth ceiling (a device-to-device copy through torch, bytes read plus
written over time), then times every case with ``triton.testing.do_bench`` (median, L2 flushed between
runs) for both backends, checks the Triton result against the reference, and reports achieved GB/s as a
fraction of the measured ceiling and of the H200 datasheet's 4.8 TB/s, TFLOP/s where the work is
arithmetic, and the speedup over the reference. A failing case is reported and the run goes on.

    python bench/kernels_gpu.py --out kernels.json [--quick]

Needs torch, triton and the kvgate package only. Shapes: Llama-3-8B-like heads (32 query, 8 kv, head_dim
128), bf16, KV blocks of 16 tokens. Finishes in a few minutes on an H200 (``--budget-s`` skips the cases
left once the budget is spent).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton
from triton.testing import do_bench

from kvgate.kernels import ReferenceKernels, get_kernels
from kvgate.kernels.testing import random_paged_batch

DATASHEET_GBS = 4800.0  # H200 HBM3e, vendor datasheet
DATASHEET_BF16_TFLOPS = 989.0  # H200 SXM dense bf16, vendor datasheet
HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 8, 128, 16
DTYPE = torch.bfloat16
SCALE = HEAD_DIM**-0.5
REF = ReferenceKernels()
TRITON = get_kernels("triton")


@dataclass(frozen=True, slots=True)
class Workload:
    """One prepared case: both backends as zero-argument calls, what they move, and how to check them."""

    triton: Callable[[], object]
    reference: Callable[[], object]
    check: Callable[[], float]  # max abs difference, Triton vs reference
    bytes_moved: int
    flops: float = 0.0
    on_device: bool = True  # False: the bytes cross PCIe, so HBM ceilings do not apply


@dataclass(frozen=True, slots=True)
class Case:
    group: str
    name: str
    build: Callable[[], Workload]


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item() if a.numel() else 0.0


def _elem_bytes(n: int) -> int:
    return n * torch.finfo(DTYPE).bits // 8


def decode_case(batch: int, context: int) -> Workload:
    """Decode: ``batch`` sequences of ``context`` tokens, one query token each."""
    b = random_paged_batch(
        [context] * batch,
        [1] * batch,
        num_heads=HEADS,
        num_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        block_size=BLOCK,
        dtype=DTYPE,
        device="cuda",
    )
    args = (b.q, b.k_cache, b.v_cache, b.block_tables, b.context_lens, SCALE)
    kv_bytes = _elem_bytes(2 * batch * context * KV_HEADS * HEAD_DIM)
    io_bytes = _elem_bytes(2 * b.q.numel()) + b.block_tables.numel() * 4
    return Workload(
        triton=lambda: TRITON.decode_attention(*args),
        reference=lambda: REF.decode_attention(*args),
        check=lambda: _max_diff(TRITON.decode_attention(*args), REF.decode_attention(*args)),
        bytes_moved=kv_bytes + io_bytes,
        flops=4.0 * batch * context * HEADS * HEAD_DIM,
    )


def prefill_case(contexts: list[int], queries: list[int]) -> Workload:
    """Causal prefill of ``queries[i]`` new tokens after ``contexts[i] - queries[i]`` cached ones."""
    b = random_paged_batch(
        contexts,
        queries,
        num_heads=HEADS,
        num_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        block_size=BLOCK,
        dtype=DTYPE,
        device="cuda",
    )
    args = (b.q, b.k_cache, b.v_cache, b.block_tables, b.cu_seqlens_q, b.context_lens, SCALE)
    pairs = sum(q * (c - q) + q * (q + 1) // 2 for c, q in zip(contexts, queries, strict=True))
    return Workload(
        triton=lambda: TRITON.prefill_attention(*args),
        reference=lambda: REF.prefill_attention(*args),
        check=lambda: _max_diff(TRITON.prefill_attention(*args), REF.prefill_attention(*args)),
        bytes_moved=_elem_bytes(2 * sum(contexts) * KV_HEADS * HEAD_DIM + 2 * b.q.numel()),
        flops=4.0 * pairs * HEADS * HEAD_DIM,
    )


def write_kv_case(tokens: int) -> Workload:
    """Write ``tokens`` tokens' K and V at random distinct slots of a pool twice that size."""
    pool = [
        torch.zeros(2 * tokens // BLOCK + 1, BLOCK, KV_HEADS, HEAD_DIM, dtype=DTYPE, device="cuda")
        for _ in range(4)
    ]
    k, v = (torch.randn(tokens, KV_HEADS, HEAD_DIM, device="cuda", dtype=DTYPE) for _ in "kv")
    slots = torch.randperm(pool[0].shape[0] * BLOCK, device="cuda")[:tokens]

    def check() -> float:
        TRITON.write_kv(k, v, pool[0], pool[1], slots)
        REF.write_kv(k, v, pool[2], pool[3], slots)
        return max(_max_diff(pool[0], pool[2]), _max_diff(pool[1], pool[3]))

    return Workload(
        triton=lambda: TRITON.write_kv(k, v, pool[0], pool[1], slots),
        reference=lambda: REF.write_kv(k, v, pool[2], pool[3], slots),
        check=check,
        bytes_moved=_elem_bytes(4 * k.numel()) + slots.numel() * 8,  # read k, v; write them
    )


def copy_case(blocks: int, src_device: str, dst_device: str) -> Workload:
    """Copy ``blocks`` random blocks between pools (a CPU pool is pinned, as the engine's CPU tier is)."""
    shape = (2 * blocks, BLOCK, KV_HEADS, HEAD_DIM)
    src = [torch.randn(shape, dtype=DTYPE, device=src_device) for _ in "kv"]
    dst = [
        torch.zeros(shape, dtype=DTYPE, device=dst_device, pin_memory=dst_device == "cpu") for _ in range(4)
    ]
    if src_device == "cpu":
        src = [s.pin_memory() for s in src]
    src_ids = torch.randperm(2 * blocks)[:blocks]
    dst_ids = torch.randperm(2 * blocks)[:blocks]

    def check() -> float:
        TRITON.copy_blocks(*src, dst[0], dst[1], src_ids, dst_ids)
        REF.copy_blocks(*src, dst[2], dst[3], src_ids, dst_ids)
        return max(_max_diff(dst[0].cuda(), dst[2].cuda()), _max_diff(dst[1].cuda(), dst[3].cuda()))

    payload = _elem_bytes(2 * blocks * BLOCK * KV_HEADS * HEAD_DIM)
    on_device = src_device == dst_device
    return Workload(
        triton=lambda: TRITON.copy_blocks(*src, dst[0], dst[1], src_ids, dst_ids),
        reference=lambda: REF.copy_blocks(*src, dst[2], dst[3], src_ids, dst_ids),
        check=check,
        bytes_moved=2 * payload if on_device else payload,  # on device: read + write
        on_device=on_device,
    )


def cases(quick: bool) -> list[Case]:
    """The benchmark grid; ``quick`` keeps one or two cases per group."""
    decode = [(64, 1024), (256, 1024), (64, 4096), (256, 4096), (16, 16384), (64, 16384)]
    prefill = [
        ("fresh 2x4k", [4096] * 2, [4096] * 2),
        ("prefix hit 8x(3k cached+1k new)", [4096] * 8, [1024] * 8),
        ("chunked 16x(2k cached+512 new)", [2560] * 16, [512] * 16),
    ]
    if quick:
        decode, prefill = [(64, 4096), (16, 16384)], prefill[1:2]
    out = [Case("decode", f"decode b={b} ctx={c}", lambda b=b, c=c: decode_case(b, c)) for b, c in decode]
    out += [Case("prefill", name, lambda c=c, q=q: prefill_case(c, q)) for name, c, q in prefill]
    out += [
        Case("write_kv", f"write_kv {t} tokens", lambda t=t: write_kv_case(t))
        for t in ([256, 16384] if not quick else [16384])
    ]
    out += [
        Case("copy_blocks", f"copy_blocks {n} blocks {s}->{d}", lambda n=n, s=s, d=d: copy_case(n, s, d))
        for n, s, d in [(4096, "cuda", "cuda"), (1024, "cuda", "cpu"), (1024, "cpu", "cuda")]
    ]
    return out


def copy_ceiling_gbs(gib: float) -> float:
    """Device-to-device copy bandwidth through torch: (bytes read + bytes written) / time, in GB/s."""
    n = int(gib * (1 << 30))
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * n / (ms * 1e-3) / 1e9


def run_case(case: Case, ceiling: float, rep_ms: int) -> dict:
    """Time and check one case; returns its row (with ``error`` set when it failed)."""
    row: dict = {"group": case.group, "name": case.name}
    try:
        work = case.build()
        row["max_abs_err"] = work.check()
        triton_ms = do_bench(work.triton, warmup=10, rep=rep_ms, return_mode="median")
        reference_ms = do_bench(work.reference, warmup=5, rep=rep_ms, return_mode="median")
        row.update(_metrics(work, triton_ms, reference_ms, ceiling))
    except Exception as exc:  # a broken case is reported, the run goes on
        row["error"] = f"{type(exc).__name__}: {exc}"[:500]
    torch.cuda.empty_cache()
    return row


def _metrics(work: Workload, triton_ms: float, reference_ms: float, ceiling: float) -> dict:
    gbs = work.bytes_moved / (triton_ms * 1e-3) / 1e9
    return {
        "triton_ms": triton_ms,
        "reference_ms": reference_ms,
        "speedup": reference_ms / triton_ms,
        "bytes_moved": work.bytes_moved,
        "gbs": gbs,
        "frac_of_copy_ceiling": gbs / ceiling if work.on_device else None,
        "frac_of_datasheet": gbs / DATASHEET_GBS if work.on_device else None,
        "tflops": work.flops / (triton_ms * 1e-3) / 1e12 if work.flops else None,
    }


def print_table(rows: list[dict], ceiling: float) -> None:
    print(
        f"\ncopy ceiling (measured, D2D read+write): {ceiling:.0f} GB/s; datasheet {DATASHEET_GBS:.0f} GB/s"
    )
    head = f"{'case':<42}{'triton ms':>10}{'ref ms':>10}{'speedup':>9}{'GB/s':>8}{'%ceil':>7}{'%4.8T':>7}"
    print(head + f"{'TFLOP/s':>9}{'max err':>10}")
    for row in rows:
        if "error" in row:
            print(f"{row['name']:<42}  ERROR {row['error']}")
            continue
        print(
            f"{row['name']:<42}{row['triton_ms']:>10.3f}{row['reference_ms']:>10.3f}{row['speedup']:>8.1f}x"
            f"{row['gbs']:>8.0f}{_pct(row['frac_of_copy_ceiling']):>7}{_pct(row['frac_of_datasheet']):>7}"
            f"{_num(row['tflops']):>9}{row['max_abs_err']:>10.2e}"
        )


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the results as JSON to this path")
    parser.add_argument("--quick", action="store_true", help="a few cases, shorter timing")
    parser.add_argument("--budget-s", type=float, default=200.0, help="skip the cases left after this long")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("kernels_gpu: needs a CUDA device", file=sys.stderr)
        return 2
    started = time.monotonic()
    ceiling = copy_ceiling_gbs(1.0 if args.quick else 4.0)
    torch.cuda.empty_cache()
    rows = []
    for case in cases(args.quick):
        if time.monotonic() - started > args.budget_s:
            rows.append({"group": case.group, "name": case.name, "error": "skipped: time budget spent"})
            continue
        rows.append(run_case(case, ceiling, rep_ms=50 if args.quick else 100))
        print(f"[{time.monotonic() - started:6.1f}s] {case.name}", flush=True)
    print_table(rows, ceiling)
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "dtype": str(DTYPE),
        "heads": HEADS,
        "kv_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "block_size": BLOCK,
        "copy_ceiling_gbs": ceiling,
        "datasheet_gbs": DATASHEET_GBS,
        "datasheet_bf16_tflops": DATASHEET_BF16_TFLOPS,
        "elapsed_s": time.monotonic() - started,
        "cases": rows,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 1 if any("error" in r and not r["error"].startswith("skipped") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
