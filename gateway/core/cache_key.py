"""``prompt_cache_key``: its one check, the same on every front (docs/CACHING.md, "prompt_cache_key").

The key is a routing hint, combined with the prefix hash: among workers that hold as much of the
prompt (or none of it), requests with the same key go to the key's home worker; a worker holding a
longer prefix still wins. It never changes which blocks may be shared: it is not a cache salt.
"""

from __future__ import annotations

from kvgate.gateway.errors import invalid

MAX_CACHE_KEY_CHARS = 1024
"""The longest key, in characters (as OpenAI's own bound is documented nowhere, a generous one)."""


def routing_key(key: str | None) -> str | None:
    """``key`` as routing uses it: None for none or an empty one (OpenAI's "no key"); INVALID_REQUEST
    naming ``prompt_cache_key`` for a key longer than :data:`MAX_CACHE_KEY_CHARS` or not valid
    Unicode (a lone surrogate). Pure, idempotent."""
    if not key:
        return None
    if len(key) > MAX_CACHE_KEY_CHARS:
        raise invalid(f"prompt_cache_key has more than {MAX_CACHE_KEY_CHARS} characters", "prompt_cache_key")
    if not key.isascii():
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise invalid("prompt_cache_key must be valid Unicode", "prompt_cache_key") from None
    return key
