"""A Python client of the gateway's gRPC service (``kvgate.v1.KVGateway``), asyncio and sync.

    from kvgate.client import KVGateClient

    with KVGateClient("127.0.0.1:50051", api_key=os.environ.get("KVGATE_API_KEY")) as client:
        answer = client.generate(messages=[{"role": "user", "content": "Hello"}], max_tokens=32)
        print(answer.text, answer.usage.cached_tokens)
        for chunk in client.stream(prompt="Once upon a time", max_tokens=64):
            print(chunk.text, end="")

:class:`AsyncKVGateClient` is the same over ``grpc.aio``. Both send the API key as call metadata, set a
deadline on every call, and retry only where that is safe: a call that failed ``UNAVAILABLE`` before
its first token. Errors are :class:`KVGateError` with the gRPC status. ``n`` completions of one prompt
come back as ``Generation.choices``; ``logprobs=True`` (with ``top_logprobs``) and ``prompt_logprobs``
as :class:`TokenLogprob` s. torch-free: it needs only
``grpcio`` and the contract (``kvgate.proto``).
"""

from kvgate.client.aio import AsyncKVGateClient
from kvgate.client.errors import KVGateError
from kvgate.client.results import (
    Choice,
    ChoiceEnd,
    Chunk,
    Generation,
    RouteInfo,
    TokenLogprob,
    TopLogprob,
    WorkerMatch,
)
from kvgate.client.sync import KVGateClient

__all__ = [
    "AsyncKVGateClient", "Choice", "ChoiceEnd", "Chunk", "Generation", "KVGateClient", "KVGateError",
    "RouteInfo", "TokenLogprob", "TopLogprob", "WorkerMatch",
]  # fmt: skip
