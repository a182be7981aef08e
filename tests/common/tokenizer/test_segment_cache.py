"""The cache of pieces' ids: bounded in bytes, least recently used evicted first, entries read-only."""

from __future__ import annotations

import numpy as np
import pytest

from kvgate.common.tokenizer import SegmentCache
from kvgate.common.tokenizer.segment_cache import entry_cost


def _ids(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.uint32)


def test_the_least_recently_used_entry_is_evicted_to_fit() -> None:
    cost = entry_cost("a" * 10, _ids(100))
    cache = SegmentCache(capacity_bytes=2 * cost)
    cache.put("a" * 10, _ids(100))
    cache.put("b" * 10, _ids(100))
    assert cache.get("a" * 10) is not None  # "a..." is now the most recently used
    cache.put("c" * 10, _ids(100))

    assert cache.get("b" * 10) is None
    assert cache.get("a" * 10) is not None
    assert cache.get("c" * 10) is not None
    assert (len(cache), cache.nbytes) == (2, 2 * cost)
    assert (cache.hits, cache.misses) == (3, 1)


def test_the_charge_never_exceeds_the_capacity() -> None:
    cache = SegmentCache(capacity_bytes=10_000)
    for i in range(200):
        cache.put(f"piece {i} " * (i % 7), _ids(i % 50))
        assert cache.nbytes <= 10_000
    assert cache.nbytes == sum(entry_cost(t, ids) for t, ids in cache._entries.items())


def test_an_entry_larger_than_the_capacity_is_not_kept_and_evicts_nothing() -> None:
    cache = SegmentCache(capacity_bytes=1_000)
    cache.put("small", _ids(4))
    cache.put("huge", _ids(10_000))
    assert cache.get("huge") is None
    assert cache.get("small") is not None


def test_putting_a_key_again_replaces_it_without_charging_twice() -> None:
    cache = SegmentCache()
    cache.put("x", _ids(4))
    cache.put("x", _ids(8))
    assert (len(cache), cache.nbytes) == (1, entry_cost("x", _ids(8)))
    assert cache.get("x").tolist() == list(range(8))


def test_zero_capacity_keeps_nothing_and_negative_is_refused() -> None:
    cache = SegmentCache(capacity_bytes=0)
    cache.put("x", _ids(1))
    assert cache.get("x") is None
    with pytest.raises(ValueError, match="capacity_bytes"):
        SegmentCache(capacity_bytes=-1)


def test_stored_ids_are_read_only() -> None:
    cache = SegmentCache()
    cache.put("x", _ids(3))
    with pytest.raises(ValueError, match="read-only"):
        cache.get("x")[0] = 7
