"""Bodies just under the default size limit against a real ``kvgate gateway`` process (scripted
workers, a temporary Redis): how fast each is refused, how slow ``/health`` gets meanwhile, and what
the gateway's memory does. The same bodies as tests/system/test_hostile_clients.py, measured.

    python bench/hostile_bodies.py [--repeats 5] [--out bench/results]

Writes ``hostile_bodies.json`` (with the commit it ran at) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.redis_server import RedisServer  # noqa: E402
from tests.system.gateway_process import gateway_over_scripted_workers  # noqa: E402
from tests.system.test_hostile_clients import HealthProbe, just_under_the_limit  # noqa: E402


def measure(repeats: int) -> dict:
    results: dict[str, dict] = {}
    with RedisServer() as redis, gateway_over_scripted_workers(redis.url) as gateway:
        model = gateway.model()
        for kind in ("long text", "many messages"):
            body = just_under_the_limit(model, kind)
            before = gateway.rss_mib()
            took = []
            with HealthProbe(gateway.base) as probe, httpx.Client(base_url=gateway.base, timeout=60) as http:
                for _ in range(repeats):
                    started = time.monotonic()
                    status = http.post("/v1/chat/completions", content=body,
                                       headers={"content-type": "application/json"}).status_code  # fmt: skip
                    took.append(time.monotonic() - started)
                    assert status == 400, status
            results[kind] = {
                "body_bytes": len(body),
                "refused_median_s": round(statistics.median(took), 4),
                "refused_max_s": round(max(took), 4),
                "health_slowest_s": round(probe.slowest_s, 4),
                "health_answers": probe.answers,
                "rss_before_mib": round(before),
                "rss_after_mib": round(gateway.rss_mib()),
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    report = {"commit": commit.stdout.strip(), "repeats": args.repeats, "results": measure(args.repeats)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hostile_bodies.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"commit {report['commit']}, {args.repeats} bodies of each kind")
    for kind, r in report["results"].items():
        print(f"{kind:>14}: {r['body_bytes']} B, refused in {r['refused_median_s']} s "
              f"(max {r['refused_max_s']}), slowest /health {r['health_slowest_s']} s, "
              f"RSS {r['rss_before_mib']} -> {r['rss_after_mib']} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
