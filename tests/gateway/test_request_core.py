"""The request core on its own, with no front: the spine turns a request into a job whose chain the
worker recomputes byte for byte from the wire, and every domain error has its HTTP and gRPC face."""

from __future__ import annotations

import grpc
import pytest
import torch

from kvgate.common.clock import SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.compose import build_gateway
from kvgate.gateway.core.request import ChatInput, GenerateRequest, TextInput
from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.grpc_api.errors import status_of
from kvgate.gateway.http_api.errors import error_body, http_status
from kvgate.gateway.routing.types import KVSource, Routed, RouteDecision, RouteReason
from kvgate.gateway.settings import GatewaySettings, Limits
from kvgate.gateway.tenancy import Caller, Tenant
from kvgate.gateway.upstream import calls
from kvgate.index import IndexSettings, MemoryPrefixIndex
from kvgate.proto.ids import WorkerId
from kvgate.proto.layout import CacheLayout
from kvgate.proto.sampling import CacheHint
from kvgate.proto.units import TokenCount
from kvgate.workers.engine.intake import SequenceFactory
from kvgate.workers.service.messages import engine_request
from tests.index.helpers import info

LAYOUT = CacheLayout("HuggingFaceTB/SmolLM2-135M-Instruct", secret=b"deployment secret")
READER = Tenant("acme", shared_namespaces=frozenset({"manual"}))
SYSTEM = "You answer questions about the kvgate manual. " * 40  # several whole chunks


def _core(tokenizer: Tokenizer, limits: Limits | None = None):
    index = MemoryPrefixIndex(IndexSettings(), SystemClock())
    settings = GatewaySettings("smollm2", LAYOUT, limits=limits or Limits())
    return build_gateway(settings, index, tokenizer).core


def _worker_hashes(job, tokenizer: Tokenizer) -> list[bytes]:
    """The chunk hashes a worker computes for ``job``, from the request the gateway would send it."""
    routed = Routed(RouteDecision(WorkerId("w0"), RouteReason.LOAD_BALANCED, 0), None, len(job.hashes))
    request = engine_request(calls.request(job, routed))
    factory = SequenceFactory(LAYOUT, tokenizer.vocab_size, 1 << 20, frozenset(), 300.0, torch.device("cpu"))
    return list(factory.build(request).prompt.chunk_hashes)


@pytest.mark.parametrize(
    ("caller", "salt"),
    [
        pytest.param(Caller(), "", id="anonymous"),
        pytest.param(Caller(Tenant("acme")), "team-a", id="tenant-and-client-salt"),
        pytest.param(Caller(READER, "manual"), "", id="shared-namespace"),
    ],
)
async def test_the_worker_recomputes_the_gateways_chain_from_the_wire(
    tokenizer: Tokenizer, caller: Caller, salt: str
) -> None:
    core = _core(tokenizer)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is a chunk?"}]
    job = await core.prepare(GenerateRequest("smollm2", ChatInput(messages), client_salt=salt), caller)
    assert len(job.hashes) >= 3
    assert _worker_hashes(job, tokenizer) == job.hashes
    if caller.namespace is not None:  # the system prompt's whole chunks hash in the namespace
        assert job.shared_tokens > 0
        assert job.shared_tokens % LAYOUT.chunk_size == 0


async def test_scopes_never_share_a_chain(tokenizer: Tokenizer) -> None:
    core = _core(tokenizer)
    request = GenerateRequest("smollm2", TextInput(SYSTEM))
    anonymous = await core.prepare(request, Caller())
    acme = await core.prepare(request, Caller(Tenant("acme")))
    salted = await core.prepare(GenerateRequest("smollm2", TextInput(SYSTEM), client_salt="x"), Caller())
    assert len({anonymous.hashes[0], acme.hashes[0], salted.hashes[0]}) == 3
    assert (await core.prepare(request, Caller())).hashes == anonymous.hashes  # deterministic


