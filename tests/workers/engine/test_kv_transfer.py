"""The byte layout of an exported KV block, on CPU pools: the exporter's bytes of a block, written into
another worker's pools at another block id, reproduce it exactly (all layers, K, V and, for quantised
pools, the scales); the length is the contract's bytes per block; blocks that do not check out against
the importer's own hashes are refused before anything is written."""

from __future__ import annotations

import pytest
import torch

from kvgate.proto.kv_dtype import kv_block_bytes, kv_dtype
from kvgate.proto.layout import KVGeometry
from kvgate.workers.engine.kv_transfer import (
    KVBlockBytes,
    block_nbytes,
    export_blocks,
    import_blocks,
    wire_hash,
)
from kvgate.workers.kv import CopyPlan
from kvgate.workers.model import allocate_kv_caches
from tests.workers.kv.helpers import BS, S, check_integrity, ids, prompt, rig

DTYPES = ["float32", "bfloat16", "int8"]


def filled(geometry: KVGeometry, num_blocks: int, seed: int) -> list:
    pools = allocate_kv_caches(geometry, num_blocks, BS, device="cpu")
    gen = torch.Generator().manual_seed(seed)
    for layer in pools:
        for part in parts(layer):
            noise = torch.randint(-100, 100, part.shape, generator=gen)
            part.copy_(noise.to(part.dtype))
    return pools


def parts(layer) -> list[torch.Tensor]:
    return [layer.k, layer.v, *(layer.scales or ())]


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_block_moves_exactly_between_pools(dtype: str) -> None:
    geometry = KVGeometry(num_layers=2, num_kv_heads=2, head_dim=8, dtype=dtype)
    src, dst = filled(geometry, 4, seed=1), filled(geometry, 4, seed=2)
    assert block_nbytes(src) == kv_block_bytes(geometry, kv_dtype(dtype), BS)

    # The exporter caches a prompt's 3 reusable blocks in GPU blocks 0, 1, 2.
    exporter = rig(gpu=4)
    p = prompt(ids(0, 13))
    exporter.kv.admit(S("a"), p, 100)
    exporter.kv.end_step()
    blocks = export_blocks(exporter.kv, src, [], p, 0, 16)
    assert [(b.index, b.block_hash) for b in blocks] == [(i, wire_hash(p.block_hashes[i])) for i in range(3)]

    # The importer's GPU block 0 is in use, so the blocks land in 1, 2, 3.
    importer = rig(gpu=4)
    importer.kv.admit(S("other"), prompt(ids(100, 2)), 100)
    plans: list[CopyPlan] = []
    result = import_blocks(importer.kv, dst, plans.append, p, blocks)
    assert (result.cached_blocks, result.imported_blocks) == (0, 3)
    assert plans == [CopyPlan()]
    for layer_src, layer_dst in zip(src, dst, strict=True):
        for part_src, part_dst in zip(parts(layer_src), parts(layer_dst), strict=True):
            assert torch.equal(part_dst[1:4], part_src[0:3])
    check_integrity(importer.kv)


def test_blocks_that_do_not_check_out_are_refused_before_any_write() -> None:
    geometry = KVGeometry(num_layers=1, num_kv_heads=1, head_dim=4)
    pools = filled(geometry, 4, seed=3)
    before = [t.clone() for t in (pools[0].k, pools[0].v)]
    p = prompt(ids(0, 13))
    good = [KVBlockBytes(i, wire_hash(p.block_hashes[i]), bytes(block_nbytes(pools))) for i in range(3)]
    bad = {  # what is wrong -> the refusal's words
        "has index 2, expected 1": [good[0], good[2]],
        "holds 1 bytes": [good[0], KVBlockBytes(1, good[1].block_hash, b"\0")],
        "hash differs": [good[0], KVBlockBytes(1, good[1].block_hash ^ 1, good[1].data)],
        "past the prompt": [*good, KVBlockBytes(3, 0, good[0].data)],
    }
    r = rig(gpu=4)
    for refusal, blocks in bad.items():
        with pytest.raises(ValueError, match=refusal):
            import_blocks(r.kv, pools, lambda plan: None, p, blocks)
        assert r.kv.gpu_pool.num_empty == 4, refusal
    assert torch.equal(pools[0].k, before[0])
    assert torch.equal(pools[0].v, before[1])
