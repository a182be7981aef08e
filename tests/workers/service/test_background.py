"""Background prefills (cache warm-ups) over real gRPC against a real engine on the tiny model: the
flag reaches the engine, the warm-up's prompt is cached for the request that follows, and it adds
nothing to the queued prefill the worker reports."""

from __future__ import annotations

from kvgate.workers.service.messages import engine_request
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import client, generate_request, greedy, prompt, read_generation


def test_the_flag_reaches_the_engine_request() -> None:
    msg = generate_request(prompt(20), "w", greedy(1))
    assert not engine_request(msg).background
    msg.background = True
    assert engine_request(msg).background


async def test_a_warm_up_caches_its_prompt_for_the_request_that_follows(start_worker: StartWorker) -> None:
    ids = prompt(300)
    worker = await start_worker()
    async with client(worker.info.address) as stub:
        warm = generate_request(ids[:256], "warm", greedy(1))
        warm.background = True
        warmed = await read_generation(stub.Generate(warm))
        follow = await read_generation(stub.Generate(generate_request(ids, "user", greedy(4))))
    assert warmed.usage.prompt_tokens == 256
    assert warmed.usage.cached_tokens == 0
    assert follow.usage.cached_tokens == 256  # every block of the warm-up's prompt
