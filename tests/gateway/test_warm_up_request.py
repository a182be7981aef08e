"""The worker request of a warm-up: the job's opening alone, under the job's cache namespaces, one
token, at background priority; and the sender's outcomes when it cannot send one."""

from __future__ import annotations

from dataclasses import replace

from kvgate.gateway.metrics import GatewayMetrics
from kvgate.gateway.routing.types import WarmUp
from kvgate.gateway.upstream import calls
from kvgate.gateway.upstream.channels import ChannelPool
from kvgate.gateway.upstream.warmups import WarmUpSender
from kvgate.proto.ids import WorkerId
from tests.gateway.dispatch_cluster import job
from tests.index.helpers import info


def test_a_warm_up_prefills_the_opening_alone_at_background_priority() -> None:
    shared = replace(job(1000), cache_salt="tenant-a", shared_salt="team", shared_tokens=384, adapter_id="")
    request = calls.warm_request(shared, WarmUp(WorkerId("w1"), 256))
    assert request.background
    assert list(request.prompt_token_ids) == shared.token_ids[:256].tolist()
    assert request.request_id == f"{shared.request_id}:warm"
    assert request.sampling.max_tokens == 1
    assert (request.cache_salt, request.shared_salt, request.shared_tokens) == ("tenant-a", "team", 256)


def test_a_warm_up_never_outgrows_the_prompt_and_has_no_shared_namespace_without_one() -> None:
    plain = replace(job(300), cache_salt="tenant-a")
    request = calls.warm_request(plain, WarmUp(WorkerId("w1"), 512))
    assert len(request.prompt_token_ids) == 300
    assert (request.shared_salt, request.shared_tokens) == ("", 0)


async def test_a_warm_up_that_cannot_be_sent_counts_as_failed_and_raises_nothing() -> None:
    channels = ChannelPool()
    await channels.close()  # the gateway is shutting down: no channel is handed out
    metrics = GatewayMetrics("m", "kvgate", 128)
    sender = WarmUpSender(channels, metrics)
    sender.send(job(300), WarmUp(WorkerId("w1"), 256), info(WorkerId("w1")))
    await sender.drain()
    assert metrics.warm_ups.labels("failed")._value.get() == 1


async def test_warm_ups_beyond_the_limit_are_dropped() -> None:
    channels = ChannelPool()
    await channels.close()
    metrics = GatewayMetrics("m", "kvgate", 128)
    sender = WarmUpSender(channels, metrics, max_in_flight=1)
    for _ in range(3):  # the first is still in flight (its task has not run yet)
        sender.send(job(300), WarmUp(WorkerId("w1"), 256), info(WorkerId("w1")))
    await sender.close()
    assert metrics.warm_ups.labels("dropped")._value.get() == 2
