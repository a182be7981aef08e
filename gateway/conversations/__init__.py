"""The Responses API's conversation state: each stored response, with the conversation it continues,
kept per tenant for ``previous_response_id`` (a Protocol; in memory, or in Redis)."""

from kvgate.gateway.conversations.memory import MemoryResponseStore
from kvgate.gateway.conversations.redis_store import RedisResponseStore
from kvgate.gateway.conversations.store import ResponseStore, ResponseStoreSettings, StoredResponse

__all__ = [
    "MemoryResponseStore",
    "RedisResponseStore",
    "ResponseStore",
    "ResponseStoreSettings",
    "StoredResponse",
]
