"""Whether a piece of prompt text looks volatile: the dates, times, ids and counters that, placed
early in a prompt, change it on every request and so end its cached prefix there."""

from __future__ import annotations

import re

_PATTERNS = (
    r"\d{4}-\d{1,2}-\d{1,2}",  # ISO date
    r"\d{1,2}/\d{1,2}/\d{2,4}",  # US or European date
    r"\d{1,2}:\d{2}(:\d{2})?",  # time of day
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",  # UUID
    r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{12,}\b",  # hex id
    r"\b\d{5,}\b",  # counter, epoch seconds, long number
    r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",  # weekday
    r"\b(req|id|session|request|trace)[-_:= ]+(?=[a-z]*\d)[a-z0-9]{4,}",  # labelled id
)
_VOLATILE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)


def looks_volatile(text: str) -> bool:
    """True when ``text`` holds something that usually changes per request (pure)."""
    return _VOLATILE.search(text) is not None
