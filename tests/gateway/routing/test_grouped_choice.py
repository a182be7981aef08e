"""The default policy decides from cohorts exactly as it does from one candidate per worker: random
fleets with tied loads, near-ties, shared and private runs, hot spots, pinned and soft home workers,
shared openings with and without the demand that pays for a copy."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.kvgate_policy import KvgatePolicy
from kvgate.gateway.routing.types import Candidate, GroupedRequest, RouteRequest, SharedPrefix
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.ids import WorkerId
from kvgate.proto.workers import WorkerLoad


def _case(rng: random.Random) -> tuple[RouteRequest, GroupedRequest]:
    n = rng.randint(1, 40)
    ids = sorted(WorkerId(f"w{i:02d}") for i in range(n))
    full = rng.random() < 0.5  # caches past the full-cache threshold, or roomy
    loads = [WorkerLoad(waiting_prefill_tokens=rng.choice((0, 0, 500, 4000, 200_000)),
                        running_seqs=rng.choice((0, 1, 3)), gpu_blocks_total=100,
                        gpu_blocks_free=(free := rng.choice((100, 5))),
                        gpu_blocks_cached=min(free, rng.choice((90, 100))) if full else 0)
             for _ in ids]  # fmt: skip
    runs = ["", "G" * 8, "G" * 4 + "C" * 4, "GGP", "C" * 10, "G" * 12]
    matches = {w: PrefixMatch(w, tiers) for w in ids if (tiers := rng.choice(runs))}
    stranger = WorkerId("not-a-candidate")  # the index may know workers this gateway does not route to
    matches[stranger] = PrefixMatch(stranger, "G" * 12)
    lookup = LookupResult(12, matches)
    candidates = tuple(
        Candidate(w, load, matches.get(w), rng.choice((0, 0, 128)))
        for w, load in zip(ids, loads, strict=True)
    )
    home = rng.choice([None, None, *ids])
    key, prompt = rng.getrandbits(64), rng.choice((100, 1024, 1536, 3000))
    pinned = rng.random() < 0.7  # a prompt_cache_key's home, else a soft home
    shared = rng.choice([None, SharedPrefix(512, 0.0), SharedPrefix(1024, 40.0), SharedPrefix(3000, 2.5)])
    slow = RouteRequest(prompt, 128, candidates, 7, key, home, pinned, shared=shared)
    bare = tuple(Candidate(c.worker_id, c.load, None, c.inflight_tokens) for c in candidates)
    return slow, GroupedRequest(
        prompt,
        128,
        bare,
        {w: i for i, w in enumerate(ids)},
        (),
        lookup.cohorts,
        7,
        key,
        home,
        pinned,
        shared=shared,
    )


def alike(
    policy: KvgatePolicy, slow: RouteRequest, grouped: GroupedRequest, **fields: object
) -> tuple[RouteRequest, GroupedRequest]:
    """``slow`` and ``grouped`` (a :func:`_case`) with ``fields`` set on both, and the grouped
    request's queue estimates from ``policy``: the same input to both paths."""
    queue_s = tuple(policy.queue_s(c) for c in grouped.candidates)
    return dataclasses.replace(slow, **fields), dataclasses.replace(grouped, queue_s=queue_s, **fields)


# the hot-spot guard idle, firing, and (factor < 1) leaving no worker cool
@pytest.mark.parametrize(("factor", "floor_s"), [(2.0, 10.0), (2.0, 0.01), (0.5, 0.01)])
def test_grouped_decisions_equal_per_worker_decisions(factor: float, floor_s: float) -> None:
    policy = KvgatePolicy(RoutingConfig(hot_spot_factor=factor, hot_spot_floor_s=floor_s))
    rng = random.Random(floor_s * factor)
    for _ in range(600):
        slow, grouped = alike(policy, *_case(rng))
        assert policy.choose_grouped(grouped) == policy.choose(slow)
