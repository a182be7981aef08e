"""``bench/gpu_serve.py --smoke`` on the tiny model, on CPU: a real worker process driven over gRPC
against transformers. The output's structure is checked (cases measured or skipped with a reason, figures
positive and finite, the worker reusing the cached document), never its speed; without ``--smoke`` and
without CUDA the script refuses to run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.serve_cases import worker_decode
from bench.serve_worker import NoSteadyWindowError, StreamTiming, steady_decode
from tests.bench.scripts import positive, run_script


@pytest.fixture(scope="module")
def smoke(tiny_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("gpu-serve")
    done = run_script("bench.gpu_serve", "--smoke", "--threads", "1", "--model", str(tiny_chat_model),
                      "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "gpu_serve.json").read_text()), out


@pytest.mark.slow
def test_ttft_cases_are_measured_or_skipped_for_the_context(smoke: tuple[dict[str, Any], Path]) -> None:
    result = smoke[0]
    assert result["context"] == 512
    assert result["smoke"] is True
    by_prompt = {c["prompt_tokens"]: c for c in result["ttft"]}
    assert sorted(by_prompt) == [32, 96, 1024]
    assert "exceed the model's context of 512" in by_prompt[1024]["skipped"]
    for tokens in (32, 96):
        case = by_prompt[tokens]
        assert set(case["median_s"]) == {"worker_cold", "worker_cached", "hf_cold", "hf_cached"}
        assert all(positive(v) for v in case["median_s"].values()), case
        assert positive(case["speedup_cold"])
        assert positive(case["speedup_cached"])
        # the second prompt's document came from the worker's cache (whole blocks of it)
        assert all(0 < n <= case["shared_tokens"] for n in case["worker_cached_tokens"]), case


@pytest.mark.slow
def test_decode_cases_compare_the_same_batch(smoke: tuple[dict[str, Any], Path]) -> None:
    decode = smoke[0]["decode"]
    assert [c["batch"] for c in decode] == [1, 4]
    for case in decode:
        assert positive(case["worker_tokens_s"]), case
        assert positive(case["hf_tokens_s"]), case
        assert case["speedup"] == pytest.approx(case["worker_tokens_s"] / case["hf_tokens_s"])


@pytest.mark.slow
def test_markdown_names_device_commit_command_and_skips(smoke: tuple[dict[str, Any], Path]) -> None:
    result, out = smoke
    table = (out / "gpu_serve.md").read_text()
    assert result["machine"]["commit"] in table
    assert "python -m bench.gpu_serve --smoke" in table
    assert "| 1024 | skipped: 1025 tokens" in table
    assert result["machine"]["device_name"] in table


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_without_smoke_and_without_cuda_it_refuses() -> None:
    done = run_script("bench.gpu_serve", timeout_s=120)
    assert done.returncode == 2
    assert "no CUDA device is available" in done.stderr


def _stream(first: float, step: float, tokens: int) -> StreamTiming:
    return StreamTiming(first - 0.5, tuple((first + i * step, 1) for i in range(tokens)), 0)


def test_steady_decode_counts_the_window_where_every_stream_decodes() -> None:
    # two streams in lockstep, 0.1 s a step, the second's tokens 1 ms later: the window runs from its
    # first token (1.001) to the first stream's last (1.9); tokens after 1.001 up to 1.9: 9 + 8
    run = steady_decode([_stream(1.0, 0.1, 10), _stream(1.001, 0.1, 10)])
    assert run.tokens == 17
    assert run.seconds == pytest.approx(0.899)


def test_steady_decode_refuses_streams_that_never_overlap() -> None:
    with pytest.raises(NoSteadyWindowError, match="never all decoded at once"):
        steady_decode([_stream(1.0, 0.1, 5), _stream(2.0, 0.1, 5)])


class _Runs:
    """A client whose successive batches are ``runs`` (each a list of streams), counting the calls."""

    def __init__(self, runs: list[list[StreamTiming]]) -> None:
        self.runs, self.calls = runs, 0

    async def batch(self, prompts: object, max_tokens: int) -> list[StreamTiming]:
        self.calls += 1
        return self.runs.pop(0)


_APART = [_stream(1.0, 0.1, 5), _stream(2.0, 0.1, 5)]
_TOGETHER = [_stream(1.0, 0.1, 10), _stream(1.001, 0.1, 10)]


def test_a_decode_run_without_a_steady_window_is_run_again() -> None:
    client = _Runs([_APART, _TOGETHER])
    rate = asyncio.run(worker_decode(client, [], 10))  # type: ignore[arg-type]
    assert client.calls == 2
    assert rate == pytest.approx(17 / 0.899)


def test_decode_runs_that_never_overlap_fail_after_the_last_try() -> None:
    client = _Runs([_APART, _APART, _APART, _TOGETHER])
    with pytest.raises(NoSteadyWindowError):
        asyncio.run(worker_decode(client, [], 10, tries=3))  # type: ignore[arg-type]
    assert client.calls == 3
