"""``bench/engine.py --vs-hf --json --smoke`` on the tiny model: one JSON object on stdout with the
side-by-side rows of both dtypes, the machine and command they came from, the TTFT section still working
(cached prefixes found in both tiers), and the two files written. Figures are checked for shape, never
for speed (the smoke sizes mean nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.bench.scripts import positive, run_script

pytestmark = pytest.mark.slow  # two model loads and a dozen short runs in a fresh interpreter: ~10 s

CASES = {"prefill_48", "decode_b1_ctx16", "decode_b8_ctx16", "decode_b8_ctx48"}  # the SMOKE sizes'


@pytest.fixture(scope="module")
def smoke(tiny_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("engine-bench")
    model = ["--model", str(tiny_chat_model)]
    done = run_script(
        "bench.engine", "--vs-hf", "--json", "--smoke", "--threads", "1", *model, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), out  # stdout is exactly one JSON object: progress went to stderr


def test_side_by_side_rows_cover_every_case_in_both_dtypes(smoke: tuple[dict[str, Any], Path]) -> None:
    rows = smoke[0]["side_by_side"]
    assert {(r["case"], r["dtype"]) for r in rows} == {(c, d) for c in CASES for d in ("float32", "bfloat16")}
    for row in rows:
        assert positive(row["engine"]), row
        assert positive(row["hf"]), row
        assert row["speedup"] == pytest.approx(row["engine"] / row["hf"])
        prefill = row["case"].startswith("prefill")
        assert row["unit"] == ("prompt tokens/s" if prefill else "generated tokens/s")
        assert len(row["engine_runs"]) == len(row["hf_runs"]) == 1  # warm-up rounds are not kept


def test_the_result_names_machine_threads_commit_and_command(smoke: tuple[dict[str, Any], Path]) -> None:
    machine = smoke[0]["machine"]
    assert machine["threads"] == 1
    assert machine["cores"] >= 1
    assert machine["cpu_model"]
    assert machine["torch"]
    assert len(machine["commit"].removesuffix("+dirty")) == 40 or machine["commit"] == "unknown"
    assert machine["command"].startswith("python -m bench.engine --vs-hf --json --smoke")


def test_ttft_finds_the_shared_document_in_each_tier(smoke: tuple[dict[str, Any], Path]) -> None:
    for dtype, ttft in smoke[0]["ttft"].items():
        shared = ttft["shared_tokens"]
        assert [s["cached_gpu_tokens"] for s in ttft["samples"]["gpu"]] == [shared] * 3, dtype
        assert [s["cached_cpu_tokens"] for s in ttft["samples"]["cpu"]] == [shared] * 3, dtype
        assert [s["cached_gpu_tokens"] + s["cached_cpu_tokens"] for s in ttft["samples"]["cold"]] == [0] * 3
        assert all(positive(v) for v in ttft["median_ttft_s"].values())


def test_json_and_markdown_are_written(smoke: tuple[dict[str, Any], Path]) -> None:
    result, out = smoke
    assert json.loads((out / "engine_vs_hf.json").read_text())["side_by_side"] == result["side_by_side"]
    table = (out / "engine.md").read_text()
    assert "| case | dtype | kvgate engine | transformers (sdpa) | unit | speedup |" in table
    assert "| decode_b8_ctx48 | bfloat16 |" in table
    assert result["machine"]["commit"] in table
    assert "Time to first token, float32" in table
