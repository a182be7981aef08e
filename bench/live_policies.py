"""The live benchmark, once per routing policy, in one go: for each policy start ``kvgate up``, drive it
with ``kvgate bench``'s shared-prefix workload, stop it; then write the comparison.

    python bench/live_policies.py [--policy kvgate --policy round_robin ...] [--out bench/results]

Each run starts a fresh local stack (default model, 2 workers), so no policy inherits another's cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import command_line, git_commit
from kvgate.loadgen.report import summarize
from kvgate.loadgen.runner import run
from kvgate.loadgen.workload import shared_prefix


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_stack(policy: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    temp = tempfile.mkdtemp(prefix="kvr", dir="/tmp")
    args = [
        "kvgate",
        "up",
        "--policy",
        policy,
        "--workers",
        str(workers),
        "--port",
        str(port),
        "--grpc-port",
        str(free_port()),
        "--ray-temp-dir",
        temp,
    ]
    return subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 300) -> str:
    """The served model name once /health says every worker is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"kvgate up exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return httpx.get(f"{url}/v1/models", timeout=2).json()["data"][0]["id"]
        except httpx.HTTPError:
            pass
        time.sleep(1)
    sys.exit("kvgate up did not become ready")


def one_policy(policy: str, args: argparse.Namespace) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    print(f"[live] {policy}: starting kvgate up", file=sys.stderr, flush=True)
    proc = start_stack(policy, port, args.workers)
    try:
        model = wait_ready(url, proc)
        requests = shared_prefix(
            args.groups, args.per_group, args.system_tokens, args.question_tokens, args.max_tokens, args.seed
        )
        print(f"[live] {policy}: {len(requests)} requests", file=sys.stderr, flush=True)
        outcomes, wall = asyncio.run(run(url, model, requests, args.concurrency, args.timeout))
        return summarize(outcomes, wall)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)


def markdown(report: dict) -> str:
    w = report["workload"]
    lines = [
        "# Live benchmark: kvgate up, one run per policy",
        "",
        f"Commit {report['commit']}; command `{report['command']}`. Machine: {report['machine']}",
        "",
        f"`kvgate up` (SmolLM2-135M-Instruct, {w['workers']} CPU workers) driven by the shared-prefix "
        f"workload: {w['groups']} system prompts of ~{w['system_tokens']} tokens, {w['per_group']} "
        f"questions each (~{w['question_tokens']} tokens), {w['max_tokens']} output tokens, "
        f"{w['concurrency']} concurrent clients, temperature 0.",
        "",
        "| policy | TTFT p50 s | TTFT p99 s | output tok/s | cached fraction | ok | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for policy, s in report["policies"].items():
        lines.append(
            f"| {policy} | {s['ttft_p50_s']:.2f} | {s['ttft_p99_s']:.2f} | "
            f"{s['output_tokens_per_s']:.1f} | {s['cached_fraction']:.3f} | {s['ok']} | {s['errors']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", action="append")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--groups", type=int, default=3)
    parser.add_argument("--per-group", type=int, default=4)
    parser.add_argument("--system-tokens", type=int, default=1024)
    parser.add_argument("--question-tokens", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    policies = args.policy or ["kvgate", "round_robin"]
    workload = {
        k: getattr(args, k)
        for k in (
            "workers",
            "groups",
            "per_group",
            "system_tokens",
            "question_tokens",
            "max_tokens",
            "concurrency",
        )
    }
    report = {
        "commit": git_commit(short=True),
        "command": command_line(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores",
        "workload": workload,
        "policies": {p: one_policy(p, args) for p in policies},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "live.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "live.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
