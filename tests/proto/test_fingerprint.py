"""The config fingerprint that workers advertise and gateways check."""

from __future__ import annotations

import dataclasses

import pytest

from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.layout import CacheLayout

BASE = CacheLayout(
    model_id="HuggingFaceTB/SmolLM2-135M-Instruct", secret=b"s3cret", chunk_size=128, block_size=16
)


def test_equal_configs_have_equal_fingerprints() -> None:
    twin = CacheLayout(model_id=BASE.model_id, secret=b"s3cret", chunk_size=128, block_size=16)
    assert twin.fingerprint() == BASE.fingerprint()
    assert len(BASE.fingerprint()) == 32


@pytest.mark.parametrize(
    "change",
    [{"model_id": "other"}, {"secret": b""}, {"chunk_size": 256}, {"block_size": 32}, {"kv_dtype": "int8"}],
)
def test_every_field_changes_the_fingerprint(change: dict) -> None:
    assert dataclasses.replace(BASE, **change).fingerprint() != BASE.fingerprint()


@pytest.mark.parametrize(
    ("one", "other"), [("auto", "int8"), ("int8", "fp8"), ("bf16", "fp32"), ("fp8", "bf16")]
)
def test_layouts_differing_only_in_kv_dtype_never_share_cache_entries(one: str, other: str) -> None:
    """Different fingerprints (the gateway refuses the other) and different roots, so different chunk
    hashes: the index never confuses one KV type's blocks with another's."""
    a, b = (dataclasses.replace(BASE, kv_dtype=name) for name in (one, other))
    assert a.fingerprint() != b.fingerprint()
    assert a.root(cache_salt="t").digest() != b.root(cache_salt="t").digest()
    tokens = list(range(256))
    assert chunk_hashes(tokens, a.root().digest(), 128) != chunk_hashes(tokens, b.root().digest(), 128)


def test_auto_keeps_the_fingerprint_and_roots_of_before_kv_dtypes() -> None:
    """Golden values from before the field existed: deployments that name no KV dtype are unchanged."""
    assert BASE.kv_dtype == "auto"
    layout = CacheLayout("m")
    assert layout.fingerprint() == "f246b9ebcce9238a6b4c2bb045ae5d60"
    assert layout.root().digest().hex() == "01b1657072f3b4cc1b36bd7baefcb93f"


def test_the_fingerprint_reveals_nothing_of_the_secret_but_its_presence() -> None:
    """Two secrets give one fingerprint: nothing to brute-force the secret against (deployments with
    different secrets tell each other apart by their records' signatures, tests/proto/test_trust.py)."""
    assert dataclasses.replace(BASE, secret=b"x" * 64).fingerprint() == BASE.fingerprint()
    assert BASE.root().secret == b"s3cret"


def test_root_carries_the_request_fields() -> None:
    root = BASE.root(adapter_id="lora", cache_salt="tenant")
    assert (root.model_id, root.adapter_id, root.cache_salt) == (BASE.model_id, "lora", "tenant")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model_id": ""}, "model_id"),
        ({"model_id": "m", "chunk_size": 100, "block_size": 16}, "multiple"),
        ({"model_id": "m", "block_size": 0}, "positive"),
        ({"model_id": "m", "kv_dtype": "int4"}, "unknown KV dtype 'int4'; known: auto, fp32"),
    ],
)
def test_invalid_configs_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CacheLayout(**kwargs)


@pytest.mark.parametrize("bad", ["", "~worker", "has space", "x" * 129, "tab\tbed"])
def test_worker_ids_that_would_break_the_index_are_refused(bad: str) -> None:
    from kvgate.proto.ids import Epoch, WorkerId
    from kvgate.proto.workers import WorkerInfo

    with pytest.raises(ValueError, match="worker id"):
        WorkerInfo(WorkerId(bad), Epoch(1), "127.0.0.1:1", "f" * 32, "m")
