"""One ``Generate`` call's replies as the client's items: each delta a :class:`Chunk`, each
``ChoiceDone`` (n > 1) a :class:`ChoiceEnd`, the final message the :class:`Generation` of them all."""

from __future__ import annotations

from kvgate.client.results import ChoiceEnd, Chunk, Generation
from kvgate.proto import gateway_pb2
from kvgate.proto.sampling import FinishReason

Item = Chunk | ChoiceEnd | Generation


class Replies:
    """The replies of one attempt of a call; mutable, one per attempt."""

    def __init__(self) -> None:
        self._chunks: list[Chunk] = []
        self._ended: dict[int, FinishReason] = {}  # choice -> its finish reason, from its ChoiceDone

    @property
    def output(self) -> bool:
        """Some output arrived: retrying the call now could answer twice."""
        return bool(self._chunks or self._ended)

    def item(self, reply: gateway_pb2.GatewayResponse) -> Item | None:
        """The item ``reply`` is; None for a kind this client does not know (a newer gateway's)."""
        kind = reply.WhichOneof("kind")
        if kind == "delta":
            self._chunks.append(Chunk.of(reply.delta))
            return self._chunks[-1]
        if kind == "choice_done":
            end = ChoiceEnd.of(reply.choice_done)
            self._ended[end.index] = end.finish_reason
            return end
        if kind == "final":
            return Generation.of(self._chunks, reply.final, self._ended)
        return None
