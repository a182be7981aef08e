"""The worker request of a warm-up: the job's opening alone, under the job's cache namespaces, one
token, at background priority."""

from __future__ import annotations

from dataclasses import replace

from kvgate.gateway.routing.types import WarmUp
from kvgate.gateway.upstream import calls
from kvgate.proto.ids import WorkerId
from tests.gateway.dispatch_cluster import job


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
