"""``kvgate simulate`` as users run it: the installed console script on a tiny trace file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kvgate.cli.main import main
from kvgate.gateway.routing import policy_names
from kvgate.gateway.routing.overrides import routing_config
from tests.sim.helpers import req, write_trace

DOCUMENTED_POLICY_KEYS = {"hit_rate": float, "imbalance": float, "ttft_p50_s": float, "ttft_p99_s": float}


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    requests = [req(i * 0.5, [1, 2, 10 + i % 3, 20 + i]) for i in range(24)]
    return write_trace(tmp_path / "tiny.jsonl", requests)


def test_json_is_one_object_with_the_documented_schema(trace: Path) -> None:
    out = subprocess.run(
        ["kvgate", "simulate", str(trace), "--workers", "3", "--policy", "all", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 1
    report = json.loads(out.stdout)
    assert report["requests"] == 24
    assert isinstance(report["unlimited_hit_rate"], float)
    assert isinstance(report["pooled_hit_rate"], float)
    assert list(report["policies"]) == list(policy_names())
    for result in report["policies"].values():
        for key, kind in DOCUMENTED_POLICY_KEYS.items():
            assert isinstance(result[key], kind)
        assert 0 <= result["hit_rate"] <= report["unlimited_hit_rate"] + 1e-12
        assert result["imbalance"] >= 1.0
    # Blocks 1, 2 are shared by all and block 10+i%3 by every third: 3 of 4 blocks from the 4th on.
    assert report["unlimited_hit_rate"] == pytest.approx((2 * 2 + 21 * 3) / (24 * 4))


def test_the_table_lists_the_references_and_each_policy(trace: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["simulate", str(trace), "--policy", "kvgate", "--policy", "round_robin", "--limit", "10"]
    assert main([*args, "--routing-config", "compute_weight=2", "--quiet"]) == 0
    table = capsys.readouterr().out
    assert "10 requests" in table
    for label in ("unlimited cache", "pooled LRU", "kvgate", "round_robin"):
        assert label in table
    assert "least_loaded" not in table
    # round robin spreads prompts that share blocks 1 and 2: what that lost, under its reason
    losses = table.split("lost against the unlimited cache, by reason (share of prompt tokens):\n")[1]
    assert losses.splitlines()[-1].startswith("round_robin         load_balanced 0.")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "unknown routing policy 'nope'"),
        (["--routing-config", "nope=1"], "KEY=VALUE"),
        (["--routing-config", "compute_weight=x"], "not a number"),
        (["--trace-block-tokens", "256"], "is it a Mooncake trace of 256-token blocks?"),
        (["--workers", "0"], "workers must be >= 1"),
        (["--spread-arrivals", "-5"], "arrival spread must be a finite number of ms >= 0"),
    ],
)
def test_bad_options_are_clear_errors(
    trace: Path, args: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert main(["simulate", str(trace), *args]) == 2
    assert message in capsys.readouterr().err


def test_routing_overrides_are_typed_like_the_fields() -> None:
    config = routing_config(["compute_weight=0.5", "balance-abs-threshold=8"])
    assert config.compute_weight == 0.5
    assert config.balance_abs_threshold == 8
    assert isinstance(config.balance_abs_threshold, int)


def test_plots_are_written_when_matplotlib_is_there(trace: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    folder = tmp_path / "plots"
    assert main(["simulate", str(trace), "--policy", "kvgate", "--plot", str(folder), "--quiet"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["sim_hit_rate.png", "sim_prefill_per_worker.png"]


def test_the_simulator_never_imports_torch() -> None:
    import sys

    code = "import sys, kvgate.sim, kvgate.cli.simulate_cmd; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_missing_trace_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["simulate", str(tmp_path / "absent.jsonl")]) == 2
    assert "cannot read the trace" in capsys.readouterr().err


def test_spread_arrivals_replays_a_recorded_burst_over_the_window(tmp_path: Path) -> None:
    """Four 2k-token prompts recorded at one instant queue behind each other on one worker; spread
    over 8 s, each is computed before the next arrives."""
    burst = write_trace(tmp_path / "burst.jsonl", [req(0, [10 * i + 1, 10 * i + 2, 10 * i + 3, 10 * i + 4])
                                                   for i in range(4)])  # fmt: skip

    def ttft_p99(*extra: str) -> float:
        args = ["simulate", str(burst), "--workers", "1", "--policy", "kvgate", "--json", "--quiet", *extra]
        out = subprocess.run(["kvgate", *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["policies"]["kvgate"]["ttft_p99_s"]

    at_once, spread = ttft_p99(), ttft_p99("--spread-arrivals", "8000")
    prefill_s = 2048 / 10_000
    assert at_once > 3 * prefill_s  # the last waits for the three before it
    assert spread < 1.5 * prefill_s


def test_the_table_counts_warm_ups_when_the_router_made_some(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    requests = [req(i * 0.5, [*range(1, 9), 100 + i]) for i in range(12)]  # a 4k-token opening in demand
    trace = write_trace(tmp_path / "hot.jsonl", requests)
    args = ["simulate", str(trace), "--policy", "kvgate", "--workers", "2", "--quiet"]
    assert main(args) == 0
    assert "warm-ups" not in capsys.readouterr().out
    assert main([*args, "--routing-config", "warm_demand=1"]) == 0
    assert (
        "warm-ups (tokens prefilled ahead of demand, in no hit rate): kvgate 4,096" in capsys.readouterr().out
    )
