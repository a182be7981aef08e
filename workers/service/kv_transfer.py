"""KV between workers: a Generate request whose ``kv_source`` names another worker holding a longer
cached prefix of its prompt fetches that prefix's KV (``ExportKV`` on the holder) and imports it into
the GPU tier before it is submitted, so its admission reuses it as ordinary GPU hits; and this worker's
own ``ExportKV``.

Both move :data:`~kvgate.workers.engine.kv_transfer.BATCH_BLOCKS` blocks per engine call (between two
steps, on the engine thread), so neither side holds more than a batch and the engine is never held
long. A fetch is a hint: whatever goes wrong (holder unreachable, cache gone there, deadline, a block
that does not check out), it is counted and logged once and the request computes its prompt as usual.
The importer keys every block by its own hash of its own copy of the prompt, and writes only blocks
whose tag (:func:`kvgate.proto.trust.kv_block_mac`, under the deployment's KV-block key) verifies: a
caller that has only the call token cannot place KV of its choosing in this worker's cache. Tags are
computed and checked off the event loop (hashing releases the GIL).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator

import grpc

from kvgate.common.grpc_options import CLIENT_OPTIONS
from kvgate.common.grpc_tls import ChannelSecurity
from kvgate.proto import worker_pb2, worker_pb2_grpc
from kvgate.proto.layout import reusable_tokens
from kvgate.proto.trust import kv_block_mac
from kvgate.proto.workers import WorkerInfo
from kvgate.workers.engine import EngineRequest
from kvgate.workers.engine.kv_transfer import BATCH_BLOCKS, KVBlockBytes
from kvgate.workers.kv import Prompt
from kvgate.workers.service.engine_loop import EngineLoop
from kvgate.workers.service.transfer_counters import TransferCounters

log = logging.getLogger(__name__)


class KVTransfers:
    """Fetches for this worker (``info``: its address and model fingerprint) and its exports. Owns one
    channel per holder address, opened with ``security`` on first use, closed by :meth:`close`.
    ``timeout_s``: the most one fetch may take, connection included."""

    def __init__(
        self,
        loop: EngineLoop,
        info: WorkerInfo,
        security: ChannelSecurity,
        block_size: int,
        timeout_s: float,
        counters: TransferCounters | None = None,
        mac_key: bytes | None = None,
    ) -> None:
        self._loop, self._info, self._security = loop, info, security
        self._mac_key = mac_key  # the deployment's KV-block key (None: no secret, blocks untagged)
        self._block_size, self._timeout_s = block_size, timeout_s
        self.counters = counters if counters is not None else TransferCounters()
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._closed = False

    async def fetch(self, source: worker_pb2.KVSource, request: EngineRequest) -> None:
        """Imports the KV of ``request``'s prompt prefix from ``source`` when it holds more of it than
        this worker. Never raises (but for cancellation): a failure is counted and logged."""
        if self._closed or not source.address or source.address == self._info.address or not source.tokens:
            return
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._fetch(source, request)
        except Exception as exc:  # a hint that failed: the request computes its prompt as usual
            self.counters.fetch_failures += 1
            log.warning("fetching the KV of request %r from worker %r (%s) failed: %r",
                        request.request_id, source.worker_id, source.address, exc)  # fmt: skip

    async def export(self, request: EngineRequest, max_tokens: int) -> AsyncIterator[worker_pb2.KVBlockData]:
        """The KV of ``request``'s cached prompt prefix, at most ``max_tokens`` tokens, block by block;
        ends where the cache does (a block evicted between two batches ends it there)."""
        prompt, _ = await self._loop.call(lambda e: e.transfer_prompt(request))
        end = min(max_tokens, reusable_tokens(len(prompt), self._block_size)) // self._block_size
        first = 0
        while first < end:
            count = min(BATCH_BLOCKS, end - first)
            blocks = await self._loop.call(lambda e, f=first, c=count: e.export_kv(prompt, f, c))
            tags = await asyncio.to_thread(_tags, self._mac_key, blocks)
            for block, tag in zip(blocks, tags, strict=True):
                yield worker_pb2.KVBlockData(
                    index=block.index, block_hash=block.block_hash, data=block.data, mac=tag
                )
                self.counters.exported_blocks += 1
            if len(blocks) < count:
                return
            first += count

    async def close(self) -> None:
        """Closes every channel; later fetches do nothing. Idempotent."""
        self._closed = True
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

    async def _fetch(self, source: worker_pb2.KVSource, request: EngineRequest) -> None:
        prompt, local = await self._loop.call(lambda e: e.transfer_prompt(request))
        wanted = min(source.tokens, reusable_tokens(len(prompt), self._block_size))
        if wanted <= local:
            return  # held here already: nothing to fetch
        export = self._export_request(request, wanted)
        call = self._stub(source.address).ExportKV(export, timeout=self._timeout_s)
        try:
            batch: list[KVBlockBytes] = []
            tags: list[bytes] = []
            async for msg in call:
                batch.append(KVBlockBytes(msg.index, msg.block_hash, msg.data))
                tags.append(msg.mac)
                if len(batch) == BATCH_BLOCKS:
                    if not await self._import(prompt, batch, tags):
                        return
                    batch, tags = [], []
            if batch:
                await self._import(prompt, batch, tags)
        finally:
            call.cancel()  # a no-op once the stream ended

    async def _import(self, prompt: Prompt, batch: list[KVBlockBytes], tags: list[bytes]) -> bool:
        """Imports one batch once every tag verifies (ValueError otherwise: nothing of it is written);
        True when all of it is held here now (go on with the next)."""
        if not await asyncio.to_thread(_verified, self._mac_key, batch, tags):
            raise ValueError("a KV block's tag does not verify under this deployment's key")
        result = await self._loop.call(lambda e: e.import_kv(prompt, batch))
        self.counters.imported_blocks += result.imported_blocks
        self.counters.imported_tokens += result.imported_blocks * self._block_size
        return result.cached_blocks + result.imported_blocks > batch[-1].index

    def _export_request(self, request: EngineRequest, max_tokens: int) -> worker_pb2.ExportKVRequest:
        return worker_pb2.ExportKVRequest(
            prompt_token_ids=request.prompt_ids.tolist(),
            cache_salt=request.cache_salt,
            adapter_id=request.adapter_id,
            shared_salt=request.shared_salt,
            shared_tokens=request.shared_tokens,
            max_tokens=max_tokens,
            fingerprint=self._info.fingerprint,
        )

    def _stub(self, address: str) -> worker_pb2_grpc.KVWorkerStub:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = self._security.open(address, CLIENT_OPTIONS)
        return worker_pb2_grpc.KVWorkerStub(channel)


def _tags(key: bytes | None, blocks: list[KVBlockBytes]) -> list[bytes]:
    """Each block's tag under ``key`` (empty ones without a key)."""
    if key is None:
        return [b""] * len(blocks)
    return [kv_block_mac(key, b.index, b.block_hash, b.data) for b in blocks]


def _verified(key: bytes | None, blocks: list[KVBlockBytes], tags: list[bytes]) -> bool:
    """True iff every tag is the block's under ``key`` (constant-time compares); without a key, iff
    every tag is empty (a tagged block comes from a deployment with a secret: not this one)."""
    expected = _tags(key, blocks)
    return all(hmac.compare_digest(e, t) for e, t in zip(expected, tags, strict=True))
