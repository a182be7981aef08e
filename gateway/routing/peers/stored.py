"""What an event-fed peer index knows of a candidate: the leading chunks it has stored."""

from __future__ import annotations

from kvgate.gateway.routing.types import Candidate
from kvgate.index.types import PrefixMatch

_PENDING = "P"


def stored_chunks(candidate: Candidate) -> int:
    """Leading chunks of the prompt the worker reported stored (either tier), up to the first chunk
    that is missing or only pending: kvgate's pending entries (a chunk being computed now) have no
    counterpart in Dynamo's or llm-d's index, which hear of a block once it is stored."""
    match: PrefixMatch | None = candidate.match
    if match is None:
        return 0
    end = match.tiers.find(_PENDING)
    return len(match.tiers) if end < 0 else end
