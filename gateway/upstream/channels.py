"""One gRPC channel per worker incarnation, created on first use and closed when it goes away."""

from __future__ import annotations

import grpc

from kvgate.common.grpc_options import CLIENT_OPTIONS
from kvgate.common.grpc_tls import ChannelSecurity, TlsFiles
from kvgate.gateway.upstream.errors import UpstreamError
from kvgate.proto import worker_pb2_grpc
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.workers import WorkerInfo

_Key = tuple[WorkerId, Epoch, str]


class ChannelPool:
    """Channels keyed by (worker, epoch, address): a restarted worker gets a fresh channel, and the
    old one is closed by :meth:`retain`. Owned by the gateway's composition root. Every channel uses
    ``tls`` (None: plaintext) and presents the call token of ``secret`` (empty: none)."""

    def __init__(
        self,
        options: tuple[tuple[str, int], ...] = CLIENT_OPTIONS,
        tls: TlsFiles | None = None,
        secret: bytes = b"",
    ) -> None:
        self._options = options
        self._security = ChannelSecurity.of(tls, secret)  # reads the TLS files now, not per channel
        self._channels: dict[_Key, grpc.aio.Channel] = {}
        self._closed = False

    def stub(self, info: WorkerInfo) -> worker_pb2_grpc.KVWorkerStub:
        """A stub on the worker's channel (created if needed; never blocks). UpstreamError once the
        pool is closed (the gateway is shutting down)."""
        if self._closed:
            raise UpstreamError("the gateway is shutting down")
        key = (info.worker_id, info.epoch, info.address)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._security.open(info.address, self._options)
            self._channels[key] = channel
        return worker_pb2_grpc.KVWorkerStub(channel)

    async def retain(self, live: list[WorkerInfo]) -> None:
        """Closes the channels of every incarnation not in ``live``."""
        keep = {(w.worker_id, w.epoch, w.address) for w in live}
        for key in [k for k in self._channels if k not in keep]:
            await self._channels.pop(key).close()

    async def close(self) -> None:
        """Closes every channel; later :meth:`stub` calls fail. Idempotent."""
        self._closed = True
        await self.retain([])

    def __len__(self) -> int:
        return len(self._channels)
