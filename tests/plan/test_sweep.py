"""``kvgate plan --trace``: the sweep over worker counts and KV dtypes, checked against ``kvgate simulate``.

The narrated case: six system prompts of three 512-token blocks, each request one of them plus a block
of its own, in turn. The default model (SmolLM2-135M, 23,040 B/token in bf16) on a 334 MiB GPU at 0.9
leaves 46 MB for KV: 125 blocks = 2,000 tokens in bf16, 249 blocks = 3,984 tokens in int8 (11,565
B/token with the scales). One worker holds no whole prompt of another turn, so the fleet must grow
until the prompts spread over enough workers; int8 gets there with fewer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvgate.cli.main import main
from kvgate.sim.trace import load_trace
from tests.sim.helpers import req, write_bailian_trace, write_trace

MEMORY = ["default", "--gpu-memory", "334MiB"]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    prompts = [[100 * p + 1, 100 * p + 2, 100 * p + 3] for p in range(6)]
    requests = [req(i * 0.5, [*prompts[i % 6], 10_000 + i]) for i in range(48)]
    return write_trace(tmp_path / "prompts.jsonl", requests)


def run_json(capsys: pytest.CaptureFixture, *args: str) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_recommendation_is_what_kvgate_simulate_measures(
    trace: Path, capsys: pytest.CaptureFixture
) -> None:
    plan = run_json(capsys, "plan", *MEMORY, "--trace", str(trace), "--target-hit-rate", "0.5",
                    "--workers", "2,4", "--kv-dtypes", "int8", "--quiet")  # fmt: skip
    assert (plan["tokens_per_worker"], plan["kv_dtypes"]["int8"]["tokens_per_worker"]) == (2_000, 3_984)
    best = plan["sweep"]["recommended"]
    assert (best["workers"], best["kv_dtype"]) == (4, "int8")
    # Fewer workers, or bf16 at 4 workers, miss the target: 4 x int8 is the smallest that meets it.
    misses = [(c["workers"], c["kv_dtype"]) for c in plan["sweep"]["candidates"] if not c["meets_target"]]
    assert misses == [(2, "bf16"), (2, "int8"), (4, "bf16")]
    direct = run_json(capsys, "simulate", str(trace), "--policy", "kvgate", "--workers", "4",
                      "--capacity-tokens", "3984", "--cpu-capacity-tokens", "0", "--quiet")  # fmt: skip
    assert best["hit_rate"] == direct["policies"]["kvgate"]["hit_rate"] >= 0.5
    assert best["ttft_p99_s"] == direct["policies"]["kvgate"]["ttft_p99_s"]


def test_table_progress_and_plot(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    png = tmp_path / "plan.png"
    sweep = ["--trace", str(trace), "--target-p99", "10", "--workers", "1", "--plot", str(png)]
    assert main(["plan", *MEMORY, *sweep]) == 0
    out, err = capsys.readouterr()
    assert "recommended: 1 workers with bf16 KV" in out  # every candidate meets a lax TTFT target
    assert "same memory in int8" in out
    assert "same memory in fp8" in out
    assert err.count("plan: ") == 3  # one progress line per simulated candidate
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unreachable_target_recommends_nothing(trace: Path, capsys: pytest.CaptureFixture) -> None:
    plan = run_json(capsys, "plan", *MEMORY, "--trace", str(trace), "--target-hit-rate", "0.99",
                    "--workers", "1", "--kv-dtypes", "fp8", "--quiet")  # fmt: skip
    assert plan["sweep"]["recommended"] is None


def test_a_sweep_needs_a_target(trace: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["plan", *MEMORY, "--trace", str(trace)]) == 2
    assert "--target-hit-rate or --target-p99" in capsys.readouterr().err


def test_sweep_flags_need_a_trace(capsys: pytest.CaptureFixture) -> None:
    assert main(["plan", *MEMORY, "--target-hit-rate", "0.5", "--plot", "x.png"]) == 2
    assert "--target-hit-rate, --plot need --trace" in capsys.readouterr().err


def test_a_cpu_tier_can_stand_in_for_workers(trace: Path, capsys: pytest.CaptureFixture) -> None:
    # 256 MiB of host memory hold 728 bf16 blocks = 11,648 tokens: all six prompts, on one worker.
    sweep = ["--trace", str(trace), "--target-hit-rate", "0.5", "--workers", "1,2", "--kv-dtypes", "bf16"]
    plan = run_json(capsys, "plan", *MEMORY, *sweep, "--cpu-memories", "0,256MiB", "--quiet")
    candidates = plan["sweep"]["candidates"]
    rows = [(c["workers"], c["cpu_memory_bytes"], c["cpu_capacity_tokens"]) for c in candidates]
    assert rows == [(1, 0, 0), (1, 256 * 2**20, 11_648), (2, 0, 0), (2, 256 * 2**20, 11_648)]
    best = plan["sweep"]["recommended"]
    assert (best["workers"], best["cpu_capacity_tokens"]) == (1, 11_648)
    direct = run_json(capsys, "simulate", str(trace), "--policy", "kvgate", "--workers", "1",
                      "--capacity-tokens", "2000", "--cpu-capacity-tokens", "11648", "--quiet")  # fmt: skip
    assert best["hit_rate"] == direct["policies"]["kvgate"]["hit_rate"] >= 0.5
    assert "--cpu-capacity-tokens 11648" in plan["sweep"]["check"]


def test_a_bailian_trace_sweeps_as_its_mooncake_twin_and_the_check_reads_it_alike(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    twin = write_bailian_trace(tmp_path / "prompts_bailian.jsonl", load_trace(trace))
    sweep = ["--target-hit-rate", "0.5", "--workers", "2,4", "--kv-dtypes", "int8", "--quiet"]
    plans = [run_json(capsys, "plan", *MEMORY, "--trace", str(path), *sweep) for path in (trace, twin)]
    assert plans[1]["sweep"]["recommended"] == plans[0]["sweep"]["recommended"]
    assert "--trace-format mooncake --trace-block-tokens 512" in plans[0]["sweep"]["check"]
    assert "--trace-format bailian --trace-block-tokens 16" in plans[1]["sweep"]["check"]
