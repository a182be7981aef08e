"""``kvgate audit``: the cross-tenant timing side-channel audit against a running gateway."""

from __future__ import annotations

import argparse
import json
import os
import sys

HELP = "timing audit: can one tenant see from TTFT what another tenant has cached? (KS test)"
VICTIM_ENV, ATTACKER_ENV = "KVGATE_AUDIT_VICTIM_KEY", "KVGATE_AUDIT_ATTACKER_KEY"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gateway")
    parser.add_argument("--model", help="the served model (default: the first of /v1/models)")
    parser.add_argument("--samples", type=int, default=30, help="rounds (each: 1 warm-up + 4 timed probes)")
    parser.add_argument("--prompt-words", type=int, default=300, help="length of each secret prompt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.epilog = f"The two tenants' API keys come from ${VICTIM_ENV} and ${ATTACKER_ENV}."


def run(args: argparse.Namespace) -> int:
    import asyncio

    import httpx

    from kvgate.audit.timing import Target, run_audit

    victim, attacker = os.environ.get(VICTIM_ENV), os.environ.get(ATTACKER_ENV)
    if not victim or not attacker:
        raise ValueError(f"set ${VICTIM_ENV} and ${ATTACKER_ENV} to two tenants' API keys")
    model = (
        args.model
        or httpx.get(
            f"{args.url}/v1/models", headers={"authorization": f"Bearer {victim}"}, timeout=10
        ).json()["data"][0]["id"]
    )
    progress = lambda done, total: print(f"\raudit: {done}/{total} rounds", end="", file=sys.stderr)  # noqa: E731
    result = asyncio.run(run_audit(Target(args.url, model, victim, attacker), args.samples,
                                   args.prompt_words, args.seed, progress))  # fmt: skip
    print(file=sys.stderr)
    same, cross = result.same_tenant.summary(), result.cross_tenant.summary()
    if args.json:
        print(json.dumps({"same_tenant": same, "cross_tenant": cross}, indent=2))
        return 0
    for name, row in (("same tenant (control)", same), ("cross tenant (attack)", cross)):
        hit, miss = row["hit_median_s"] * 1000, row["miss_median_s"] * 1000
        print(f"{name:24} hit median {hit:8.1f} ms   miss median {miss:8.1f} ms   "
              f"KS D {row['ks_d']:.3f}   p {row['p_value']:.2e}")  # fmt: skip
    return 0
