"""The gRPC front's log-probabilities and choices, end to end: a real gRPC client against the real
gateway over a real worker on the tiny chat model, checked against the model's own log-softmax
(``transformers``, fp32): each delta's ``logprobs`` (the token's and the most likely ones'), the
prompt's on the first delta (the first token without one), and ``n`` choices, each ending with a
``choice_done`` before the final message. Then the same through ``kvgate.client`` (asyncio and sync):
typed per-choice text, finish reasons and log-probabilities, equal to what the stub reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import torch

from kvgate.client import AsyncKVGateClient, ChoiceEnd, Chunk, Generation, KVGateClient, TokenLogprob
from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer, load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.grpc_api.server import build_grpc_server
from kvgate.gateway.settings import GatewaySettings
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto import common_pb2, gateway_pb2, gateway_pb2_grpc
from kvgate.proto.sampling import FinishReason
from tests.common.tokenizer.default_model import transformers_module
from tests.support.http_server import serve
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import CACHE, eventually
from tests.workers.service.test_openai_outputs import LIMITS, MODEL

PROMPT = "Once upon a time, in a land far away"


@dataclass(frozen=True)
class Front:
    """A KVGateway stub, the gRPC front's address, the tokenizer, the model in ``transformers``."""

    stub: Any
    target: str
    tokenizer: Tokenizer
    hf: Any


@pytest.fixture
async def front(start_worker: StartWorker, tiny_chat_model: Path) -> AsyncIterator[Front]:
    auto = transformers_module().AutoModelForCausalLM
    hf = auto.from_pretrained(tiny_chat_model, dtype=torch.float32).eval()
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    await start_worker(index)
    tokenizer = load_tokenizer(tiny_chat_model)
    gateway = build_gateway(GatewaySettings(MODEL, CACHE, limits=LIMITS), index, tokenizer, refresh_s=0.1)
    server, port = build_grpc_server(gateway.grpc_servicer(), "127.0.0.1:0", LIMITS.max_body_bytes)
    async with serve(gateway.app):  # the app's lifespan runs the gateway's discovery
        await server.start()
        try:
            await eventually(lambda: gateway.dispatcher.routable_count() == 1)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                yield Front(gateway_pb2_grpc.KVGatewayStub(channel), f"127.0.0.1:{port}", tokenizer, hf)
        finally:
            await server.stop(grace=None)


def _request(**sampling: Any) -> gateway_pb2.GatewayRequest:
    params = common_pb2.SamplingParams(**{"max_tokens": 4, "temperature": 0.0, **sampling})
    return gateway_pb2.GatewayRequest(model=MODEL, prompt=PROMPT, sampling=params)


def _log_softmax(hf: Any, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), dim=-1)


async def test_deltas_carry_the_models_log_probabilities_of_prompt_and_output(front: Front) -> None:
    stub, tokenizer, hf = front.stub, front.tokenizer, front.hf
    messages = [m async for m in stub.Generate(_request(logprobs=3, prompt_logprobs=2))]
    deltas = [m.delta for m in messages if m.WhichOneof("kind") == "delta"]
    ids = tokenizer.encode(PROMPT, add_special_tokens=False).tolist()
    prompt = list(deltas[0].prompt_logprobs)
    assert len(prompt) == len(ids)
    assert not prompt[0].HasField("logprob")
    rows = _log_softmax(hf, ids)
    for position in range(1, len(ids)):
        assert prompt[position].logprob == pytest.approx(rows[position - 1][ids[position]].item(), abs=1e-4)
        assert len(prompt[position].top) == 2
    generated = [t for d in deltas for t in d.token_ids]
    entries = [e for d in deltas for e in d.logprobs]
    assert len(entries) == len(generated) == 4
    rows = _log_softmax(hf, ids + generated)
    for i, (token, entry) in enumerate(zip(generated, entries, strict=True)):
        row = rows[len(ids) - 1 + i]
        assert entry.logprob == pytest.approx(row[token].item(), abs=1e-4)
        assert [t.logprob for t in entry.top] == pytest.approx(row.topk(3).values.tolist(), abs=1e-4)
    assert all(not d.prompt_logprobs for d in deltas[1:])


