"""A failed call stays with the gateway that saw it, against real processes: two ``kvgate gateway``
processes and a worker process (two scripted workers) share a real Redis. When the worker holding a
prompt fails one gateway's call, that gateway re-routes; the other keeps the worker as a candidate
with everything it holds."""

from __future__ import annotations

import httpx
import pytest

from tests.support.redis_server import RedisServer
from tests.support.scripted_worker import fail_seed
from tests.system.gateway_process import GatewayProcess, gateway, gateway_over_scripted_workers, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.redis]
SYSTEM = "You are a meticulous assistant who answers in full sentences. " * 40


MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hello"}]


def _body(model: str) -> dict:
    return {"model": model, "max_tokens": 2, "messages": MESSAGES}


def _route(at: GatewayProcess, model: str) -> dict:
    reply = httpx.post(f"{at.base}/v1/route", json=_body(model), timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _held_by(route: dict, worker: str) -> int:
    return next((m["matched_chunks"] for m in route["matches"] if m["worker"] == worker), 0)


def test_a_failed_call_at_one_gateway_leaves_the_other_gateways_candidates_alone(
    private_redis: RedisServer,
) -> None:
    with (
        gateway_over_scripted_workers(private_redis.url, workers=2) as first,
        gateway(private_redis.url, workers=2) as second,
    ):
        model = first.model()
        served = httpx.post(f"{first.base}/v1/chat/completions", json=_body(model), timeout=30)
        assert served.status_code == 200
        holder = _route(first, model)["chosen_worker"]
        chunks = wait_until(lambda: _held_by(_route(second, model), holder), timeout_s=30)
        assert chunks >= 2

        # the holder fails this one call (scripted: the seed names the worker that fails it), at the
        # first gateway only
        failing = _body(model) | {"seed": fail_seed(holder)}
        served = httpx.post(f"{first.base}/v1/chat/completions", json=failing, timeout=30)
        assert served.status_code == 200  # re-routed to the other worker

        assert _route(first, model)["chosen_worker"] != holder  # quarantined there
        seen_by_second = _route(second, model)
        assert seen_by_second["chosen_worker"] == holder  # still a candidate over there,
        assert _held_by(seen_by_second, holder) == chunks  # with everything it holds
