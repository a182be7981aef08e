"""The cache diagnostics as the request core drives them: the work of a diagnosis runs off the event
loop, a diagnosis that fails never fails its request, and the route note carries the attempts."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from kvgate.gateway.diagnosis import Cause, DiagnosisSettings, recorder
from kvgate.gateway.diagnosis.compare import Finding
from kvgate.gateway.diagnosis.diagnose import Layout
from kvgate.gateway.diagnosis.record import RequestRecord
from kvgate.gateway.diagnosis.recorder import CacheDiagnostics, Finished
from kvgate.gateway.routing.types import Routed, RouteDecision, RouteReason
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import reusable_tokens
from kvgate.proto.sampling import Usage
from tests.gateway.diagnosis.records import SCOPE, tokens

PROMPT = tokens(900, seed=1)


class Tokenizer:
    """Decodes to a volatile-looking text, noting the thread it ran in; ``fail`` makes it raise."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.threads: list[int] = []

    def decode(self, ids: np.ndarray, *, skip_special_tokens: bool = False) -> str:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise RuntimeError("the tokenizer broke")
        return "Current time: 2025-06-01T12:34:56Z."


def finished(request_id: str, ids: np.ndarray, cached: int = 0, attempts: int = 1) -> Finished:
    decision = RouteDecision(WorkerId("w0"), RouteReason.NEW_PREFIX, 0)
    usage = Usage(prompt_tokens=len(ids), cached_tokens=cached, cached_gpu_tokens=cached)
    return Finished(request_id, "a", SCOPE, ids, (), usage, Routed(decision, None, 0), attempts)


def diagnostics(tokenizer: Tokenizer, seen: list | None = None) -> CacheDiagnostics:
    return CacheDiagnostics(
        DiagnosisSettings(), Layout(128, 16), tokenizer, dict, seen.append if seen is not None else None
    )


async def test_the_diagnosis_runs_in_a_worker_thread_and_is_recorded_on_the_loop() -> None:
    tokenizer, seen = Tokenizer(), []
    cache = diagnostics(tokenizer, seen)
    await cache.finished(finished("r1", PROMPT))
    stamped = np.concatenate([PROMPT[:300], [11, 22, 33], PROMPT[300:]])
    found = await cache.finished(finished("r2", stamped, cached=256))
    assert found is not None
    assert found.cause is Cause.CHANGED_CONTENT  # the excerpt was decoded: r2 was compared with r1
    assert tokenizer.threads
    assert threading.get_ident() not in tokenizer.threads  # not on the event loop's thread
    assert [d.cause for d in seen] == [Cause.NEW_PREFIX, Cause.CHANGED_CONTENT]
    assert cache.report("a", "r2")["cause"] == "changed_content"


async def test_a_diagnosis_that_fails_is_logged_and_records_nothing(caplog: pytest.LogCaptureFixture) -> None:
    seen: list = []
    cache = diagnostics(Tokenizer(fail=True), seen)
    assert (await cache.finished(finished("r1", PROMPT))).cause is Cause.NEW_PREFIX  # nothing to decode
    stamped = np.concatenate([PROMPT[:300], [11, 22, 33], PROMPT[300:]])
    with caplog.at_level(logging.ERROR):
        assert await cache.finished(finished("r2", stamped, cached=256)) is None
    assert "the cache diagnosis of request r2 failed" in caplog.text
    assert cache.report("a", "r2") is None
    assert len(seen) == 1


async def test_the_route_note_carries_the_attempts() -> None:
    cache = diagnostics(Tokenizer())
    await cache.finished(finished("r1", PROMPT, attempts=3))
    assert cache.report("a", "r1")["evidence"]["attempts"] == 3


async def test_switched_off_it_records_nothing() -> None:
    cache = CacheDiagnostics(DiagnosisSettings(enabled=False), Layout(128, 16), Tokenizer(), dict)
    assert await cache.finished(finished("r1", PROMPT)) is None
    assert len(cache.recent) == 0


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the requests the recorder compares with earlier ones, in order."""
    ids: list[str] = []
    real = recorder.compare

    def counting(record: RequestRecord, earlier: Sequence[RequestRecord], chunk_size: int) -> Finding:
        ids.append(record.request_id)
        return real(record, earlier, chunk_size)

    monkeypatch.setattr(recorder, "compare", counting)
    return ids


async def test_a_request_that_reused_every_reusable_token_is_a_hit_without_a_comparison(
    compared: list[str],
) -> None:
    """Its diagnosis is ``hit`` whatever earlier requests hold, so it is not compared with them (the
    comparison is the costly part, per earlier request); a request that missed some still is."""
    cache = diagnostics(Tokenizer())
    await cache.finished(finished("r1", PROMPT))
    reusable = reusable_tokens(len(PROMPT), 16)  # the layout's block size
    assert (await cache.finished(finished("r2", PROMPT, cached=reusable))).cause is Cause.HIT
    assert (await cache.finished(finished("r3", PROMPT, cached=reusable - 16))).cause is not Cause.HIT
    assert compared == ["r1", "r3"]


async def test_a_prompt_with_no_whole_chunk_is_below_chunk_without_a_comparison(
    compared: list[str],
) -> None:
    """Nothing of it could have been reused whatever earlier requests held: ``below_chunk``, even
    when an earlier request holds its content in another order; a chunk and a token is compared."""
    cache = diagnostics(Tokenizer())
    short, longer = PROMPT[:128], PROMPT[:129]  # reusable: 112 tokens (no chunk); 128 (one chunk)
    await cache.finished(finished("r1", np.concatenate([short[64:], short[:64]])))
    assert (await cache.finished(finished("r2", short))).cause is Cause.BELOW_CHUNK
    await cache.finished(finished("r3", np.concatenate([longer[65:], longer[:65]])))
    # compared: r2 had r4's first chunk (evicted: its worker is gone), r1 and r3 its content reordered
    assert (await cache.finished(finished("r4", longer))).cause in (Cause.EVICTED, Cause.REORDERED)
    assert compared == ["r3", "r4"]  # r1 is 128 tokens: no chunk either


@pytest.mark.parametrize(
    ("tokens", "cached", "threaded"),
    [
        (PROMPT[:100], 0, False),  # no whole chunk: below_chunk, shaped on the loop
        (PROMPT, 896, False),  # a full hit of a short prompt
        (tokens(5000, seed=3), 4992, True),  # a full hit too long to shape on the loop
        (PROMPT, 256, True),  # compared with earlier requests
    ],
)
async def test_only_short_prompts_that_need_no_comparison_stay_on_the_loop(
    monkeypatch: pytest.MonkeyPatch, tokens: np.ndarray, cached: int, threaded: bool
) -> None:
    hops: list[str] = []
    real = recorder.asyncio.to_thread

    async def counting(function: Callable[..., Any], *args: Any) -> Any:
        hops.append(args[0].request_id)
        return await real(function, *args)

    monkeypatch.setattr(recorder.asyncio, "to_thread", counting)
    cache = diagnostics(Tokenizer())
    await cache.finished(finished("r1", tokens))
    hops.clear()
    assert await cache.finished(finished("r2", tokens, cached=cached)) is not None
    assert hops == (["r2"] if threaded else [])
    assert cache.report("a", "r2") is not None
