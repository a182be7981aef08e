"""``bench/sim_targets.py`` counts a run as meeting a target exactly when kvgate's figure reaches it:
ties count as met, the peers' and every other policy's figures are the bounds, and clusters of more
than eight workers are held to the peers' figures only."""

from __future__ import annotations

import json
from pathlib import Path

from bench.sim_policies import PEERS
from bench.sim_targets import TARGETS, misses, render, tally
from tests.bench.scripts import run_script

OTHERS = ("least_loaded", "round_robin")


def _row(kvgate: dict, workers: int = 8, seed: int = 0, pooled: float = 0.5, **others: dict) -> dict:
    """A grid row where every peer and other policy reads 0.4 hit / 9 s p99 unless given."""
    base = {"hit_rate": 0.4, "imbalance": 1.0, "ttft_p50_s": 1.0, "ttft_p99_s": 9.0}
    policies = {"kvgate": base | kvgate}
    policies |= {name: base | others.get(name, {}) for name in (*PEERS, *OTHERS)}
    return {"trace": "t", "workers": workers, "speed": 1.0, "capacity": 1000, "seed": seed,
            "pooled": pooled, "policies": policies}  # fmt: skip


GOOD = {"hit_rate": 0.5, "imbalance": 1.05, "ttft_p99_s": 5.0}


def test_a_run_at_or_past_every_bound_misses_nothing() -> None:
    applicable, missed = misses(_row(GOOD))
    assert applicable
    assert set(applicable) == set(TARGETS)
    assert missed == []
    tied = _row({"hit_rate": 0.5, "imbalance": 1.10, "ttft_p99_s": 5.0}, pooled=0.5051,
                sglang_cache_aware={"hit_rate": 0.5}, least_loaded={"ttft_p99_s": 5.0})  # fmt: skip
    assert misses(tied)[1] == []  # equal to the best peer, to 0.99x pooled (0.5000), to the limits


def test_each_target_is_missed_by_the_figure_that_falls_short() -> None:
    cases = {
        TARGETS[0]: _row(GOOD, llmd_precise={"hit_rate": 0.5001}),
        TARGETS[1]: _row(GOOD, pooled=0.5052),
        TARGETS[2]: _row(GOOD | {"imbalance": 1.1001}),
        TARGETS[3]: _row(GOOD, least_loaded={"ttft_p99_s": 4.99}),
    }
    for target, row in cases.items():
        missed = misses(row)[1]
        assert [m.target for m in missed] == [target]
    peer = misses(cases[TARGETS[0]])[1][0]
    assert (peer.figure, peer.bound, peer.against) == (0.5, 0.5001, "llmd_precise")


def test_large_clusters_are_held_to_the_peers_only() -> None:
    row = _row(GOOD | {"imbalance": 3.0}, workers=64, pooled=0.9, least_loaded={"ttft_p99_s": 1.0})
    applicable, missed = misses(row)
    assert set(applicable) == {TARGETS[0], TARGETS[3]}
    assert missed == []
    slower_than_a_peer = _row(GOOD, workers=64, dynamo_kv={"ttft_p99_s": 4.0})
    assert [m.against for m in misses(slower_than_a_peer)[1]] == ["dynamo_kv"]


def test_tally_counts_runs_per_cluster_size() -> None:
    rows = [
        _row(GOOD, seed=0),
        _row(GOOD, seed=1, sglang_cache_aware={"hit_rate": 0.6}),
        _row(GOOD, workers=64, seed=0),
    ]
    groups = tally(rows)
    runs, met, missed = groups[(8, 1.0, 1000)]
    assert runs == 2
    assert met[TARGETS[0]] == 1
    assert met[TARGETS[3]] == 2
    assert [m.run for m in missed] == ["t seed 1"]
    runs, met, _ = groups[(64, 1.0, 1000)]
    assert runs == 1
    assert TARGETS[1] not in met


def test_the_script_prints_the_table_of_the_grids_it_reads(tmp_path: Path) -> None:
    grid = {"commit": "abc1234", "rows": [_row(GOOD), _row(GOOD, seed=1, pooled=0.6)]}
    (tmp_path / "g.json").write_text(json.dumps(grid))
    done = run_script("bench.sim_targets", "g", "--results", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == render([("g", grid)])
    assert "| g | abc1234 | 8 x1 | 1,000 | 2 | 2 of 2 | 1 of 2 | 2 of 2 | 2 of 2 |" in done.stdout
    assert "t seed 1, hit >= 0.99x pooled: 0.5 against 0.594" in done.stdout
    missing = run_script("bench.sim_targets", "nope", "--results", str(tmp_path))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr


def test_a_grid_reports_its_targets_under_its_tables(tmp_path: Path) -> None:
    trace = tmp_path / "tiny.jsonl"
    requests = [
        {"timestamp": 300 * i, "input_length": 1536, "output_length": 8, "hash_ids": [0, 1 + i % 3, 10 + i]}
        for i in range(24)
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in requests))
    done = run_script(
        "bench.sim_policies", "--traces", "synthetic", "--recorded", f"synthetic={trace}", "--sizes", "8x1",
        "--capacities", "100000", "--seeds", "0", "--out", str(tmp_path), "--name", "g", timeout_s=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    grid = json.loads((tmp_path / "g.json").read_text())
    markdown = (tmp_path / "g.md").read_text()
    assert markdown.rstrip().endswith(render([("g", grid)]))
