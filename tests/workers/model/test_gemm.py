"""Projection products (``kvgate.workers.model.gemm``): every form computes ``linear``'s product, a plan
routes each (shape, row bucket) to its form and everything else to ``linear``, and the tuner keeps
``linear`` unless another form is faster by more than its margin."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch
from torch.nn.functional import linear

from kvgate.workers.model import gemm as gemm_module
from kvgate.workers.model import gemm_tuning
from kvgate.workers.model.gemm import GEMMS, MAX_ROWS, MAX_SKINNY_ROWS, GemmPlan, Projection, bucket_of

SHAPE = (96, 48)
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2}  # relative to the output's scale


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 2, 7, 8, 31, 32, 64])
@pytest.mark.parametrize("name", sorted(GEMMS))
def test_every_form_computes_linears_product(name: str, rows: int, dtype: torch.dtype) -> None:
    torch.manual_seed(rows)
    x, weight, bias = torch.randn(rows, SHAPE[1]), torch.randn(*SHAPE), torch.randn(SHAPE[0])
    x, weight, bias = x.to(dtype), weight.to(dtype), bias.to(dtype)
    if rows > MAX_ROWS.get(name, rows):
        with pytest.raises(ValueError, match="takes one row"):
            GEMMS[name](x, weight, bias)
        return
    for b in (None, bias):
        expected = linear(x.double(), weight.double(), None if b is None else b.double())
        out = GEMMS[name](x, weight, b)
        assert out.shape == (rows, SHAPE[0])
        assert out.dtype == dtype
        assert out.is_contiguous()
        assert (out.double() - expected).abs().max() <= TOLERANCE[dtype] * expected.abs().max()


def test_row_counts_fall_into_the_measured_buckets() -> None:
    assert [bucket_of(r) for r in (1, 2, 8, 31, 32, 64)] == [1, 8, 8, 8, 32, 32]


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records which form each product takes (every form still computes)."""
    used: list[str] = []
    for name, gemm in list(GEMMS.items()):

        def recorded(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, n: str = name,
                     g: Callable[..., torch.Tensor] = gemm) -> torch.Tensor:  # fmt: skip
            used.append(n)
            return g(x, w, b)

        monkeypatch.setitem(GEMMS, name, recorded)
    return used


def test_a_plan_routes_decode_rows_by_bucket_and_prefill_to_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    used = _spy(monkeypatch)
    plan = GemmPlan({(SHAPE, 8): "transposed", (SHAPE, 32): "linear"})
    weight = torch.randn(*SHAPE)
    for rows in (1, 2, 31, 32, MAX_SKINNY_ROWS):
        plan.project(torch.randn(rows, SHAPE[1]), weight)
    assert used == ["linear", "transposed", "transposed", "linear", "linear"]
    used.clear()
    plan.project(torch.randn(MAX_SKINNY_ROWS + 1, SHAPE[1]), weight)  # prefill-sized: never planned
    assert used == []
    plan.project(torch.randn(8, 10), torch.randn(5, 10))  # a shape the plan does not list
    assert used == ["linear"]


def test_a_projection_follows_the_installed_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    used = _spy(monkeypatch)
    layer = Projection(SHAPE[1], SHAPE[0], bias=True)
    x = torch.randn(4, SHAPE[1])
    expected = linear(x, layer.weight, layer.bias)
    layer.plan = GemmPlan.uniform("transposed", [SHAPE])
    torch.testing.assert_close(layer(x), expected)
    assert used == ["transposed"]


def test_a_plan_refuses_forms_this_build_lacks() -> None:
    with pytest.raises(ValueError, match="unknown GEMM"):
        GemmPlan({(SHAPE, 8): "cublas"})


def test_the_one_row_form_is_planned_for_one_row_only(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="more rows than they take: mv@8"):
        GemmPlan({(SHAPE, 1): "mv", (SHAPE, 8): "mv"})
    assert GemmPlan.uniform("mv", [SHAPE]).choices == {(SHAPE, 1): "mv"}
    used = _spy(monkeypatch)
    GemmPlan.uniform("mv", [SHAPE]).project(torch.randn(1, SHAPE[1]), torch.randn(*SHAPE))
    assert used == ["mv"]
    fastest = {name: 0.1 if name == "mv" else 1.0 for name in GEMMS}  # the tuner never picks it for 8 rows
    monkeypatch.setattr(
        gemm_tuning, "_measure", lambda x, *_: fastest if x.shape[0] == 1 else {"linear": 1.0}
    )
    plan = gemm_tuning.tune(_Model(), margin=0.05)
    assert {(shape, b) for (shape, b), name in plan.choices.items() if name == "mv"} == {
        ((96, 48), 1),
        ((200, 48), 1),
    }