async def test_n_choices_each_end_before_the_final_message(front: Front) -> None:
    messages = [m async for m in front.stub.Generate(_request(n=3, temperature=1.0, seed=5))]
    kinds = [m.WhichOneof("kind") for m in messages]
    assert kinds[-1] == "final"
    assert sorted(m.choice_done.index for m in messages if m.WhichOneof("kind") == "choice_done") == [0, 1, 2]
    per_choice = {i: sum(len(m.delta.token_ids) for m in messages if m.WhichOneof("kind") == "delta"
                         and m.delta.index == i) for i in range(3)}  # fmt: skip
    assert per_choice == {0: 4, 1: 4, 2: 4}
    assert messages[-1].final.usage.completion_tokens == 12


def _typed(entries: Any) -> tuple[TokenLogprob, ...]:
    return tuple(TokenLogprob.of(e) for e in entries)


async def test_the_async_client_returns_the_models_log_probabilities_typed(front: Front) -> None:
    asked = {"logprobs": True, "top_logprobs": 3, "prompt_logprobs": 2}
    async with AsyncKVGateClient(front.target, timeout_s=60) as client:
        items = [
            i async for i in client.stream(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0.0, **asked)
        ]
    raw = [m async for m in front.stub.Generate(_request(logprobs=3, prompt_logprobs=2))]
    deltas = [m.delta for m in raw if m.WhichOneof("kind") == "delta"]
    *chunks, answer = items
    assert all(isinstance(c, Chunk) for c in chunks)
    assert isinstance(answer, Generation)
    assert answer.logprobs == _typed(e for d in deltas for e in d.logprobs)  # what the stub reads, typed
    assert answer.prompt_logprobs == _typed(deltas[0].prompt_logprobs) == chunks[0].prompt_logprobs
    ids = front.tokenizer.encode(PROMPT, add_special_tokens=False).tolist()
    rows = _log_softmax(front.hf, ids + list(answer.token_ids))
    for i, (token, entry) in enumerate(zip(answer.token_ids, answer.logprobs, strict=True)):
        row = rows[len(ids) - 1 + i]
        assert entry.logprob == pytest.approx(row[token].item(), abs=1e-4)
        assert [t.logprob for t in entry.top] == pytest.approx(row.topk(3).values.tolist(), abs=1e-4)
    assert len(answer.prompt_logprobs) == len(ids)
    assert answer.prompt_logprobs[0].logprob is None
    assert answer.prompt_logprobs[1].logprob == pytest.approx(rows[0][ids[1]].item(), abs=1e-4)
    assert [c.finish_reason for c in answer.choices] == [answer.finish_reason] == [FinishReason.LENGTH]


async def test_the_sync_client_returns_each_of_n_choices_typed(front: Front) -> None:
    def run() -> list[Any]:
        with KVGateClient(front.target, timeout_s=60) as client:
            return list(client.stream(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=1.0, seed=5, n=3,
                                      logprobs=True))  # fmt: skip

    *streamed, answer = await asyncio.to_thread(run)
    raw = [m async for m in front.stub.Generate(_request(n=3, temperature=1.0, seed=5, logprobs=0))]
    ends = [i for i in streamed if isinstance(i, ChoiceEnd)]
    assert sorted(e.index for e in ends) == [0, 1, 2]
    assert {e.finish_reason for e in ends} == {FinishReason.LENGTH}
    assert isinstance(answer, Generation)
    assert [c.index for c in answer.choices] == [0, 1, 2]
    for choice in answer.choices:
        deltas = [m.delta for m in raw if m.WhichOneof("kind") == "delta" and m.delta.index == choice.index]
        assert choice.token_ids == tuple(t for d in deltas for t in d.token_ids)  # seeded: the stub's choice
        assert choice.text == "".join(d.text for d in deltas)
        assert len(choice.logprobs) == len(choice.token_ids) == 4
        assert all(e.top == () and e.logprob is not None for e in choice.logprobs)
        assert choice.finish_reason is FinishReason.LENGTH
    assert (answer.text, answer.token_ids) == (answer.choices[0].text, answer.choices[0].token_ids)
    assert answer.usage.completion_tokens == 12
    assert answer.prompt_logprobs == ()
