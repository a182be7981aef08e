"""The cross-tenant timing audit on the real stack: ``kvgate up`` (default model, 2 CPU workers) with
two tenants' keys, probed by ``kvgate.audit`` (see ``kvgate audit --help``).

    python bench/timing_audit.py [--samples 25] [--prompt-words 150] [--out bench/results]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import command_line, git_commit
from kvgate.audit.timing import Target, run_audit
from kvgate.gateway.tenancy import hash_key
from tests.system.up_process import UpProcess

KEYS = {"victim": "kvg-audit-victim", "attacker": "kvg-audit-attacker"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--prompt-words", type=int, default=150)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    keys = Path(tempfile.mkdtemp()) / "keys.toml"
    keys.write_text("".join(f'[[tenant]]\nname = "{n}"\nkeys = ["{hash_key(k)}"]\n' for n, k in KEYS.items()))
    sizing = ["--max-model-len", "2048", "--num-gpu-blocks", "512"]
    up = UpProcess(["--workers", "2", *sizing, "--api-keys", str(keys)])
    try:
        up.wait_healthy(timeout_s=300)
        target = Target(up.base_url, "SmolLM2-135M-Instruct", KEYS["victim"], KEYS["attacker"])
        progress = lambda done, total: print(f"\r{done}/{total}", end="", file=sys.stderr)  # noqa: E731
        result = asyncio.run(run_audit(target, args.samples, args.prompt_words, progress=progress))
    finally:
        up.interrupt()
    report = {
        "commit": git_commit(short=True),
        "command": command_line(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "stack": "kvgate up, SmolLM2-135M-Instruct, 2 CPU workers, policy kvgate",
        "prompt_words": args.prompt_words,
        "same_tenant": result.same_tenant.summary(),
        "cross_tenant": result.cross_tenant.summary(),
        "ttft_s": {
            "same_hit": result.same_tenant.hit_ttft_s,
            "same_miss": result.same_tenant.miss_ttft_s,
            "cross_hit_candidate": result.cross_tenant.hit_ttft_s,
            "cross_miss": result.cross_tenant.miss_ttft_s,
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "timing_audit.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("same_tenant", "cross_tenant")}, indent=2))


if __name__ == "__main__":
    main()
