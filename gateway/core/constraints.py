"""Output constraints checked before a request is routed: a schema the grammar engine cannot compile
is the client's error (400, naming the field it came in), never a worker's failure after routing.

The check compiles the grammar without a tokenizer (``kvgate.common.grammar``), in a worker thread:
milliseconds for an ordinary schema, more for a huge one. Agents send the same schema on every call,
so the verdicts of recent ones are kept (by a digest of the spec, so the memory is bounded by the
count, not by the schemas' size).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

import xxhash

from kvgate.common.grammar import grammar_error
from kvgate.gateway.errors import invalid
from kvgate.proto.constraint import OutputConstraint

DEFAULT_VERDICTS = 1024  # constraints whose verdict is remembered


class ConstraintChecker:
    """Owned by the composition root; shared by every request (its verdict cache is its only state,
    touched on the event loop only)."""

    def __init__(self, capacity: int = DEFAULT_VERDICTS) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._verdicts: OrderedDict[bytes, str | None] = OrderedDict()  # digest -> error (None: fine)

    async def check(self, constraint: OutputConstraint | None, param: str) -> None:
        """Returns when ``constraint`` compiles (or is None); INVALID_REQUEST naming ``param`` (the
        request field it came from) with the grammar engine's reason when it does not."""
        if constraint is None:
            return
        key = xxhash.xxh3_128_digest(f"{constraint.kind}\x00{constraint.spec}".encode())
        if key in self._verdicts:
            self._verdicts.move_to_end(key)
            error = self._verdicts[key]
        else:
            error = await asyncio.to_thread(grammar_error, constraint)
            self._remember(key, error)
        if error is not None:
            raise invalid(f"The schema in `{param}` cannot be used for constrained decoding: {error}", param)

    def _remember(self, key: bytes, error: str | None) -> None:
        self._verdicts[key] = error
        while len(self._verdicts) > self._capacity:
            self._verdicts.popitem(last=False)
