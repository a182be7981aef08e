"""Products with fused epilogues (``kvgate.workers.model.epilogue``): each fused form computes its
unfused product-then-step to within the roundings it skips; a prefill-sized bf16 / fp16 MLP on the CPU
runs as three fused products (the residual in the last), anything else as before; the decoder's result
is the same either way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.nn.functional import gelu, linear, silu

from kvgate.workers.model import epilogue, layers
from kvgate.workers.model.epilogue import FUSED_DTYPES, fused_act, fused_add, fused_mul, fuses, project_add
from kvgate.workers.model.gemm import MAX_SKINNY_ROWS, Projection
from kvgate.workers.model.layers import GatedMLP
from kvgate.workers.model.lora import LayerLora

needs_fusion = pytest.mark.skipif(torch.bfloat16 not in FUSED_DTYPES, reason="no native bf16 oneDNN")


def _runnable(dtype: torch.dtype) -> Any:
    """``dtype`` as a parameter, skipped where oneDNN does not run its products on this CPU (fp32
    everywhere; bf16 / fp16 only where :data:`FUSED_DTYPES` has them, e.g. no fp16 without
    AVX512-FP16 or AVX-NE-CONVERT): the engine never calls the fused forms there."""
    if dtype == torch.float32 or dtype in FUSED_DTYPES:
        return dtype
    return pytest.param(dtype, marks=pytest.mark.skip(reason=f"oneDNN does not run {dtype} here"))


DTYPES = [_runnable(dtype) for dtype in (torch.float32, torch.bfloat16, torch.float16)]
ROWS = MAX_SKINNY_ROWS + 36
EXACT_ACT = {"silu": silu, "gelu_tanh": lambda t: gelu(t, approximate="tanh")}


def _ulps(out: torch.Tensor, exact: torch.Tensor) -> float:
    """max |out - exact| in units of out's dtype's epsilon at the largest exact value."""
    return float((out.double() - exact).abs().max() / (torch.finfo(out.dtype).eps * exact.abs().max()))


def _operands(dtype: torch.dtype, bias: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    torch.manual_seed(7)
    x, weight = torch.randn(ROWS, 48).to(dtype), (torch.randn(80, 48) / 7).to(dtype)
    return x, weight, (torch.randn(80).to(dtype) if bias else None)


def _exact(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return linear(x.double(), weight.double(), None if bias is None else bias.double())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
def test_a_fused_activation_is_the_activation_of_the_product(
    act: str, bias: bool, dtype: torch.dtype
) -> None:
    x, weight, b = _operands(dtype, bias)
    out = fused_act(x, weight, b, act)  # type: ignore[arg-type]
    assert out.shape == (ROWS, 80)
    assert out.dtype == dtype
    assert _ulps(out, EXACT_ACT[act](_exact(x, weight, b))) <= 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [False, True])
def test_a_fused_product_is_multiplied_or_added_by_the_other_operand(bias: bool, dtype: torch.dtype) -> None:
    x, weight, b = _operands(dtype, bias)
    other = torch.randn(ROWS, 80).to(dtype)
    exact = _exact(x, weight, b)
    assert _ulps(fused_mul(x, weight, b, other), exact * other.double()) <= 2
    assert _ulps(fused_add(x, weight, b, other), exact + other.double()) <= 2


@needs_fusion
def test_only_prefill_sized_reduced_precision_cpu_products_fuse() -> None:
    weight = torch.zeros(8, 4, dtype=torch.bfloat16)
    prefill = torch.zeros(MAX_SKINNY_ROWS + 1, 4, dtype=torch.bfloat16)
    assert fuses(prefill, weight)
    assert not fuses(prefill[:MAX_SKINNY_ROWS], weight)  # decode: GemmPlan's forms
    assert not fuses(prefill.float(), weight.float())  # fp32: torch's own product
    assert not fuses(prefill, weight.float())  # mixed dtypes
    assert not fuses(prefill[None], weight)  # not a 2-D input


def test_project_add_takes_the_projections_plan_when_it_does_not_fuse() -> None:
    projection = Projection(48, 80, bias=True)
    x, other = torch.randn(3, 48), torch.randn(3, 80)
    with torch.inference_mode():
        assert torch.equal(project_add(projection, x, other), projection(x) + other)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the fused forms the MLP calls (each still computes)."""
    called: list[str] = []
    for name in ("fused_act", "fused_mul", "project_add"):
        form: Callable[..., Any] = getattr(epilogue, name)

        def recorded(*args: Any, n: str = name, f: Callable[..., Any] = form) -> Any:
            called.append(n)
            return f(*args)

        monkeypatch.setattr(layers, name, recorded)
    return called


def _mlp(dtype: torch.dtype, act: str = "silu") -> GatedMLP:
    torch.manual_seed(3)
    mlp = GatedMLP(48, 64, bias=True, act=act, dtype=dtype)  # type: ignore[arg-type]
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randn_like(p, dtype=torch.float32) / 7)
    return mlp


@needs_fusion
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
def test_a_prefill_sized_bf16_mlp_runs_as_fused_products_with_the_same_result(
    act: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mlp = _mlp(torch.bfloat16, act)
    x, residual = torch.randn(ROWS, 48).bfloat16(), torch.randn(ROWS, 48).bfloat16()
    with torch.inference_mode():
        monkeypatch.setattr(epilogue, "FUSED_DTYPES", frozenset())
        unfused = mlp(x), mlp(x, residual=residual)
        monkeypatch.undo()
        called = _spy(monkeypatch)
        fused = mlp(x), mlp(x, residual=residual)
    assert called == ["fused_act", "fused_mul", "fused_act", "fused_mul", "project_add"]
    for f, u in zip(fused, unfused, strict=True):
        assert (f.float() - u.float()).abs().max() <= 0.02 * u.float().abs().max()
    assert not torch.allclose(fused[1], fused[0])  # the residual was added


@pytest.mark.parametrize(
    ("dtype", "rows", "lora"),
    [(torch.float32, ROWS, False), (torch.bfloat16, MAX_SKINNY_ROWS, False), (torch.bfloat16, ROWS, True)],
)
def test_fp32_decode_sized_and_adapter_steps_keep_the_unfused_mlp(
    dtype: torch.dtype, rows: int, lora: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    mlp = _mlp(dtype)
    x, residual = torch.randn(rows, 48).to(dtype), torch.randn(rows, 48).to(dtype)
    adapters = LayerLora(0, ()) if lora else None  # no groups: adds nothing
    called = _spy(monkeypatch)
    with torch.inference_mode():
        out = mlp(x, adapters, residual)
        gate, up = linear(x, mlp.gate_up.weight, mlp.gate_up.bias).split(64, dim=-1)
        expected = linear(silu(gate) * up, mlp.down.weight, mlp.down.bias) + residual
    assert called == []
    assert (out.float() - expected.float()).abs().max() <= 0.02 * expected.float().abs().max()
