"""A trace made ready to replay: requests in arrival order with their real chunk hashes.

Hashing is the expensive part of preparing a trace (~0.25 ms per 15k-token prompt), and the hashes do
not depend on the policy, so a workload is built once per run and replayed by every policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.proto.ids import ChunkHash
from kvgate.sim.tokens import request_hashes
from kvgate.sim.trace import TraceRequest


@dataclass(frozen=True, slots=True)
class Workload:
    """``hashes[i]`` are the chunk hashes of ``requests[i]``; requests are sorted by arrival.

    Equal hashes are one shared ``bytes`` object (interned), which keeps a large trace's memory to
    one copy per distinct chunk.
    """

    requests: tuple[TraceRequest, ...]
    hashes: tuple[tuple[ChunkHash, ...], ...]
    chunk_size: int

    @staticmethod
    def build(requests: Sequence[TraceRequest], block_tokens: int, chunk_size: int) -> Workload:
        """Hashes every prompt (tokens from :func:`kvgate.sim.tokens.prompt_tokens`)."""
        if not requests:
            raise ValueError("the trace has no requests")
        ordered = tuple(sorted(requests, key=lambda r: r.timestamp_ms))
        interned: dict[ChunkHash, ChunkHash] = {}
        hashes = tuple(
            tuple(interned.setdefault(h, h) for h in chain)
            for chain in request_hashes(ordered, block_tokens, chunk_size)
        )
        return Workload(ordered, hashes, chunk_size)

    def arrivals_s(self, speed: float = 1.0) -> list[float]:
        """Arrival times in seconds from the first request, compressed ``speed`` times."""
        first = self.requests[0].timestamp_ms
        return [(r.timestamp_ms - first) / 1000 / speed for r in self.requests]

    @property
    def prompt_tokens(self) -> int:
        return sum(r.input_length for r in self.requests)

    @property
    def distinct_chunks(self) -> int:
        return len({h for chain in self.hashes for h in chain})
