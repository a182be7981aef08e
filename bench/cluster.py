"""Through the full stack (``kvgate up``, default model, 2 CPU workers): TTFT of a repeated long prompt vs
a fresh one; how long a stalled worker (SIGSTOP) takes to be noticed (its waiting request answered
elsewhere) and to rejoin once resumed; how long a killed worker takes to be avoided, purged from the
index and restarted.

    python bench/cluster.py [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import httpx
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import command_line, git_commit
from tests.system.test_up import _serves
from tests.system.up_process import UpProcess, wait_for

SYSTEM = "You are a careful assistant for the kvgate project; answer in one short sentence. " * 20


def ttft(client: openai.OpenAI, model: str, system: str, question: str) -> tuple[float, int, str]:
    """Seconds to the first streamed content, cached prompt tokens, and the worker."""
    start = time.monotonic()
    first = None
    usage = None
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
        max_tokens=8,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.monotonic() - start
        usage = chunk.usage or usage
    return first or time.monotonic() - start, usage.prompt_tokens_details.cached_tokens, ""


def routed_worker(base_url: str, model: str, system: str) -> tuple[str, int]:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "probe"}],
    }
    answer = httpx.post(f"{base_url}/v1/route", json=body, timeout=10).json()
    best = answer["matches"][0] if answer["matches"] else {"worker": "", "gpu_chunks": 0}
    return best["worker"], best["gpu_chunks"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    up = UpProcess(["--workers", "2", "--max-model-len", "4096", "--num-gpu-blocks", "512"])
    try:
        up.wait_healthy(timeout_s=300)
        client = openai.OpenAI(base_url=f"{up.base_url}/v1", api_key="unused", max_retries=0)
        model = client.models.list().data[0].id
        fresh, repeated, cached = [], [], []
        for i in range(args.repeats):
            system = f"[{i}] " + SYSTEM
            fresh.append(ttft(client, model, system, "What is a prefix cache?")[0])
            time.sleep(1.0)  # the worker's events reach the index
            seconds, hit, _ = ttft(client, model, system, "What is a KV block?")
            repeated.append(seconds)
            cached.append(hit)
        home, _ = routed_worker(up.base_url, model, "[0] " + SYSTEM)
        (victim,) = [p for p in up.actor_processes() if _serves(p, home, up)]
        stall = _stall(up, client, model, victim, home)
        wait_for(lambda: routed_worker(up.base_url, model, "[0] " + SYSTEM)[0] == home, 60)
        killed = time.monotonic()
        victim.kill()
        avoided = _until(
            lambda: (
                client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=2
                ).choices
            ),
            killed,
        )
        purged = _until(lambda: routed_worker(up.base_url, model, "[0] " + SYSTEM)[0] != home, killed)
        restarted = _until(lambda: any(w[1] == "restarted" for w in up.workers()), killed)
        healthy = _until(lambda: httpx.get(f"{up.base_url}/health", timeout=2).json()["workers"] == 2, killed)
        prompt_tokens = client.chat.completions.create(
            model=model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "x"}],
            max_tokens=1,
        ).usage.prompt_tokens
    finally:
        up.interrupt()
    report = {
        "commit": git_commit(short=True),
        "command": command_line(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "prompt_tokens": prompt_tokens,
        "ttft_fresh_s": statistics.median(fresh),
        "ttft_repeated_s": statistics.median(repeated),
        "cached_tokens_repeated": statistics.median(cached),
        "stall": stall,
        "kill": {
            "first_request_ok_s": avoided,
            "purged_from_index_s": purged,
            "restart_reported_s": restarted,
            "both_workers_healthy_s": healthy,
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cluster.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


def _stall(up: UpProcess, client: openai.OpenAI, model: str, victim, home: str) -> dict[str, object]:
    """SIGSTOP the worker holding the prefix, send it a request, time its answer from the other
    worker; then SIGCONT and time until both workers are routable again."""
    victim.suspend()
    stopped = time.monotonic()
    try:
        answer = client.chat.completions.create(
            model=model,
            messages=[{"role": "system", "content": "[0] " + SYSTEM}, {"role": "user", "content": "hi"}],
            max_tokens=2,
        )
        answered = time.monotonic() - stopped
    finally:
        victim.resume()
    resumed = time.monotonic()
    rejoined = _until(lambda: httpx.get(f"{up.base_url}/health", timeout=2).json()["workers"] == 2, resumed)
    return {
        "waiting_request_answered_elsewhere_s": answered,
        "answered_by": answer.model_extra["kvgate"]["worker"],
        "stalled_worker": home,
        "rejoined_after_resume_s": rejoined,
    }


def _until(check, start: float, timeout_s: float = 180) -> float:
    wait_for(check, timeout_s)
    return time.monotonic() - start


if __name__ == "__main__":
    main()
