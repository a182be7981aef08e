"""Typed counts that cross module boundaries: a token count is not a chunk count is not a block count.

``NewType`` costs nothing at run time; the type checker and the reader see which unit a number is in.
Conversions between them are rules of the cache layout (:mod:`kvgate.proto.layout`).
"""

from __future__ import annotations

from typing import NewType

TokenCount = NewType("TokenCount", int)
"""A number of tokens (prompt, cached, reusable, pending prefill)."""

ChunkCount = NewType("ChunkCount", int)
"""A number of ``chunk_size``-token chunks (matched in the index, full chunks of a prompt)."""

BlockCount = NewType("BlockCount", int)
"""A number of ``block_size``-token KV blocks of one tier."""
