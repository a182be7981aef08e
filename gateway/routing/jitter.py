"""Reproducible randomness for routing: a number in [0, 1) fixed by a request's key and a slot."""

from __future__ import annotations

_MASK = (1 << 64) - 1


def unit(key: int, slot: int) -> float:
    """Uniform-looking in [0, 1), the same for the same ``(key, slot)`` in every process
    (splitmix64's finaliser over ``key`` advanced by ``slot + 1`` golden-ratio steps)."""
    z = (key + (slot + 1) * 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((z ^ (z >> 31)) >> 11) / (1 << 53)
