"""What the Responses API keeps of a stored response, and the Protocol of the stores that keep it.

A stored response is the response object (what ``GET /v1/responses/{id}`` returns) and its whole
conversation as chat turns: the earlier turns it continued, its own input and its output, without its
``instructions`` and tool declarations (neither carries over to a continuation, as in OpenAI's API). A
continuation renders those turns again through the chat template, so its prompt begins with the
earlier turn's prompt and answer: the tokens the worker that served it still holds.

Every lookup names a tenant: another tenant's response is not there (its existence is not revealed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

Turns = tuple[dict[str, str], ...]
"""``({"role": ..., "content": ...}, ...)``, as the chat template takes them."""


@dataclass(frozen=True, slots=True)
class ResponseStoreSettings:
    """A store keeps at most ``max_responses`` responses and ``max_bytes`` bytes of them (all tenants
    together; the oldest go first), at most ``max_per_tenant`` of one tenant (its oldest go first),
    none older than ``ttl_s`` seconds."""

    ttl_s: float = 3600.0
    max_responses: int = 10_000
    max_bytes: int = 256 * 1024 * 1024
    max_per_tenant: int = 1_000

    def __post_init__(self) -> None:
        for name in ("ttl_s", "max_responses", "max_bytes", "max_per_tenant"):
            if getattr(self, name) <= 0:
                raise ValueError(f"responses.{name} must be positive")


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One stored response: ``response`` as the API returns it, ``turns`` its whole conversation,
    ``input_items`` the items of its own input as ``GET /v1/responses/{id}/input_items`` lists them
    (oldest first, each with its ``id``)."""

    response: dict[str, Any]
    turns: Turns
    input_items: tuple[dict[str, Any], ...] = ()

    @property
    def response_id(self) -> str:
        return str(self.response["id"])

    @property
    def nbytes(self) -> int:
        """Its size as the store counts it: its JSON text (the turns' text counted once more)."""
        items = len(json.dumps(self.input_items)) if self.input_items else 0
        return len(json.dumps(self.response)) + sum(len(t["content"]) + 32 for t in self.turns) + items


class ResponseStore(Protocol):
    """Where stored responses are kept. Implementations: :class:`MemoryResponseStore` (one gateway's
    memory), :class:`RedisResponseStore` (shared by the gateways on one Redis). Every method is safe
    to call from the event loop and never blocks it; a store that cannot answer raises GatewayError."""

    async def put(self, tenant: str, stored: StoredResponse) -> None:
        """Keeps ``stored`` for ``tenant`` (replacing one of the same id), then drops what is over a
        bound; one larger than the whole byte bound is not kept."""
        ...

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None:
        """``tenant``'s response ``response_id``; None when it has none (expired, evicted, deleted,
        never stored, or another tenant's)."""
        ...

    async def delete(self, tenant: str, response_id: str) -> bool:
        """Forgets ``tenant``'s response ``response_id``; False when it had none. Idempotent."""
        ...