async def test_a_dry_run_charges_nothing_and_errors_are_domain_errors(tokenizer: Tokenizer) -> None:
    core = _core(tokenizer)
    with pytest.raises(GatewayError) as unknown:
        await core.prepare(GenerateRequest("another-model", TextInput("hi")), Caller())
    assert unknown.value.kind is ErrorKind.NOT_FOUND
    with pytest.raises(GatewayError) as empty:
        await core.prepare(GenerateRequest("smollm2", TextInput("")), Caller())
    assert (empty.value.kind, empty.value.param) == (ErrorKind.INVALID_REQUEST, "prompt")


@pytest.mark.parametrize(("ttl_s", "allowed"), [(300, True), (3600, True), (3601, False), (2**32 - 1, False)])
async def test_a_prefix_is_pinned_for_at_most_the_configured_ttl(
    tokenizer: Tokenizer, ttl_s: int, allowed: bool
) -> None:
    core = _core(tokenizer)
    request = GenerateRequest("smollm2", TextInput(SYSTEM), cache_hint=CacheHint(256, ttl_s))
    if allowed:
        assert (await core.prepare(request, Caller())).cache_hint == CacheHint(256, ttl_s)
        return
    with pytest.raises(GatewayError, match="at most 3600 s") as refused:
        await core.prepare(request, Caller())
    assert (refused.value.kind, refused.value.param) == (ErrorKind.INVALID_REQUEST, "cache_hint")


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_every_error_kind_has_an_http_and_a_grpc_face(kind: ErrorKind) -> None:
    error = GatewayError("message", kind)
    status = http_status(error)
    assert 400 <= status < 600
    assert error_body(error)["error"]["message"] == "message"
    assert error_body(error, anthropic=True)["error"]["type"]
    client_fault = status < 500
    assert status_of(error) is not grpc.StatusCode.OK
    assert (status_of(error) is grpc.StatusCode.INTERNAL) == (kind is ErrorKind.INTERNAL)
    assert client_fault != (kind in _SERVER_SIDE)


_SERVER_SIDE = {
    ErrorKind.INTERNAL, ErrorKind.WORKER_FAILED, ErrorKind.UPSTREAM, ErrorKind.OVERLOADED,
    ErrorKind.NO_WORKERS, ErrorKind.DEADLINE,
}  # fmt: skip


async def test_a_text_too_long_for_any_tokenization_is_refused_before_tokenizing(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = _core(tokenizer, Limits(context_window=64))
    encoded: list[int] = []
    real_encode = tokenizer.encode_batch

    def counting(texts: list[str], **options: bool):  # records each text the gateway tokenizes
        encoded.extend(map(len, texts))  # (``encode`` tokenizes through ``encode_batch`` too)
        return real_encode(texts, **options)

    monkeypatch.setattr(tokenizer, "encode_batch", counting)
    bound = 64 * tokenizer.max_token_chars * 2
    for text, refused_early in (("a " * (bound // 2 + 1), True), ("a " * 200, False)):
        for prompt in (TextInput(text), ChatInput([{"role": "user", "content": text}])):
            encoded.clear()
            with pytest.raises(GatewayError) as refused:
                await core.prepare(GenerateRequest("smollm2", prompt), Caller())
            assert refused.value.code == "context_length_exceeded"
            assert ("characters" in refused.value.message) is refused_early
            assert (encoded == []) is refused_early


async def test_a_decision_naming_a_kv_source_tells_the_worker_where_to_fetch(tokenizer: Tokenizer) -> None:
    core = _core(tokenizer)
    job = await core.prepare(GenerateRequest("smollm2", TextInput(SYSTEM)), Caller())
    decision = RouteDecision(WorkerId("w0"), RouteReason.LOAD_OVERRIDE, 0)
    routed = Routed(decision, None, len(job.hashes), source=KVSource(WorkerId("w1"), TokenCount(256)))
    holder = info(WorkerId("w1"))
    request = calls.request(job, routed, holder)
    assert (request.kv_source.worker_id, request.kv_source.address) == ("w1", holder.address)
    assert request.kv_source.tokens == 256
    assert not calls.request(job, routed).HasField("kv_source")  # the holder is gone: name none
    plain = Routed(decision, None, len(job.hashes))
    assert not calls.request(job, plain, holder).HasField("kv_source")
