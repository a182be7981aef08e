"""Faults with real processes: Redis stopped while requests flow through ``kvgate up --redis-url``.

Requests keep succeeding on load-based routing (reason ``fallback``) while Redis is down; when it
returns (empty, as after a crash), the workers re-register and re-publish what they hold, and
cache-aware routing resumes."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from tests.support.redis_server import RedisServer
from tests.system.test_up import TINY, chat
from tests.system.up_process import READY_S, UpProcess, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.redis]


def ask(client: openai.OpenAI, question: str) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(model="tiny", messages=chat(question), max_tokens=3, temperature=0)


def test_requests_survive_a_redis_outage_and_cache_routing_resumes(
    tiny_chat_model: Path, private_redis: RedisServer
) -> None:
    args = ["--model", str(tiny_chat_model), "--model-name", "tiny", *TINY, "--redis-url", private_redis.url]
    process = UpProcess(args)
    try:
        process.wait_healthy(timeout_s=READY_S)
        client = openai.OpenAI(base_url=f"{process.base_url}/v1", api_key="unused", max_retries=0)
        home = ask(client, "warm").model_extra["kvgate"]["worker"]
        wait_for(lambda: ask(client, "hit?").model_extra["kvgate"]["route_reason"] == "cache_hit", 20)

        private_redis.stop()
        during = [ask(client, f"during {i}") for i in range(4)]
        assert all(r.choices[0].finish_reason for r in during)  # every request answered
        # the gateway's replica (fed by the workers' own streams) still answers: routing stays cache-aware
        assert "fallback" not in {r.model_extra["kvgate"]["route_reason"] for r in during}
        assert any(r.usage.prompt_tokens_details.cached_tokens > 0 for r in during)

        private_redis.start()  # back, and empty
        # The index learns the workers' holdings again (GPU tier, not a pending hint of this gateway).
        wait_for(lambda: _gpu_chunks(process.base_url, home) > 0, 60, process.log)
        resumed = ask(client, "after")
        assert resumed.model_extra["kvgate"]["route_reason"] == "cache_hit"
        # the fallback requests may have warmed the other worker too: any holder is right
        assert _gpu_chunks(process.base_url, resumed.model_extra["kvgate"]["worker"]) > 0
        assert resumed.usage.prompt_tokens_details.cached_tokens > 0
        assert process.interrupt() == 0, process.log()
    finally:
        if process.proc.poll() is None:
            process.kill()


def _gpu_chunks(base_url: str, worker: str) -> int:
    """Chunks of the shared prompt the index says ``worker`` holds in its GPU tier (dry run)."""
    body = {"model": "tiny", "messages": chat("probe"), "max_tokens": 3}
    answer = httpx.post(f"{base_url}/v1/route", json=body, timeout=10).json()
    return next((m["gpu_chunks"] for m in answer.get("matches", []) if m["worker"] == worker), 0)