def test_the_tuner_never_measures_a_form_on_more_rows_than_it_takes() -> None:
    times = gemm_tuning._measure(torch.randn(8, 48), [torch.randn(96, 48)], 1, gemm_tuning.time.perf_counter)
    assert times["mv"] == float("inf")
    assert gemm_tuning._measure(torch.randn(1, 48), [torch.randn(96, 48)], 1, gemm_tuning.time.perf_counter)[
        "mv"
    ] < float("inf")


class _Model(torch.nn.Module):
    """What the tuner reads of a model: projections and an output weight."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(Projection(48, 96, bias=False) for _ in range(3))
        self.output_weight = torch.randn(200, 48)
        self.gemm = gemm_module.STANDARD


def _timings(seconds: dict[str, float]) -> Callable[..., dict[str, float]]:
    def measure(x: torch.Tensor, weights: list[torch.Tensor], rounds: int, clock: object) -> dict[str, float]:
        return {name: seconds.get(name, 1.0) for name in GEMMS}

    return measure


def test_the_tuner_takes_a_form_only_when_it_beats_linear_by_the_margin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _Model()
    monkeypatch.setattr(gemm_tuning, "_measure", _timings({"linear": 1.0, "transposed": 0.96}))
    assert set(gemm_tuning.tune(model, margin=0.05).choices.values()) == {"linear"}  # 4% faster: noise
    monkeypatch.setattr(gemm_tuning, "_measure", _timings({"linear": 1.0, "transposed": 0.7}))
    plan = gemm_tuning.tune(model, margin=0.05)
    assert set(plan.choices) == {((96, 48), b) for b in (1, 8, 32)} | {((200, 48), b) for b in (1, 8, 32)}
    assert set(plan.choices.values()) == {"transposed"}
    gemm_tuning.install(model, plan)
    assert all(layer.plan is plan for layer in model.layers)
    assert model.gemm is plan


def test_the_tuner_streams_at_most_its_budget_of_each_shape() -> None:
    weights = [torch.zeros(256, 256) for _ in range(10)]  # 256 KiB each
    assert len(gemm_tuning._within(weights, 3 * 256 * 1024)) == 3
    assert len(gemm_tuning._within(weights, 1)) == 1  # at least one


def test_auto_keeps_linear_for_a_model_that_fits_in_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemm_tuning, "_measure", _timings({"linear": 1.0, "transposed": 0.1}))
    assert gemm_tuning.plan_for(_Model(), "auto") is gemm_module.STANDARD  # ~0.1 MB of weights
    monkeypatch.setattr(gemm_tuning, "TUNE_MIN_BYTES", 0)
    assert set(gemm_tuning.plan_for(_Model(), "auto").choices.values()) == {"transposed"}
    named = gemm_tuning.plan_for(_Model(), "transposed")  # a named form: everywhere, nothing measured
    assert len(named.choices) == 6
    assert set(named.choices.values()) == {"transposed"}
    with pytest.raises(ValueError, match="gemm must be one of"):
        gemm_tuning.plan_for(_Model(), "fastest")


def test_the_cli_offers_every_form_this_build_has() -> None:
    from kvgate.cluster.settings import WORKER_GEMMS
    from kvgate.workers.model.gemm import GEMM_CHOICES

    assert set(GEMM_CHOICES) <= set(WORKER_GEMMS)


def test_a_form_that_cannot_run_here_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    def unsupported(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        raise RuntimeError("no kernel for this dtype")

    monkeypatch.setitem(GEMMS, "transposed", unsupported)
    times = gemm_tuning._measure(torch.randn(8, 48), [torch.randn(96, 48)], 2, gemm_tuning.time.perf_counter)
    assert times["transposed"] == float("inf")
    assert times["linear"] < float("inf")


def test_a_named_form_that_cannot_compute_the_models_dtype_is_refused_at_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unsupported(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        raise RuntimeError("could not create a primitive descriptor\nmore detail")

    monkeypatch.setitem(gemm_module.GEMMS, "transposed", unsupported)  # as oneDNN fp16 without AVX512-FP16
    expected = (
        "gemm transposed cannot compute torch.float32 products on this machine "
        "(could not create a primitive descriptor); choose another form or auto"
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        gemm_tuning.plan_for(_Model(), "transposed")
