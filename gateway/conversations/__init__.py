"""The Responses API's conversation state: each stored response, with the conversation it continues,
kept per tenant for ``previous_response_id`` (a Protocol, and its in-memory implementation)."""

from kvgate.gateway.conversations.memory import MemoryResponseStore
from kvgate.gateway.conversations.store import ResponseStore, ResponseStoreSettings, StoredResponse

__all__ = ["MemoryResponseStore", "ResponseStore", "ResponseStoreSettings", "StoredResponse"]
