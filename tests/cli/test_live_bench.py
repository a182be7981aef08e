"""The live benchmark (``kvgate bench``) against a real gateway over scripted workers."""

from __future__ import annotations

import asyncio
import json
import sys

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from kvgate.loadgen.report import summarize
from kvgate.loadgen.runner import run, run_grpc
from kvgate.loadgen.workload import multi_turn, shared_prefix
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway


def test_shared_prefix_workload_interleaves_groups_over_identical_system_prompts() -> None:
    requests = shared_prefix(groups=3, per_group=2, system_tokens=64, question_tokens=8, max_tokens=4)
    assert [r.group for r in requests] == ["group-0", "group-1", "group-2"] * 2
    assert requests[0].messages[0] == requests[3].messages[0]  # same group, same system prompt
    assert requests[0].messages[1] != requests[3].messages[1]  # different questions
    assert requests[0].messages[0] != requests[1].messages[0]


def test_multi_turn_conversations_grow_by_one_turn() -> None:
    requests = multi_turn(chats=2, turns=3, turn_tokens=8, max_tokens=4)
    first_chat = [r for r in requests if r.group == "chat-0"]
    assert [len(r.messages) for r in first_chat] == [1, 3, 5]
    assert first_chat[1].messages[:1] == first_chat[0].messages  # the earlier turns are the prefix
    assert first_chat[2].messages[:3] == first_chat[1].messages
    assert first_chat[1].messages[1]["role"] == "assistant"


async def test_the_live_benchmark_reports_cached_tokens_and_ttft(live: LiveGateway) -> None:
    requests = shared_prefix(groups=2, per_group=4, system_tokens=600, question_tokens=16, max_tokens=3)
    outcomes, wall = await run(live.url, MODEL, requests, concurrency=2, timeout_s=60, progress=False)
    summary = summarize(outcomes, wall)
    assert summary["ok"] == 8
    assert summary["errors"] == 0
    assert summary["ttft_p50_s"] is not None
    assert 0.3 < summary["cached_fraction"] < 1.0  # later requests of a group reuse its system prompt
    assert summary["output_tokens_per_s"] > 0


async def test_the_bench_command_prints_one_json_object(live: LiveGateway) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kvgate.cli.main",
        "bench",
        "--url",
        live.url,
        "--model",
        MODEL,
        "--groups",
        "1",
        "--per-group",
        "2",
        "--system-tokens",
        "300",
        "--max-tokens",
        "2",
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    summary = json.loads(out)
    assert summary["ok"] == 2
    assert summary["cached_fraction"] > 0


async def test_errors_are_counted_not_raised(live: LiveGateway) -> None:
    requests = shared_prefix(groups=1, per_group=2, system_tokens=16, question_tokens=8, max_tokens=3)
    outcomes, wall = await run(
        live.url, "no-such-model", requests, concurrency=1, timeout_s=30, progress=False
    )
    summary = summarize(outcomes, wall)
    assert summary["errors"] == 2
    assert "404" in summary["error_samples"][0]


async def test_the_benchmark_sends_its_api_key_with_every_request(tokenizer: Tokenizer) -> None:
    key = "kvg-bench-test-key"
    requests = shared_prefix(groups=1, per_group=2, system_tokens=16, question_tokens=8, max_tokens=2)
    async with running_gateway(tokenizer, keys=KeyRing([(hash_key(key), Tenant("acme"))])) as gateway:
        keyed = await run(gateway.url, MODEL, requests, 1, 30, progress=False,
                          headers={"authorization": f"Bearer {key}"})  # fmt: skip
        anonymous = await run(gateway.url, MODEL, requests, 1, 30, progress=False)
    assert summarize(*keyed)["ok"] == 2
    assert summarize(*anonymous)["errors"] == 2


async def test_the_live_benchmark_over_grpc_reports_the_same_figures(
    live: LiveGateway, grpc_target: str
) -> None:
    """``kvgate bench --grpc``: the same workload through the gRPC front (kvgate.client), one run per
    front on fresh prompts: the same requests succeed and the same share of prompt tokens is cached."""
    summaries = []
    for seed, over_grpc in ((1, False), (2, True)):
        requests = shared_prefix(2, 3, system_tokens=600, question_tokens=16, max_tokens=3, seed=seed)
        if over_grpc:
            outcomes, wall = await run_grpc(grpc_target, MODEL, requests, 2, 60, progress=False)
        else:
            outcomes, wall = await run(live.url, MODEL, requests, concurrency=2, timeout_s=60, progress=False)
        summaries.append(summarize(outcomes, wall))
    refused, _ = await run_grpc(grpc_target, "no-such-model", requests[:1], 1, 30, progress=False)
    over_http, over_grpc = summaries
    assert over_http["ok"] == over_grpc["ok"] == 6
    assert over_grpc["ttft_p50_s"] is not None
    assert over_grpc["cached_fraction"] > 0.3
    assert abs(over_grpc["cached_fraction"] - over_http["cached_fraction"]) < 0.1
    assert refused[0].error is not None
    assert "NOT_FOUND" in refused[0].error
