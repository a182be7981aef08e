"""TLS on the gateway-worker link with a real worker: the gateway (HTTP front, event feed, dispatch)
talks to a worker serving mutual TLS; a plaintext client, a client without a certificate and a
gateway trusting another CA are all refused."""

from __future__ import annotations

from pathlib import Path

import grpc
import openai
import pytest

from kvgate.common.clock import SystemClock
from kvgate.common.grpc_tls import ChannelSecurity, TlsFiles
from kvgate.common.tokenizer import load_tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.settings import GatewaySettings
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.index.event_feed import EventFeed
from kvgate.proto import worker_pb2, worker_pb2_grpc
from tests.support.certs import Certs, make_certs
from tests.support.http_server import serve
from tests.support.real_workers import StartWorker
from tests.workers.service.helpers import CACHE, eventually
from tests.workers.service.test_end_to_end import LIMITS, MODEL, chat


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def test_the_gateway_serves_through_a_mutual_tls_worker(
    start_worker: StartWorker, tiny_chat_model: Path, certs: Certs
) -> None:
    tls = TlsFiles(certs.ca, certs.cert, certs.key)
    worker = await start_worker(tls=tls)
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    feed = EventFeed(index, poll_s=0.2, tls=tls, secret=CACHE.secret)
    feed.follow(worker.info.address)
    gateway = build_gateway(
        GatewaySettings(MODEL, CACHE, limits=LIMITS, worker_tls=tls),
        index,
        load_tokenizer(tiny_chat_model),
        0.1,
    )
    try:
        async with serve(gateway.app) as url:
            await eventually(lambda: gateway.dispatcher.routable_count() == 1)
            async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
                reply = await client.chat.completions.create(model=MODEL, messages=chat("hi"), max_tokens=3)
            assert reply.usage.completion_tokens == 3
    finally:
        await feed.close()


@pytest.mark.parametrize("client", ["plaintext", "no client certificate", "another CA"])
async def test_a_tls_worker_refuses_clients_it_cannot_trust(
    start_worker: StartWorker, certs: Certs, client: str
) -> None:
    worker = await start_worker(tls=TlsFiles(certs.ca, certs.cert, certs.key))
    tls = {
        "plaintext": None,
        "no client certificate": TlsFiles(certs.ca),
        "another CA": TlsFiles(certs.other_ca, certs.cert, certs.key),
    }[client]
    async with ChannelSecurity.of(tls).open(worker.info.address, ()) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await worker_pb2_grpc.KVWorkerStub(channel).Stats(worker_pb2.StatsRequest(), timeout=5)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


def test_tls_settings_are_checked_at_start(certs: Certs, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="both a certificate and its key"):
        TlsFiles(certs.ca, certs.cert)
    with pytest.raises(ValueError, match="does not exist"):
        TlsFiles(tmp_path / "missing.pem")
