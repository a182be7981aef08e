"""A hash is a hint, never trusted: forced collisions (a hand-made Prompt carrying another prompt's
hashes) must never reuse a block whose parent or token ids differ."""

from __future__ import annotations

import numpy as np

from kvgate.proto.hashing import HashRoot
from kvgate.proto.ids import Tier
from kvgate.workers.kv import Admission, CachedTokens, Prompt
from tests.workers.kv.helpers import S, check_integrity, ids, prompt, rig


def forged(token_ids: list[int], like: Prompt, root: bytes | None = None) -> Prompt:
    """``token_ids`` carrying ``like``'s hashes: every block hash collides with ``like``'s."""
    tokens = np.array(token_ids, dtype="<u4")
    return Prompt(tokens, like.root if root is None else root, like.block_hashes, like.chunk_hashes)


def test_colliding_hashes_with_other_tokens_are_a_miss() -> None:
    r = rig(gpu=10)
    honest = prompt(ids(0, 9))
    r.kv.admit(S("a"), honest, 100)
    r.kv.end_step()
    fake = forged(ids(500, 9), honest)
    assert r.kv.lookup(fake).blocks == ()
    # b computes its own blocks; they collide with a's hashes, so they stay uncached.
    assert r.kv.admit(S("b"), fake, 100) == Admission((3, 4, 5), CachedTokens(), 9, ())
    assert [r.kv.gpu_pool.get(h).block_id for h in honest.block_hashes] == [0, 1]
    r.kv.end_step()
    r.kv.free(S("a"))
    r.kv.free(S("b"))
    assert r.kv.lookup(honest).cached == CachedTokens(gpu=8)
    assert r.kv.lookup(fake).blocks == ()
    check_integrity(r.kv)


def test_a_collision_in_a_later_block_stops_the_hit_there() -> None:
    r = rig(gpu=10)
    honest = prompt(ids(0, 9))
    r.kv.admit(S("a"), honest, 100)
    r.kv.end_step()
    # Same first block, other second block under the same hash: only block 0 is reused.
    assert r.kv.lookup(forged([*ids(0, 4), *ids(500, 5)], honest)).blocks == ((Tier.GPU, 0),)


def test_equal_tokens_under_another_root_are_a_miss() -> None:
    r = rig(gpu=10)
    honest = prompt(ids(0, 9))
    r.kv.admit(S("a"), honest, 100)
    r.kv.end_step()
    # Same tokens and hashes, but block 0's parent (the root: another tenant's salt) differs.
    other_root = HashRoot(b"test-secret", "test-model", cache_salt="tenant-2").digest()
    assert r.kv.lookup(forged(ids(0, 9), honest, root=other_root)).blocks == ()
    # Built honestly, another salt gives other hashes anyway.
    assert r.kv.lookup(prompt(ids(0, 9), root=HashRoot(b"test-secret", "test-model"))).blocks == ()


def test_a_forged_entry_never_serves_the_honest_prompt() -> None:
    r = rig(gpu=4)
    honest = prompt(ids(0, 9))
    # The forged prompt comes first, so its blocks are cached under the honest prompt's hashes.
    r.kv.admit(S("b"), forged(ids(500, 9), honest), 100)
    r.kv.end_step()
    r.kv.free(S("b"))
    assert r.kv.lookup(honest).blocks == ()
    assert r.kv.admit(S("a"), honest, 100).cached == CachedTokens()
    check_integrity(r.kv)
